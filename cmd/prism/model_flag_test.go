package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	shippedK15  = "../../models/symbolic-k15.safetensors"
	exampleObs  = "../../data/symbolic-k15-example.jsonl"
	exampleScan = "../../data/xa30-prisma-b2500-wholebrain/"
)

// TestModelFlag: --model NAME answers exactly as --checkpoint on the same
// weights file, for each command that takes a network.
func TestModelFlag(t *testing.T) {
	for _, c := range [][]string{
		{"select", "--from-simulate", exampleObs, "--lambda", "0.3", "--discover", "50", "--subspace", "3", "--top", "3"},
		{"sample", "--from-simulate", exampleObs, "--lambda", "0.3", "--models", "20", "--params", "3", "--steps", "4"},
		{"predict", "--from-simulate", exampleObs, "--samples", "8", "--steps", "4"},
		{"lambda-sweep", "--from-simulate", exampleObs, "--lambdas", "0.2,0.7", "--models", "20"},
	} {
		code, viaModel, errs := prism(append(c, "--model", "symbolic-k15")...)
		if code != 0 {
			t.Fatalf("%s --model: exit %d: %s", c[0], code, errs)
		}
		code, viaFile, errs := prism(append(c, "--checkpoint", shippedK15)...)
		if code != 0 {
			t.Fatalf("%s --checkpoint: exit %d: %s", c[0], code, errs)
		}
		if viaModel != viaFile || viaModel == "" {
			t.Errorf("%s: --model and --checkpoint outputs differ:\n%s\n%s", c[0], viaModel, viaFile)
		}
	}
}

