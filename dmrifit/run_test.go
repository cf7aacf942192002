package dmrifit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

// randomB3S is a b3s posterior with perturbed random weights (what the
// run does with the numbers does not depend on their quality).
func randomB3S(t *testing.T) *posterior.Posterior {
	t.Helper()
	cfg, err := train.LoadConfig("../configs/b3s.yaml", "b3s")
	if err != nil {
		t.Fatal(err)
	}
	net, err := network.New(fdmri.B3S(), cfg.Network, 1)
	if err != nil {
		t.Fatal(err)
	}
	perturb(net, 1)
	return posterior.New(net)
}

// smallBSZT is an untrained bszt network of the configs/bszt.yaml kind,
// shrunk to one layer per part and width 16.
func smallBSZT(t *testing.T) *network.Net {
	t.Helper()
	return smallNet(t, "bszt", fdmri.BSZT())
}

// smallNet is an untrained network for family f with the network of
// configs/NAME.yaml shrunk to one layer per part and width 16.
func smallNet(t *testing.T, name string, f family.Family) *network.Net {
	t.Helper()
	cfg, err := train.LoadConfig("../configs/"+name+".yaml", name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Network.ModelDim, cfg.Network.EncoderLayers, cfg.Network.MaskLayers, cfg.Network.ParamLayers = 16, 1, 1, 1
	cfg.Network.Heads, cfg.Network.HeadDim = 2, 8
	net, err := network.New(f, cfg.Network, 1)
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// perturb adds N(0, 0.3²) noise to every weight of net (stream seed).
func perturb(net *network.Net, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
}

// checkResumes runs post over a synthetic scan three ways with the
// settings set — whole; interrupted at the first progress report after
// some voxels; continued — and checks that the interrupted run says so,
// keeps a partial state and no run.json, that the continued run resumes
// some but not all voxels, removes the state, and writes the same
// outputs as the whole run byte for byte (at least minOutputs of them).
// It returns the continued run's summary and output folder.
func checkResumes(t *testing.T, post *posterior.Posterior, set FitSettings, minOutputs int) (*RunSummary, string) {
	t.Helper()
	dir := t.TempDir()
	scan, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(out string) RunConfig {
		return RunConfig{Tool: "test", Out: filepath.Join(dir, out), Model: "random"}
	}
	if _, err := Run(context.Background(), scan, post, set, cfg("whole")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := cfg("resumed")
	c.Progress = progress.Func(func(done, _ int) {
		if done > 0 {
			cancel()
		}
	})
	_, err = Run(ctx, scan, post, set, c)
	if err == nil || !strings.Contains(err.Error(), "interrupted") || !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: error %v, want one saying interrupted", err)
	}
	if _, err := os.Stat(filepath.Join(c.Out, StateFile)); err != nil {
		t.Fatalf("no partial state after the interruption: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Out, "run.json")); err == nil {
		t.Fatal("an interrupted run wrote run.json")
	}
	sum, err := Run(context.Background(), scan, post, set, cfg("resumed"))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resumed == 0 || sum.Resumed >= len(scan.Voxels) {
		t.Errorf("resumed %d of %d voxels, want some but not all", sum.Resumed, len(scan.Voxels))
	}
	if _, err := os.Stat(filepath.Join(c.Out, StateFile)); !os.IsNotExist(err) {
		t.Errorf("partial state left after the run: %v", err)
	}
	files, err := OutputFiles(filepath.Join(dir, "whole"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if f == "run.json" {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(dir, "whole", f))
		b, err := os.ReadFile(filepath.Join(c.Out, f))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the whole and the resumed run (%v)", f, err)
		}
		n++
	}
	if n < minOutputs {
		t.Errorf("%d outputs compared, want at least %d", n, minOutputs)
	}
	if _, err := Run(context.Background(), scan, post, set, cfg("whole")); err == nil || !strings.Contains(err.Error(), "earlier run") {
		t.Errorf("a run into a finished folder without Fresh: error %v", err)
	}
	return sum, c.Out
}

// readSettings decodes the settings of dir/run.json into v.
func readSettings(t *testing.T, dir string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := struct {
		Settings any `json:"settings"`
	}{Settings: v}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
}

// TestRunResumes checks an interrupted ball-and-sticks Run (checkResumes:
// the BedpostX layout and the model maps) and its run.json record of the
// resumed voxels, the model and the weights hash; a run into the
// finished folder is refused without Fresh.
func TestRunResumes(t *testing.T) {
	set := FitSettings{Lambda: 0.4, Samples: 2, Steps: 2, Solver: "ab2", Seed: 3, BatchSize: 8, Correct: "none"}
	sum, out := checkResumes(t, randomB3S(t), set, 20)
	var rs RunSettings
	readSettings(t, out, &rs)
	if rs.ResumedVoxels != sum.Resumed || rs.Model != "random" || len(rs.WeightsSHA) != 64 {
		t.Errorf("run.json settings %+v, want %d resumed voxels, model random and a weights hash", rs, sum.Resumed)
	}
}

// TestRunSelectionResumes is TestRunResumes for a model-selection fit
// (bszt), and a ball-and-sticks state in the folder is refused rather
// than misread.
func TestRunSelectionResumes(t *testing.T) {
	net := smallBSZT(t)
	perturb(net, 3)
	post := posterior.New(net)
	set := FitSettings{Lambda: 0.5, Samples: 3, Steps: 2, Solver: "ab2", Seed: 5, BatchSize: 8, Correct: "none"}
	sum, out := checkResumes(t, post, set, 5)
	var ss selectionSettings
	readSettings(t, out, &ss)
	if ss.ResumedVoxels != sum.Resumed || ss.Family != "bszt" {
		t.Errorf("run.json settings %+v, want %d resumed voxels of family bszt", ss, sum.Resumed)
	}

	dir := t.TempDir()
	scan, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	other := RunConfig{Tool: "test", Out: filepath.Join(dir, "other"), Model: "random"}
	if err := os.MkdirAll(other.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := StateKey(set, WeightsHash(post), scan)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := OpenFitState(filepath.Join(other.Out, StateFile), key, ResultShape{Samples: 3, Models: 1, Sticks: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	fs.Close()
	if _, err := Run(context.Background(), scan, post, set, other); err == nil || !strings.Contains(err.Error(), "--fresh") {
		t.Errorf("selection run over a ball-and-sticks state: %v, want a refusal naming --fresh", err)
	}
}
