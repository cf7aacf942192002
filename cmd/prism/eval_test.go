package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalCommand runs `prism eval` end to end on the committed lingauss
// network with tiny sizes and checks that every output is written, that
// the report is complete and consistent with summary.csv, and that the
// same seed gives the same report.
func TestEvalCommand(t *testing.T) {
	args := func(out string) []string {
		return []string{"eval", "--checkpoint", testNet, "--n", "24", "--seed", "5", "--out", out,
			"--mask-samples", "32", "--theta-samples", "20", "--ksd-obs", "3", "--is-obs", "3",
			"--is-samples", "8", "--subset", "2", "--pred-obs", "3", "--steps", "6", "--class-models", "10"}
	}
	dir := filepath.Join(t.TempDir(), "out")
	code, _, errs := prism(args(dir)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "mask SBC") || !strings.Contains(errs, "classification") {
		t.Errorf("progress on stderr missing stages: %s", errs)
	}
	for _, f := range []string{"report.json", "summary.csv", "calibration-masks.png", "calibration-params.png", "confusion.png", "rksd.png", "ess.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		} else if st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644 (readable like any output file)", f, st.Mode().Perm())
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Family string
		N      int
		Lambda string
		Mask   struct {
			CE     struct{ Value, SE *float64 }
			Values int
			Band   struct{ Upper float64 }
		} `json:"mask_sbc"`
		Param struct {
			Values  int
			ByWidth []struct{ Values int } `json:"by_width"`
		} `json:"param_sbc"`
		Exact    *struct{ Models int } `json:"exact"`
		Evidence *struct {
			ESS struct{ Value float64 } `json:"ess_mean"`
			TV  []any                   `json:"tv"`
		} `json:"evidence"`
		Class struct {
			Models    int
			Confusion [][]float64
		} `json:"classification"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if rep.Family != "lingauss-k6" || rep.N != 24 || rep.Lambda != "random" || rep.Mask.Values != 24 ||
		rep.Mask.CE.Value == nil || rep.Mask.CE.SE == nil || !(rep.Mask.Band.Upper > 0) || rep.Param.Values < 1 {
		t.Errorf("report header/SBC: %s", raw[:min(len(raw), 600)])
	}
	// 20 draws per observation (eval.MinWidthSamples) are enough to bin
	// the PIT values by posterior width; every value lands in one bin.
	inBins := 0
	for _, w := range rep.Param.ByWidth {
		inBins += w.Values
	}
	if inBins != rep.Param.Values || !strings.Contains(errs, "by posterior width: sd") {
		t.Errorf("by_width holds %d of %d PIT values (%d bins); progress: %s", inBins, rep.Param.Values, len(rep.Param.ByWidth), errs)
	}
	if rep.Exact == nil || rep.Exact.Models != 64 {
		t.Errorf("exact comparison missing or wrong model count: %+v", rep.Exact)
	}
	if rep.Evidence == nil || !(rep.Evidence.ESS.Value > 0 && rep.Evidence.ESS.Value <= 1) || len(rep.Evidence.TV) != 5 {
		t.Errorf("evidence section: %+v", rep.Evidence)
	}
	n := 0.0
	for _, row := range rep.Class.Confusion {
		for _, v := range row {
			n += v
		}
	}
	if rep.Class.Models != 10 || len(rep.Class.Confusion) != 10 || n != 24 {
		t.Errorf("classification: %d models, %d rows, %v observations", rep.Class.Models, len(rep.Class.Confusion), n)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if lines[0] != "metric,value,setting" || len(lines) < 30 {
		t.Errorf("summary.csv: %d lines, header %q", len(lines), lines[0])
	}
	found := false
	for _, l := range lines {
		if strings.HasPrefix(l, "mask_sbc_ce,") && strings.HasSuffix(l, `"lambda=random"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("summary.csv has no mask_sbc_ce row for lambda=random")
	}
	// Same seed, same report (apart from the run time).
	dir2 := filepath.Join(t.TempDir(), "out2")
	if code, _, errs := prism(append(args(dir2), "--quiet")...); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errs)
	}
	csv2, _ := os.ReadFile(filepath.Join(dir2, "summary.csv"))
	if string(csv2) != string(csv) {
		t.Error("same seed gave a different summary.csv")
	}
	if code, _, _ := prism("eval", "--checkpoint", testNet, "--out", dir2, "--lambda", "2"); code == 0 {
		t.Error("--lambda 2 accepted")
	}
}

// TestEvalCorrected runs `prism eval --correct smc` end to end: the
// corrected parameter SBC lands in report.json, summary.csv and its own
// figure, over --correct-obs observations; the candidate-pruning flags of
// the subspace test are refused without --subspace, and --correct-obs with
// it or without --correct.
func TestEvalCorrected(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, _, errs := prism("eval", "--checkpoint", testNet, "--n", "24", "--seed", "5", "--out", dir,
		"--mask-samples", "8", "--theta-samples", "20", "--ksd-obs", "0", "--is-obs", "0", "--pred-obs", "0",
		"--steps", "6", "--class-models", "10", "--correct", "smc", "--correct-particles", "32", "--correct-obs", "12",
		"--correct-cess", "0.7", "--correct-moves", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "parameter SBC of the smc-corrected posterior (12 observations") {
		t.Errorf("progress has no corrected SBC line: %s", errs)
	}
	if st, err := os.Stat(filepath.Join(dir, "calibration-params-corrected.png")); err != nil || st.Size() == 0 {
		t.Errorf("corrected calibration figure not written: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Corrected *struct {
			Method       string
			Observations int
			Values       int
			CE           struct{ Value float64 }
			ESS          struct{ Value float64 } `json:"mean_ess"`
			Particles    int
			CESS         float64
			Moves        int
		} `json:"param_sbc_corrected"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if c := rep.Corrected; c == nil || c.Method != "smc" || c.Observations != 12 || c.Values < 12 || !(c.ESS.Value > 0 && c.ESS.Value <= 1) ||
		c.Particles != 32 || c.CESS != 0.7 || c.Moves != 2 {
		t.Errorf("param_sbc_corrected: %+v", rep.Corrected)
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "summary.csv"))
	if !strings.Contains(string(csv), "param_sbc_corrected_ce,") || !strings.Contains(string(csv), "correct=smc") {
		t.Errorf("summary.csv has no corrected rows")
	}
	for _, bad := range [][]string{
		{"--correct", "smc", "--correct-max-models", "3"},
		{"--subspace", "--correct", "smc", "--correct-obs", "3"},
		{"--correct", "smc", "--correct-obs", "0"},
		{"--correct-obs", "5"},
		{"--correct", "smc", "--correct-cess", "1"},
		{"--correct", "smc", "--correct-moves", "0"},
		{"--correct", "mcmc"},
	} {
		args := append([]string{"eval", "--checkpoint", testNet, "--n", "4", "--out", filepath.Join(t.TempDir(), "bad")}, bad...)
		if code, _, _ := prism(args...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
}