// TestModelFlagEval: `prism eval --model` writes the same report as with
// --checkpoint (wall-clock fields aside).
func TestModelFlagEval(t *testing.T) {
	args := []string{"eval", "--n", "4", "--seed", "2", "--mask-samples", "4", "--theta-samples", "2", "--ksd-obs", "0",
		"--is-obs", "0", "--pred-obs", "0", "--class-models", "2", "--steps", "2", "--quiet"}
	a, b := t.TempDir(), t.TempDir()
	if code, _, errs := prism(append(args, "--model", "symbolic-k15", "--out", a)...); code != 0 {
		t.Fatalf("eval --model: %s", errs)
	}
	if code, _, errs := prism(append(args, "--checkpoint", shippedK15, "--out", b)...); code != 0 {
		t.Fatalf("eval --checkpoint: %s", errs)
	}
	ra, err := os.ReadFile(filepath.Join(a, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := os.ReadFile(filepath.Join(b, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(withoutSeconds(ra), withoutSeconds(rb)) {
		t.Errorf("summary.csv differs:\n%s\n%s", ra, rb)
	}
}

// withoutSeconds drops lines that record timings.
func withoutSeconds(b []byte) []byte {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "seconds") && !strings.Contains(l, "_s,") {
			keep = append(keep, l)
		}
	}
	return []byte(strings.Join(keep, "\n"))
}

// TestModelFlagErrors: both flags, neither, or an unknown name are
// refused with a message that lists the shipped models; a b3s-only
// command refuses the symbolic model.
func TestModelFlagErrors(t *testing.T) {
	scan := []string{"--dwi", exampleScan + "dwi_PA.nii.gz", "--bval", exampleScan + "dwi_PA.bval", "--bvec", exampleScan + "dwi_PA.bvec"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"select", "--from-simulate", exampleObs, "--lambda", "0.3", "--discover", "5", "--model", "symbolic-k15", "--checkpoint", shippedK15}, []string{"not both"}},
		{[]string{"select", "--from-simulate", exampleObs, "--lambda", "0.3", "--discover", "5"}, []string{"--checkpoint DIR or --model NAME", "b3s, b3s-brain, bszt, bszt-brain, bszt-conv, symbolic-k15, symbolic-k50"}},
		{[]string{"predict", "--from-simulate", exampleObs, "--model", "k15"}, []string{`"k15"`, "b3s, b3s-brain, bszt, bszt-brain, bszt-conv, symbolic-k15, symbolic-k50"}},
		{[]string{"eval", "--out", t.TempDir()}, []string{"--model NAME"}},
		{[]string{"eval", "--out", t.TempDir(), "--model", "nope"}, []string{`"nope"`, "b3s, b3s-brain, bszt, bszt-brain, bszt-conv, symbolic-k15, symbolic-k50"}},
		{append([]string{"dmri", "fit", "--out", t.TempDir()}, scan...), []string{"--checkpoint DIR or --model NAME"}},
		{append([]string{"dmri", "fit", "--out", t.TempDir(), "--model", "symbolic-k15"}, scan...), []string{"model:symbolic-k15"}},
	} {
		code, _, errs := prism(c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
}

// TestExportCommand: `prism export` of a freshly trained run gives a
// weights file that answers exactly as the run's checkpoint directory.
func TestExportCommand(t *testing.T) {
	ck := tinyB3S(t)
	w := filepath.Join(t.TempDir(), "tiny.safetensors")
	code, out, errs := prism("export", "--checkpoint", ck, "--out", w)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "family b3s, step 3, ema weights") {
		t.Errorf("export output %q", out)
	}
	sim := filepath.Join(t.TempDir(), "b3s.jsonl")
	if code, _, errs := prism("simulate", "--family", "b3s", "--n", "2", "--seed", "4", "--protocol", "ukb", "--out", sim); code != 0 {
		t.Fatalf("simulate: %s", errs)
	}
	args := []string{"select", "--from-simulate", sim, "--lambda", "0.3", "--discover", "30", "--top", "3"}
	_, a, errs := prism(append(args, "--checkpoint", ck)...)
	_, b, errs2 := prism(append(args, "--checkpoint", w)...)
	if a == "" || a != b {
		t.Errorf("checkpoint directory and exported file disagree:\n%s%s\n%s%s", a, errs, b, errs2)
	}
	if code, _, errs := prism("export", "--checkpoint", t.TempDir(), "--out", w); code == 0 || !strings.Contains(errs, "no committed checkpoint") {
		t.Errorf("export of an empty directory: exit %d, %s", code, errs)
	}
}

// TestSymbolicExampleCommand: the commands data/README.md documents
// regenerate the bundled observations byte for byte.
func TestSymbolicExampleCommand(t *testing.T) {
	readme, err := os.ReadFile("../../data/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"symbolic-k15", "symbolic-k50"} {
		file := "data/" + name + "-example.jsonl"
		args := []string{"simulate", "--family", name, "--n", "1", "--seed", "2", "--lambda", "0.3", "--out"}
		out := filepath.Join(t.TempDir(), "ex.jsonl")
		if code, _, errs := prism(append(args, out)...); code != 0 {
			t.Fatalf("simulate: %s", errs)
		}
		a, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("../../" + file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("the documented simulate command no longer reproduces %s", file)
		}
		if cmd := strings.Join(append(args, file), " "); !strings.Contains(string(readme), cmd) {
			t.Errorf("data/README.md does not document %q", cmd)
		}
	}
}

// TestModelsCommand: `prism models` lists every shipped network with the
// SHA-256 of its file, in text and JSON.
func TestModelsCommand(t *testing.T) {
	code, out, errs := prism("models")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, js, errs := prism("models", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var infos []struct {
		Name, Family, SHA256 string
		Step                 int64
	}
	if err := json.Unmarshal([]byte(js), &infos); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../models/*.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(files) || len(files) < 6 {
		t.Fatalf("%d models listed, %d weights files in models/", len(infos), len(files))
	}
	for _, in := range infos {
		b, err := os.ReadFile(filepath.Join("../../models", in.Name+".safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if in.SHA256 != hex.EncodeToString(sum[:]) || in.Family != in.Name || in.Step <= 0 {
			t.Errorf("%+v", in)
		}
		if !strings.Contains(out, in.Name+"\n  family "+in.Family) || !strings.Contains(out, "sha256 "+in.SHA256) {
			t.Errorf("text listing lacks %s:\n%s", in.Name, out)
		}
	}
}
