package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/nifti"
)

// writeBallStickScan writes a 4×3×2 scan simulated from a ball and one
// stick along x (f = 0.5, d = 1.5e−3, S0 = 1000, SNR 50) on the UKB-like
// table, one voxel all NaN, and returns the flags for `prism dmri mcmc`.
func writeBallStickScan(t *testing.T, dir string) []string {
	t.Helper()
	des := fdmri.UKBDesign()
	const nx, ny, nz = 4, 3, 2
	nv := nx * ny * nz
	img, err := nifti.New(nifti.Float32, nx, ny, nz, des.N)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	var bval, bx, by, bz []string
	for j := 0; j < des.N; j++ {
		row := des.Row(j)
		bval = append(bval, ftoa(row[0]))
		bx, by, bz = append(bx, ftoa(row[1])), append(by, ftoa(row[2])), append(bz, ftoa(row[3]))
		sig := 0.5*math.Exp(-row[0]*1.5e-3) + 0.5*math.Exp(-row[0]*1.5e-3*row[1]*row[1])
		for i := 0; i < nv; i++ {
			img.Data[i+j*nv] = float32(1000 * (sig + r.NormFloat64()/50))
		}
	}
	for j := 0; j < des.N; j++ {
		img.Data[5+j*nv] = float32(math.NaN())
	}
	files := []string{filepath.Join(dir, "dwi.nii.gz"), filepath.Join(dir, "dwi.bval"), filepath.Join(dir, "dwi.bvec")}
	if err := nifti.Write(files[0], img); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(files[1], []byte(strings.Join(bval, " ")+"\n"), 0o644)
	os.WriteFile(files[2], []byte(strings.Join(bx, " ")+"\n"+strings.Join(by, " ")+"\n"+strings.Join(bz, " ")+"\n"), 0o644)
	return []string{"--dwi", files[0], "--bval", files[1], "--bvec", files[2]}
}

func ftoa(v float64) string { b, _ := json.Marshal(v); return string(b) }

// TestDMRIMCMCAndCompare runs both sub-commands end to end on a tiny
// simulated scan (short chains: this checks the wiring, the sampler is
// tested in package mcmc). dyads1 must point along x (within 10°: SNR 50,
// 105 measurements, the posterior sd of the direction is ~2–3°) in every
// fitted voxel, the NaN voxel is reported in run.json, and comparing a
// folder with itself gives zero angles and full agreement.
func TestDMRIMCMCAndCompare(t *testing.T) {
	dir := t.TempDir()
	flags := writeBallStickScan(t, dir)
	out := filepath.Join(dir, "out")
	mask := filepath.Join(dir, "mask.nii")
	m, _ := nifti.New(nifti.Uint8, 4, 3, 2)
	for i := range m.Data {
		m.Data[i] = 1
	}
	nifti.Write(mask, m)
	args := append([]string{"dmri", "mcmc"}, flags...)
	args = append(args, "--mask", mask, "--fibres", "2", "--burnin", "300", "--jumps", "200", "--sample-every", "20", "--out", out)
	code, _, errs := prism(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var info struct {
		Fitted  int            `json:"voxels_fitted"`
		Skipped map[string]int `json:"voxels_skipped"`
	}
	data, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Fitted != 23 || info.Skipped["non-finite data"] != 1 {
		t.Fatalf("run.json: %s", data)
	}
	dy, err := nifti.Read(filepath.Join(out, "dyads1.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 24; i++ {
		if i == 5 {
			continue
		}
		if x := math.Abs(float64(dy.Data[i])); x < math.Cos(10*math.Pi/180) {
			t.Errorf("voxel %d: dyads1 = (%v, %v, %v), want ±x", i, dy.Data[i], dy.Data[i+24], dy.Data[i+48])
		}
	}
	cmp := filepath.Join(dir, "cmp")
	code, stdout, errs := prism("dmri", "compare", out, out, "--out", cmp)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	var c struct {
		Agreement float64 `json:"fibre_count_agreement"`
		Fibres    []struct {
			Angle struct {
				Max float64 `json:"p90"`
			} `json:"angle_deg"`
		} `json:"fibres"`
	}
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatal(err)
	}
	if c.Agreement != 1 || len(c.Fibres) != 2 || c.Fibres[0].Angle.Max > 0.01 {
		t.Fatalf("self comparison: %s", stdout)
	}
	for _, f := range []string{"compare.json", "angle_dyads1.png", "diff_f1.png", "nfibres.png"} {
		if _, err := os.Stat(filepath.Join(cmp, f)); err != nil {
			t.Error(err)
		}
	}
	if code, _, _ := prism("dmri", "compare", out); code == 0 {
		t.Error("compare with one folder succeeded")
	}
	if code, _, _ := prism("dmri", "bogus"); code == 0 {
		t.Error("unknown sub-command succeeded")
	}
}
