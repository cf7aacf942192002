package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
)

// TestCorrectFlag runs `select --correct smc` on the committed lingauss
// network over 8 candidate models (no pruning) and checks the output against the
// library (same settings, same numbers) and against the closed-form
// evidence (within 5 reported SE + 0.02 for the models the output keeps);
// sample and predict accept the flag and report the correction; a bad
// value is refused with a non-zero exit.
func TestCorrectFlag(t *testing.T) {
	sim := simFile(t, 2)
	cands := filepath.Join(t.TempDir(), "cands.txt")
	var lines []string
	var masks [][]bool
	for _, idx := range []int{0, 1, 2, 3, 5, 9, 17, 33} {
		m := lingauss.MaskFromIndex(idx)
		masks = append(masks, m)
		lines = append(lines, family.MaskString(m))
	}
	if err := os.WriteFile(cands, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := prism("select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5", "--candidates", cands,
		"--top", "3", "--steps", "8", "--seed", "5", "--correct", "smc", "--correct-particles", "64", "--correct-min-q", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ls := jsonLines(t, out)
	p, err := posterior.Load(testNet)
	if err != nil {
		t.Fatal(err)
	}
	lf := p.Family().(*lingauss.Family)
	in, err := obsfile.Read(sim, p.Family(), func() (family.Design, error) { return forwardDesign(p.Family(), "", "", "") })
	if err != nil {
		t.Fatal(err)
	}
	s := correct.DefaultSettings(correct.SMC)
	s.Particles = 64
	s.Sample = posterior.SampleOptions{Options: posterior.Options{Seed: 5}, Steps: 8}
	lib, err := correct.Correct(p, obsfile.Observations(in), [][][]bool{masks}, 0.5, s)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		c := l["correction"].(map[string]any)
		if c["method"] != "smc" {
			t.Fatalf("line %d: correction %v", i, c)
		}
		ms := c["models"].([]any)
		if len(ms) != 3 {
			t.Fatalf("line %d: %d corrected models, want --top 3", i, len(ms))
		}
		best := lib[i].Best()
		m0 := ms[0].(map[string]any)
		if m0["mask"] != family.MaskString(masks[best]) || m0["prob"].(float64) != lib[i].Prob[best] {
			t.Errorf("line %d: first corrected model %v, library %s p = %v", i, m0, family.MaskString(masks[best]), lib[i].Prob[best])
		}
		for _, mm := range ms {
			m := mm.(map[string]any)
			mask, err := family.ParseMask(m["mask"].(string), lingauss.K+1)
			if err != nil {
				t.Fatal(err)
			}
			exact := lf.LogEvidence(in[i].Obs.X, mask)
			le, ok1 := m["log_evidence"].(float64)
			se, ok2 := m["log_evidence_se"].(float64)
			if d := math.Abs(le - exact); !ok1 || !ok2 || d > 5*se+0.02 {
				t.Errorf("line %d model %s: log evidence %v, exact %v", i, m["mask"], m["log_evidence"], exact)
			}
		}
	}
	if code, out, errs := prism("sample", "--checkpoint", testNet, "--from-simulate", sim, "--models", "100", "--params", "10",
		"--steps", "8", "--correct", "is", "--correct-samples", "64"); code != 0 || !strings.Contains(out, `"correction":{"method":"is"`) {
		t.Errorf("sample --correct is: exit %d, %s", code, errs)
	}
	if code, out, errs := prism("predict", "--checkpoint", testNet, "--from-simulate", sim, "--local", lines[3], "--samples", "50",
		"--steps", "8", "--correct", "smc", "--correct-particles", "32"); code != 0 || !strings.Contains(out, `"correction":{"method":"smc"`) {
		t.Errorf("predict --correct smc: exit %d, %s", code, errs)
	}
	if code, _, errs := prism("select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5", "--candidates", cands,
		"--correct", "exact"); code == 0 || !strings.Contains(errs, "--correct") {
		t.Errorf("--correct exact: exit %d, %q", code, errs)
	}
}

// TestDMRIFitCorrect runs `dmri fit --correct smc` with the shipped
// b3s-brain network on the 4×3×2 crop of the real multi-shell slab and
// checks the correction's outputs: the four diagnostic maps exist, are
// finite in the mask (ESS in (0, 1], at least one tempering step, SE ≥ 0,
// failed 0 or 1) and zero outside; model_prob sums to 1 per voxel (float32
// sums of ≤ 15 terms: 1e−5); run.json summarises the correction; a
// second run with another batch size gives identical images; an unknown
// --correct is refused before the output folder is created.
func TestDMRIFitCorrect(t *testing.T) {
	dir := t.TempDir()
	flags, _ := cropSlab(t, dir)
	out := filepath.Join(dir, "fit")
	args := append(append([]string{"dmri", "fit"}, flags...), "--model", "b3s-brain", "--samples", "8", "--steps", "4", "--quiet")
	code, _, errs := prism(append(args, "--out", out, "--correct", "smc", "--correct-particles", "16")...)
	if code != 0 {
		t.Fatalf("dmri fit --correct smc: exit %d: %s", code, errs)
	}
	mask := readOut(t, out, "nodif_brain_mask")
	ess, steps, se, failed := readOut(t, out, "correct_ess"), readOut(t, out, "correct_steps"), readOut(t, out, "correct_logz_se"), readOut(t, out, "correct_failed")
	mp := readOut(t, out, "model_prob")
	nv := len(mask.Data)
	for i, m := range mask.Data {
		if m == 0 {
			if ess.Data[i] != 0 || failed.Data[i] != 0 {
				t.Fatalf("voxel %d outside the mask has diagnostics", i)
			}
			continue
		}
		if e := ess.Data[i]; !(e > 0 && e <= 1) || !(steps.Data[i] >= 1) || !(se.Data[i] >= 0) || (failed.Data[i] != 0 && failed.Data[i] != 1) {
			t.Errorf("voxel %d: ESS %v, steps %v, SE %v, failed %v", i, e, steps.Data[i], se.Data[i], failed.Data[i])
		}
		sum := 0.0
		for k := range 15 {
			sum += float64(mp.Data[i+k*nv])
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("voxel %d: model_prob sums to %v", i, sum)
		}
	}
	run, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(run), `"correct_failed_voxels"`) || !strings.Contains(string(run), `"correct": "smc"`) {
		t.Errorf("run.json lacks the correction's summary: %s", run)
	}
	// Per-voxel streams: another batch size gives identical images.
	out2 := filepath.Join(dir, "fit2")
	if code, _, errs := prism(append(args, "--out", out2, "--correct", "smc", "--correct-particles", "16", "--batch", "7")...); code != 0 {
		t.Fatalf("dmri fit --batch 7: exit %d: %s", code, errs)
	}
	for _, n := range []string{"correct_ess", "correct_logz_se", "model_prob", "dyads1", "merged_f1samples"} {
		a, b := readOut(t, out, n), readOut(t, out2, n)
		for i := range a.Data {
			if a.Data[i] != b.Data[i] && !(math.IsNaN(float64(a.Data[i])) && math.IsNaN(float64(b.Data[i]))) {
				t.Errorf("%s differs between batch sizes at %d: %v vs %v", n, i, a.Data[i], b.Data[i])
				break
			}
		}
	}
	bad := filepath.Join(dir, "bad")
	if code, _, errs := prism(append(args, "--out", bad, "--correct", "mcmc")...); code == 0 || !strings.Contains(errs, "mcmc") {
		t.Errorf("--correct mcmc: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("output folder created for a refused run: %v", err)
	}
}
