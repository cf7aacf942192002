package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
	_ "github.com/prismsbi/prism/family/all"
)

// testWeights is the committed lingauss-k6 test network (a weights file).
const testWeights = "../posterior/testdata/lingauss-k6-ema.safetensors"

// TestCommitProtocol: each commit leaves LATEST naming a complete
// checkpoint and removes the older ones; a failing write leaves the
// committed checkpoint and no temporaries; committing the current name
// again does nothing.
func TestCommitProtocol(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) func(string) error {
		return func(tmp string) error { return WriteFile(filepath.Join(tmp, StateFile), []byte(content)) }
	}
	if err := Commit(dir, Name(5), write("five")); err != nil {
		t.Fatal(err)
	}
	if err := Commit(dir, Name(9), write("nine")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	if err := Commit(dir, Name(12), func(tmp string) error {
		if err := WriteFile(filepath.Join(tmp, StateFile), []byte("twelve")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing write: error %v", err)
	}
	if err := Commit(dir, Name(9), write("ignored")); err != nil {
		t.Fatal(err)
	}
	name, err := Latest(dir)
	if err != nil || name != Name(9) || !IsRunDir(dir) {
		t.Fatalf("LATEST %q (%v), want %s", name, err, Name(9))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name, StateFile)); string(b) != "nine" {
		t.Errorf("committed content %q, want nine", b)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{LatestFile, Name(9)}; !slices.Equal(names, want) {
		t.Errorf("run directory holds %v, want %v", names, want)
	}
	if IsRunDir(t.TempDir()) {
		t.Error("an empty directory counts as a run")
	}
}

// TestLoadWeightsAndRun: a weights file and a run directory whose
// checkpoint holds the same weights as its EMA build identical networks;
// the header gives family, kind and step.
func TestLoadWeightsAndRun(t *testing.T) {
	net, h, err := Load(testWeights)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != KindWeights || h.Family != "lingauss-k6" || net.Family().Name() != "lingauss-k6" {
		t.Fatalf("header %+v", h)
	}
	ts, _, err := safetensors.Read(testWeights)
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint with raw weights zero and EMA weights = the file's.
	var ck []safetensors.Tensor
	for _, x := range ts {
		ck = append(ck, safetensors.Tensor{Name: x.Name, Shape: x.Shape, Data: make([]float32, len(x.Data))},
			safetensors.Tensor{Name: optim.EMAPrefix + x.Name, Shape: x.Shape, Data: x.Data})
	}
	cmeta := Metadata(KindCheckpoint, "", 77, h.Family, h.Config, nil)
	dir := t.TempDir()
	if err := Commit(dir, Name(77), func(tmp string) error {
		return safetensors.Write(filepath.Join(tmp, CheckpointFile), ck, cmeta)
	}); err != nil {
		t.Fatal(err)
	}
	run, rh, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rh.Kind != KindCheckpoint || rh.Step != 77 {
		t.Errorf("run header %+v", rh)
	}
	a, b := net.Params().All(), run.Params().All()
	for i := range a {
		if a[i].Name != b[i].Name || !slices.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("parameter %s differs between the weights file and the run's EMA", a[i].Name)
		}
	}
	raw, _, err := LoadRun(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := raw.Params().All(); r[0].Data[0] != 0 {
		t.Error("raw weights not read from the raw tensors")
	}
	// Wrong kinds are refused with a hint.
	if _, _, err := LoadWeightsFile(filepath.Join(dir, Name(77), CheckpointFile)); err == nil || !strings.Contains(err.Error(), "pass the run directory") {
		t.Errorf("checkpoint file as weights: %v", err)
	}
}

// TestParseHeaderErrors: unknown versions and kinds, and a family that
// disagrees with the configuration, are errors naming the key.
func TestParseHeaderErrors(t *testing.T) {
	good := map[string]string{"prism.format_version": "1", "prism.kind": "weights", "prism.family": "lingauss-k6",
		"prism.config": `{"family":"lingauss-k6","network":{"model_dim":32}}`, "prism.step": "3"}
	h, err := ParseHeader(good)
	if err != nil || h.Step != 3 || h.Network.ModelDim != 32 {
		t.Fatalf("good header: %+v, %v", h, err)
	}
	for key, val := range map[string]string{
		"prism.format_version": "2",
		"prism.kind":           "optimizer",
		"prism.family":         "b3s",
		"prism.step":           "x",
		"prism.config":         `{"network":{"model_dims":3}}`,
	} {
		m := map[string]string{}
		for k, v := range good {
			m[k] = v
		}
		m[key] = val
		if _, err := ParseHeader(m); err == nil || !strings.Contains(err.Error(), key) && !strings.Contains(err.Error(), "model_dims") {
			t.Errorf("%s = %q: error %v", key, val, err)
		}
	}
}
