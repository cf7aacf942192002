package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prismsbi/prism/internal/numpytest"
)

// TestSpecExampleEndToEnd is the pharmacokinetics example from a clean
// clone: train from its spec (Python + numpy simulator in two worker
// processes) with its config for a few steps, then `select` and `sample`
// on the observations the example ships. The checkpoint alone re-creates
// the family (its spec is stored in it).
func TestSpecExampleEndToEnd(t *testing.T) {
	numpytest.Require(t)
	ex := "../../examples/pharmacokinetics"
	run := filepath.Join(t.TempDir(), "run")
	code, out, errs := prism("train", "--spec", ex+"/family.yaml", "--config", ex+"/config.yaml", "--steps", "12", "--quiet", "--out", run)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	t.Log(strings.TrimSpace(out))
	code, out, errs = prism("select", "--checkpoint", run, "--from-simulate", ex+"/observed.jsonl", "--lambda", "0.5", "--discover", "200", "--top", "3")
	if code != 0 {
		t.Fatalf("select: exit %d: %s", code, errs)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			TrueMask string `json:"true_mask"`
			Top      []struct {
				Mask   string   `json:"mask"`
				Models []string `json:"models"`
			} `json:"top"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("select line %q: %v", sc.Text(), err)
		}
		if len(rec.TrueMask) != 6 || len(rec.Top) != 3 {
			t.Fatalf("select line %d: true mask %q, %d top models", lines, rec.TrueMask, len(rec.Top))
		}
		lines++
	}
	if lines != 4 {
		t.Fatalf("select gave %d lines for the 4 shipped observations", lines)
	}
	code, out, errs = prism("sample", "--checkpoint", run, "--obs", ex+"/observed.jsonl", "--lambda", "0.5", "--models", "20", "--params", "5")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, errs)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 4 || !strings.Contains(out, `"V"`) {
		t.Fatalf("sample: %d lines, want 4 with the shared volume V: %.300s", n, out)
	}
	// eval simulates its test set through the worker processes and skips
	// the likelihood-based checks; predict has no forward model to use.
	evalDir := filepath.Join(t.TempDir(), "eval")
	code, _, errs = prism("eval", "--checkpoint", run, "--n", "12", "--out", evalDir)
	if code != 0 || !strings.Contains(errs, "skipped: pk-pathways has no likelihood") {
		t.Fatalf("eval: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(evalDir, "report.json")); err != nil {
		t.Fatal(err)
	}
	code, _, errs = prism("predict", "--checkpoint", run, "--obs", ex+"/observed.jsonl", "--lambda", "0.5")
	if code == 0 || !strings.Contains(errs, "no noiseless forward model") {
		t.Fatalf("predict: exit %d: %s", code, errs)
	}
}

// TestSpecTrainHungSimulator: `prism train` on a simulator that never
// answers ends with an error naming the batch and the timeout after its
// retries, instead of hanging.
func TestSpecTrainHungSimulator(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../family/spec/testdata/fault.py")
	if err != nil {
		t.Fatal(err)
	}
	spec := `name: hung-test
components:
  - {name: Level, params: [{name: a, prior: "uniform(0, 1)"}]}
  - {name: Gaussian, role: noise}
observation: {values: [0, 1, 2, 3]}
simulator: {command: [python3, fault.py, hang], timeout: 300ms, retries: 1}
`
	for name, data := range map[string]string{"fault.py": string(src), "family.yaml": spec, "config.yaml": tinyNoValidation} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	code, _, errs := prism("train", "--spec", filepath.Join(dir, "family.yaml"), "--config", filepath.Join(dir, "config.yaml"), "--steps", "3", "--quiet", "--out", filepath.Join(dir, "run"))
	if code == 0 {
		t.Fatal("train succeeded on a hung simulator")
	}
	for _, want := range []string{"no reply within the timeout of 300ms", "samples 0–15", "after 2 attempt(s)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestSpecTrainDropsNaN: samples whose simulation is NaN are redrawn and
// counted as dropped_samples in log.jsonl, and training goes on.
func TestSpecTrainDropsNaN(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../family/spec/testdata/fault.py")
	if err != nil {
		t.Fatal(err)
	}
	// fault.py nan-some: NaN whenever Level is on with a > 0.5 (a quarter
	// of the draws at λ ~ U(0,1)); 30 redraws make a failure impossible in
	// practice (4^−30).
	spec := `name: nan-test
components:
  - {name: Level, params: [{name: a, prior: "uniform(0, 1)"}]}
  - {name: Gaussian, role: noise}
observation: {values: [0, 1, 2, 3]}
simulator: {command: [python3, fault.py, nan-some], timeout: 10s, retries: 30}
`
	for name, data := range map[string]string{"fault.py": string(src), "family.yaml": spec, "config.yaml": tinyNoValidation} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := filepath.Join(dir, "run")
	code, _, errs := prism("train", "--spec", filepath.Join(dir, "family.yaml"), "--config", filepath.Join(dir, "config.yaml"), "--steps", "4", "--quiet", "--out", run)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(filepath.Join(run, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dropped, lines := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Loss    *float64 `json:"loss"`
			Dropped int      `json:"dropped_samples"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Loss != nil {
			lines++
			dropped += rec.Dropped
		}
	}
	// 4 steps × 16 samples, a quarter of them NaN at first draw: about
	// 21 drops expected (with redraws); zero would mean they went uncounted.
	if lines != 4 || dropped == 0 {
		t.Fatalf("%d training lines, %d dropped samples logged:\n%s", lines, dropped, data)
	}
	t.Logf("dropped %d samples over 4 steps", dropped)
}

