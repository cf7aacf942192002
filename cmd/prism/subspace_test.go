package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalSubspace runs `prism eval --subspace` on the committed lingauss
// network at two λ settings and checks both results are written, and that
// the flags of the full suite are refused with it.
func TestEvalSubspace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, _, errs := prism("eval", "--subspace", "--checkpoint", testNet, "--n", "40", "--class-models", "12",
		"--lambda", "0.3,random", "--seed", "3", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "subspace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res []struct {
		Lambda string
		Models int
		Obs    int `json:"observations"`
		Top1   struct{ Value, SE float64 }
		Top5   struct{ Value, SE float64 }
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Lambda != "0.3" || res[1].Lambda != "random" {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Models != 12 || r.Obs != 40 || !(r.Top5.Value >= r.Top1.Value) || r.Top5.Value > 1 {
			t.Errorf("result %+v", r)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "subspace.csv"))
	if err != nil || !strings.Contains(string(csv), "top5,") || !strings.Contains(string(csv), "lambda=random") {
		t.Errorf("subspace.csv: %v\n%s", err, csv)
	}
	if code, _, errs := prism("eval", "--subspace", "--checkpoint", testNet, "--mask-samples", "5", "--out", dir); code == 0 || !strings.Contains(errs, "--mask-samples does not apply") {
		t.Errorf("--mask-samples with --subspace: exit %d, %s", code, errs)
	}
	if code, _, errs := prism("eval", "--subspace", "--checkpoint", testNet, "--lambda", "0.3,2", "--out", dir); code == 0 || !strings.Contains(errs, `"2"`) {
		t.Errorf("--lambda 0.3,2: exit %d, %s", code, errs)
	}
}
