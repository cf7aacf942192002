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
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
	return posterior.New(net)
}

// TestRunResumes interrupts a Run after its first batches, continues it
// and checks that the continued run writes the same maps, byte for byte,
// as one uninterrupted run, records the resumed voxels, and leaves no
// partial state; a third run into the finished folder is refused without
// Fresh.
func TestRunResumes(t *testing.T) {
	dir := t.TempDir()
	scan, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	post := randomB3S(t)
	set := FitSettings{Lambda: 0.4, Samples: 2, Steps: 2, Solver: "ab2", Seed: 3, BatchSize: 8, Correct: "none"}
	cfg := func(out string) RunConfig {
		return RunConfig{Tool: "test", Out: filepath.Join(dir, out), Model: "random"}
	}

	if _, err := Run(context.Background(), scan, post, set, cfg("whole")); err != nil {
		t.Fatal(err)
	}

	// Cancel at the first progress report after some voxels are done: the
	// run stops after its current batches.
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
	var rec struct {
		Settings RunSettings `json:"settings"`
	}
	b, err := os.ReadFile(filepath.Join(c.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Settings.ResumedVoxels != sum.Resumed || rec.Settings.Model != "random" || len(rec.Settings.WeightsSHA) != 64 {
		t.Errorf("run.json settings %+v, want %d resumed voxels, model random and a weights hash", rec.Settings, sum.Resumed)
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
	if n < 20 {
		t.Errorf("%d maps compared, want the BedpostX layout and the model maps", n)
	}

	if _, err := Run(context.Background(), scan, post, set, cfg("whole")); err == nil || !strings.Contains(err.Error(), "earlier run") {
		t.Errorf("a run into a finished folder without Fresh: error %v", err)
	}
}

// randomBSZT is a small bszt posterior with perturbed random weights.
func randomBSZT(t *testing.T) *posterior.Posterior {
	t.Helper()
	cfg, err := train.LoadConfig("../configs/bszt.yaml", "bszt")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Network.ModelDim, cfg.Network.EncoderLayers, cfg.Network.MaskLayers, cfg.Network.ParamLayers = 16, 1, 1, 1
	cfg.Network.Heads, cfg.Network.HeadDim = 2, 8
	net, err := network.New(fdmri.BSZT(), cfg.Network, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range net.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(0.3 * r.NormFloat64())
		}
	}
	return posterior.New(net)
}

// TestRunSelectionResumes is TestRunResumes for a model-selection fit
// (bszt): an interrupted run keeps its finished batches, the continued
// run writes the same maps byte for byte as an uninterrupted one and
// records the resumed voxels, and a ball-and-sticks state in the folder
// is refused rather than misread.
func TestRunSelectionResumes(t *testing.T) {
	dir := t.TempDir()
	scan, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	post := randomBSZT(t)
	set := FitSettings{Lambda: 0.5, Samples: 3, Steps: 2, Solver: "ab2", Seed: 5, BatchSize: 8, Correct: "none"}
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
	var rec struct {
		Settings selectionSettings `json:"settings"`
	}
	b, err := os.ReadFile(filepath.Join(c.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Settings.ResumedVoxels != sum.Resumed || rec.Settings.Family != "bszt" {
		t.Errorf("run.json settings %+v, want %d resumed voxels of family bszt", rec.Settings, sum.Resumed)
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
	if n < 5 {
		t.Errorf("compared %d outputs, want the selection maps", n)
	}

	// A ball-and-sticks run's state in the folder is another run's.
	other := cfg("other")
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