// TestSpecFamiliesList: `prism families --spec` checks a spec and lists
// its family (6 components, 9 latents, 2²·2·2 = 16 models).
func TestSpecFamiliesList(t *testing.T) {
	code, out, errs := prism("families", "--spec", "../../examples/pharmacokinetics/family.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pk-pathways ") {
			if f := strings.Fields(line); f[1] != "6" || f[2] != "9" || f[3] != "16" {
				t.Errorf("row %q: want C 6, d_max 9, 16 models", line)
			}
			return
		}
	}
	t.Fatalf("pk-pathways not listed:\n%s", out)
}

// TestSpecBadFile: a broken spec names the file and the problem.
func TestSpecBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("name: bad\ncomponents:\n  - {name: A, params: [{name: a, prior: \"uniform(2, 1)\"}], term: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := prism("simulate", "--spec", path, "--n", "2", "--out", filepath.Join(t.TempDir(), "x.jsonl"))
	if code == 0 || !strings.Contains(errs, path) || !strings.Contains(errs, "lower bound must be below upper bound") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = prism("train", "--spec", path, "--family", "lingauss-k6", "--steps", "1", "--out", t.TempDir())
	if code == 0 || !strings.Contains(errs, "not both") {
		t.Fatalf("--spec with --family: exit %d, stderr %q", code, errs)
	}
}

// tinyNoValidation is a tiny network without a validation set.
const tinyNoValidation = `seed: 1
batch_size: 16
log_every: 1
validation: {size: 16, every: 0}
network: {model_dim: 16, heads: 2, head_dim: 8, mlp_width: 2, encoder_layers: 1, mask_layers: 1, param_layers: 1, lambda_embed: 8, noise_embed: 8}
`

// decaySpec is a family whose observations are measured at sampling times
// of their own (observation.covariate): two exponential decays, either or
// both present, seen at 12 sorted times in training.
const decaySpec = `name: decay-times
components:
  - {name: Fast, params: [{name: a, prior: "uniform(0.5, 2)"}, {name: k, prior: "log_uniform(0.5, 3)"}], term: "a*exp(-k*t)"}
  - {name: Slow, params: [{name: b, prior: "uniform(0.5, 2)"}, {name: r, prior: "log_uniform(0.02, 0.2)"}], term: "b*exp(-r*t)"}
  - {name: Gaussian, role: noise, params: [{name: sd, prior: "log_uniform(0.02, 0.1)"}], noise: sd}
observation:
  n: 12
  covariate: {name: t, unit: h, prior: "uniform(0, 24)", sorted: true}
simulator: {builtin: additive}
`

// TestSpecPerObservationDesigns: a spec family with per-observation
// designs trains (the network reads the "points" kind), `prism simulate`
// records each observation's times as "at", and `sample`/`select` read
// them back — including an observation measured at fewer, other times
// than training used. An observation without "at" is refused by name.
func TestSpecPerObservationDesigns(t *testing.T) {
	dir := t.TempDir()
	spec, cfg := filepath.Join(dir, "family.yaml"), filepath.Join(dir, "config.yaml")
	for path, data := range map[string]string{spec: decaySpec, cfg: tinyNoValidation} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := filepath.Join(dir, "run")
	if code, _, errs := prism("train", "--spec", spec, "--config", cfg, "--steps", "6", "--quiet", "--out", run); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	obs := filepath.Join(dir, "obs.jsonl")
	if code, _, errs := prism("simulate", "--spec", spec, "--n", "3", "--seed", "5", "--out", obs); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			X  []float64 `json:"x"`
			At []float64 `json:"at"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.At) != 12 || len(rec.X) != 12 || !sort.Float64sAreSorted(rec.At) || rec.At[0] < 0 || rec.At[11] > 24 {
			t.Fatalf("simulated line lacks 12 sorted times in [0, 24]: %s", line)
		}
	}
	// A fourth observation at 5 times of its own.
	extra := `{"x":[2.1,1.6,1.2,0.9,0.5],"at":[0.5,1,2,4,8]}` + "\n"
	if err := os.WriteFile(obs, append(data, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := prism("sample", "--checkpoint", run, "--obs", obs, "--lambda", "0.5", "--models", "10", "--params", "4")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, errs)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 4 {
		t.Fatalf("sample: %d lines, want 4: %.300s", n, out)
	}
	if code, out, errs = prism("select", "--checkpoint", run, "--obs", obs, "--lambda", "0.5", "--discover", "50", "--top", "2"); code != 0 || strings.Count(strings.TrimSpace(out), "\n")+1 != 4 {
		t.Fatalf("select: exit %d: %s %s", code, errs, out)
	}
	noAt := filepath.Join(dir, "noat.jsonl")
	if err := os.WriteFile(noAt, []byte(`{"x":[1,2,3]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = prism("sample", "--checkpoint", run, "--obs", noAt, "--lambda", "0.5"); code == 0 || !strings.Contains(errs, `no "at" values`) || !strings.Contains(errs, "noat.jsonl:1") {
		t.Fatalf("observation without times: exit %d, stderr %q", code, errs)
	}
}
