package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/posterior"
)

// TestCalibrateCommand: `prism calibrate` writes the network's own tensors
// with a calibration in the metadata, the same one the library fits with
// the same options; loading the file applies it (and `prism sample` runs
// with it); bad invocations fail with a message and leave no file.
func TestCalibrateCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cal.safetensors")
	code, stdout, errs := prism("calibrate", "--checkpoint", testNet, "--out", out, "--n", "40", "--levels", "4", "--per-level", "2", "--width", "40", "--width-samples", "10", "--seed", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "wrote "+out) || !strings.Contains(stdout, "width stage: β") {
		t.Errorf("stdout %q does not report the file and the width stage", stdout)
	}
	if !strings.Contains(errs, "width stage: β +0.0000 gives rank variance") {
		t.Errorf("stderr %q does not show the width stage's progress", errs)
	}
	p, err := posterior.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	got := p.DenoiserCalibration()
	if got == nil {
		t.Fatal("the written file loads without a denoiser calibration")
	}
	plain, err := posterior.Load(testNet)
	if err != nil {
		t.Fatal(err)
	}
	if plain.DenoiserCalibration() != nil {
		t.Fatal("the test network already has a calibration")
	}
	want, err := plain.CalibrateDenoiser(posterior.CalibrateOptions{Simulations: 40, Levels: 4, PerLevel: 2, Width: 40, WidthSamples: 10, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Scale, want.Scale) || !slices.Equal(got.LogSigma, want.LogSigma) {
		t.Errorf("file's calibration %v at %v, library's %v at %v", got.Scale, got.LogSigma, want.Scale, want.LogSigma)
	}
	if got.Width == nil || want.Width == nil || *got.Width != *want.Width {
		t.Errorf("file's width stage %+v, library's %+v", got.Width, want.Width)
	}
	// The tensors are the network's own.
	a, _, err := safetensors.Read(testNet)
	if err != nil {
		t.Fatal(err)
	}
	b, meta, err := safetensors.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d tensors, want %d", len(b), len(a))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !slices.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("tensor %s changed", a[i].Name)
		}
	}
	if meta[checkpoint.MetaDenoiserCalibration] == "" {
		t.Error("no calibration in the metadata")
	}
	sim := simFile(t, 2)
	if code, _, errs := prism("sample", "--checkpoint", out, "--from-simulate", sim, "--lambda", "0.5", "--models", "20", "--params", "5", "--steps", "8", "--seed", "3"); code != 0 {
		t.Fatalf("sample with the calibrated file: exit %d: %s", code, errs)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--checkpoint", testNet}, "--out"},
		{[]string{"--checkpoint", testNet, "--model", "symbolic-k15", "--out", filepath.Join(dir, "x.safetensors")}, "not both"},
		{[]string{"--checkpoint", filepath.Join(dir, "missing"), "--out", filepath.Join(dir, "y.safetensors")}, "missing"},
		{[]string{"--checkpoint", testNet, "--n", "1", "--out", filepath.Join(dir, "z.safetensors")}, "simulations"},
		{[]string{"--checkpoint", testNet, "--n", "40", "--width", "-1", "--out", filepath.Join(dir, "w.safetensors")}, "width stage"},
	} {
		code, _, errs := prism(append([]string{"calibrate"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.msg) {
			t.Errorf("calibrate %v: exit %d, stderr %q; want a failure naming %q", tc.args, code, errs, tc.msg)
		}
	}
	for _, name := range []string{"x", "y", "z", "w"} {
		if _, err := os.Stat(filepath.Join(dir, name+".safetensors")); err == nil {
			t.Errorf("a failed calibrate left %s.safetensors", name)
		}
	}
	// A weights file with a malformed calibration is refused by name.
	data, err := os.ReadFile(testNet)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := checkpoint.WithMetadata(data, checkpoint.MetaDenoiserCalibration, `{"log_sigma":[0],"scale":[1]}`)
	if err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(badPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := posterior.Load(badPath); err == nil || !strings.Contains(err.Error(), checkpoint.MetaDenoiserCalibration) || !strings.Contains(err.Error(), badPath) {
		t.Errorf("loading a malformed calibration: err = %v, want one naming the file and the key", err)
	}
	if !bytes.Contains(bad, []byte(checkpoint.MetaDenoiserCalibration)) {
		t.Error("WithMetadata did not write the key")
	}
}
