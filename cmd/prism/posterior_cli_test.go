package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
)

// testNet is the trained lingauss-k6 network committed with the
// posterior package's tests.
const testNet = "../../posterior/testdata/lingauss-k6-ema.safetensors"

// simFile simulates n lingauss observations with `prism simulate`.
func simFile(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sim.jsonl")
	if code, _, errs := prism("simulate", "--family", "lingauss-k6", "--n", strconv.Itoa(n), "--seed", "8", "--lambda", "0.5", "--out", path); code != 0 {
		t.Fatalf("simulate: %s", errs)
	}
	return path
}

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		ls = append(ls, m)
	}
	return ls
}

// TestSampleCommand: `prism sample` reproduces the library's Discover
// ranking (same seed, same log q) and writes the figures.
func TestSampleCommand(t *testing.T) {
	sim := simFile(t, 3)
	dir := t.TempDir()
	code, out, errs := prism("sample", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5",
		"--models", "300", "--params", "20", "--steps", "8", "--top", "4", "--seed", "3", "--plot", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ls := jsonLines(t, out)
	if len(ls) != 3 {
		t.Fatalf("%d output lines, want 3", len(ls))
	}
	p, err := posterior.Load(testNet)
	if err != nil {
		t.Fatal(err)
	}
	in, err := obsfile.Read(sim, p.Family(), func() (family.Design, error) { return forwardDesign(p.Family(), "", "", "") })
	if err != nil {
		t.Fatal(err)
	}
	disc, err := p.Discover(obsfile.Observations(in), 0.5, 300, 4, posterior.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		models := l["models"].([]any)
		if len(models) != len(disc[i]) || len(l["samples"].([]any)) != 20 {
			t.Fatalf("line %d: %d models (want %d), %d samples", i, len(models), len(disc[i]), len(l["samples"].([]any)))
		}
		m0 := models[0].(map[string]any)
		if m0["mask"] != maskString(disc[i][0].Mask) || math.Abs(m0["log_q"].(float64)-disc[i][0].LogQ) > 1e-12 {
			t.Fatalf("line %d: first model %v, library %v", i, m0, disc[i][0])
		}
	}
	for _, name := range []string{"models-0000.png", "params-0002.png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Fatalf("figure %s: %v", name, err)
		}
	}
}

// allLingaussMasks writes the 64 lingauss-k6 masks, one per line, into a
// candidates file and returns its path.
func allLingaussMasks(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cands.txt")
	var b strings.Builder
	for idx := range lingauss.NumMasks {
		b.WriteString(maskString(lingauss.MaskFromIndex(idx)) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func maskString(m []bool) string {
	b := make([]byte, len(m))
	for i, v := range m {
		b[i] = '0'
		if v {
			b[i] = '1'
		}
	}
	return string(b)
}

// TestSelectCandidates: exact ranking within all 64 lingauss masks; the
// reported first model must be the maximiser of the reported log q, and
// the number of models must be --top.
func TestSelectCandidates(t *testing.T) {
	sim := simFile(t, 3)
	cands := allLingaussMasks(t)
	code, out, errs := prism("select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5", "--candidates", cands, "--top", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for i, l := range jsonLines(t, out) {
		top := l["top"].([]any)
		if len(top) != 3 {
			t.Fatalf("line %d: %d models", i, len(top))
		}
		prev := math.Inf(1)
		for _, r := range top {
			lq := r.(map[string]any)["log_q"].(float64)
			if lq > prev {
				t.Fatalf("line %d: ranking not sorted", i)
			}
			prev = lq
		}
	}
	if code, _, _ := prism("select", "--checkpoint", testNet, "--from-simulate", sim, "--discover", "10"); code == 0 {
		t.Fatal("select without --lambda succeeded")
	}
}

// TestPredictCommand: the local predictive band of a CSV observation
// brackets its mean, and a figure is written.
func TestPredictCommand(t *testing.T) {
	tmp := t.TempDir()
	csv := filepath.Join(tmp, "obs.csv")
	var b strings.Builder
	for j, x := range lingauss.Grid() {
		if j > 0 {
			b.WriteString(",")
		}
		b.WriteString(formatG(1 + math.Sin(x)))
	}
	if err := os.WriteFile(csv, []byte(b.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := prism("predict", "--checkpoint", testNet, "--obs", csv, "--local", "1001001", "--samples", "100", "--steps", "8", "--plot", tmp)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ls := jsonLines(t, out)
	if len(ls) != 1 || ls[0]["predictive"] != "local" {
		t.Fatalf("output %v", ls)
	}
	mean, lo, hi := ls[0]["mean"].([]any), ls[0]["lo"].([]any), ls[0]["hi"].([]any)
	if len(mean) != lingauss.N {
		t.Fatalf("%d predictive values", len(mean))
	}
	for j := range mean {
		if m := mean[j].(float64); m < lo[j].(float64) || m > hi[j].(float64) {
			t.Fatalf("x[%d]: mean %v outside [%v, %v]", j, m, lo[j], hi[j])
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "predict-0000.png")); err != nil {
		t.Fatal(err)
	}
}

// TestLambdaSweepCommand: one line per observation and λ, and the mean
// number of active components grows from λ = 0 to λ = 1 (the prior
// Bernoulli(λ) dominates at the ends).
func TestLambdaSweepCommand(t *testing.T) {
	sim := simFile(t, 3)
	code, out, errs := prism("lambda-sweep", "--checkpoint", testNet, "--from-simulate", sim, "--lambdas", "0,0.5,1", "--models", "100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ls := jsonLines(t, out)
	if len(ls) != 9 {
		t.Fatalf("%d lines, want 9", len(ls))
	}
	for i := 0; i < 9; i += 3 {
		if ls[i]["active_mean"].(float64) >= ls[i+2]["active_mean"].(float64) {
			t.Fatalf("observation %d: active components %v at λ=0, %v at λ=1", i/3, ls[i]["active_mean"], ls[i+2]["active_mean"])
		}
	}
}
