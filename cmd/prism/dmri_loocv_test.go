package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/quantile"
)

// TestDMRILOOCV runs `prism dmri loocv` on a cropped real scan with a tiny
// bszt network: the tensor map equals the library's TensorLOO (float32
// rounding, 1e−6 relative), the summary's medians are those of the maps'
// values, and bad flags are refused without output.
func TestDMRILOOCV(t *testing.T) {
	ck := tinyBSZT(t)
	dir := t.TempDir()
	flags, _ := cropSlab(t, dir)
	out := filepath.Join(dir, "loo")
	args := append(append([]string{"dmri", "loocv"}, flags...), "--checkpoint", ck, "--volumes", "3", "--samples", "4", "--steps", "2", "--quiet", "--out", out)
	if code, _, errs := prism(args...); code != 0 {
		t.Fatalf("dmri loocv: exit %d: %s", code, errs)
	}
	var rep dmrifit.LOOCVReport
	b, err := os.ReadFile(filepath.Join(out, "loocv.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.HeldOut) != 3 || len(rep.Methods) != 2 || rep.NetworkBetter == nil {
		t.Fatalf("report %+v", rep)
	}
	scan, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: flags[1], Bval: flags[3], Bvec: flags[5], Mask: flags[7]})
	if err != nil {
		t.Fatal(err)
	}
	l, err := dmrifit.TensorLOO(context.Background(), scan, rep.HeldOut, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := l.RMSE(scan)
	got := readOut(t, out, "loo_rmse_dti")
	net := readOut(t, out, "loo_rmse_network")
	var vals []float64
	for v, i := range scan.Voxels {
		if math.Abs(float64(got.Data[i])-want[v]) > 1e-6*want[v] {
			t.Errorf("voxel %d: loo_rmse_dti %v, TensorLOO %v", i, got.Data[i], want[v])
		}
		if !(net.Data[i] > 0) {
			t.Errorf("voxel %d: loo_rmse_network %v", i, net.Data[i])
		}
		vals = append(vals, want[v])
	}
	if m := quantile.Median(vals); math.Abs(rep.Methods[0].Median-m) > 1e-12 {
		t.Errorf("summary median %v, maps %v", rep.Methods[0].Median, m)
	}
	for _, bad := range [][]string{{"--volumes", "-1"}, {"--fa-wm", "2"}, {"--lambda", "1"}, {"--correct", "smc"}} {
		o := filepath.Join(dir, "bad")
		a := append(append(append([]string{"dmri", "loocv"}, flags...), bad...), "--out", o)
		code, _, errs := prism(a...)
		if code == 0 || !strings.Contains(errs, bad[0]) {
			t.Errorf("%v: exit %d, %q", bad, code, errs)
		}
		if _, err := os.Stat(o); !os.IsNotExist(err) {
			t.Errorf("%v: output folder created", bad)
		}
	}
	// With the (bszt) network: a correction method that does not exist,
	// "auto" (a dmri fit default, not a LOOCV method) and --correct-lambda
	// without a correction are refused before any fit, without output.
	for _, bad := range [][]string{{"--correct", "mcmc"}, {"--correct", "auto"}, {"--correct-lambda", "0.9"}} {
		o := filepath.Join(dir, "bad-net")
		a := append(append(append([]string{"dmri", "loocv"}, flags...), bad...), "--checkpoint", ck, "--quiet", "--out", o)
		code, _, errs := prism(a...)
		if code == 0 || !strings.Contains(errs, "correct") {
			t.Errorf("%v: exit %d, %q", bad, code, errs)
		}
		if _, err := os.Stat(o); !os.IsNotExist(err) {
			t.Errorf("%v: output folder created", bad)
		}
	}
}
