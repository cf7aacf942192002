package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/nifti"
)

// dtiScalars and dtiVectors are the maps `dmri dti` writes, 3-D and 4-D
// with three volumes.
var (
	dtiScalars = []string{"dti_FA", "dti_MD", "dti_MO", "dti_L1", "dti_L2", "dti_L3", "dti_S0"}
	dtiVectors = []string{"dti_V1", "dti_V2", "dti_V3"}
)

func TestDMRIDTIHelp(t *testing.T) {
	code, _, errs := prism("dmri", "dti", "-h")
	if code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, want := range []string{"Usage: prism dmri dti --dwi FILE", "dti_V1", "-wls-iter", "-save-tensor", "FSL's voxel convention"} {
		if !strings.Contains(errs, want) {
			t.Errorf("usage lacks %q:\n%s", want, errs)
		}
	}
	if _, out, _ := prism("dmri"); !strings.Contains(out, "dti ") {
		t.Errorf("`prism dmri` does not list dti:\n%s", out)
	}
}

// dtiRun is the part of run.json the tests read.
type dtiRun struct {
	InMask     int            `json:"voxels_in_mask"`
	Fitted     int            `json:"voxels_fitted"`
	Skipped    map[string]int `json:"voxels_skipped"`
	MaskSource string         `json:"mask_source"`
	NegEig     int            `json:"voxels_negative_eigenvalue"`
	ExVoxels   int            `json:"voxels_with_excluded_measurements"`
	ExMeas     int            `json:"measurements_excluded"`
	MedianFA   float64        `json:"median_fa"`
	Timings    map[string]float64
	Settings   struct {
		WLSIterations int `json:"wls_iterations"`
	} `json:"settings"`
}

func readDTIRun(t *testing.T, out string) dtiRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r dtiRun
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// writeFSLTable writes d as FSL bval/bvec files (3 rows) into dir.
func writeFSLTable(t *testing.T, dir string, d interface{ Row(int) []float64 }, n int) (bval, bvec string) {
	t.Helper()
	var bv strings.Builder
	rows := [3]strings.Builder{}
	for j := range n {
		r := d.Row(j)
		fmt.Fprintf(&bv, "%v ", r[0])
		for c := range 3 {
			fmt.Fprintf(&rows[c], "%.17g ", r[1+c])
		}
	}
	bval, bvec = filepath.Join(dir, "dwi.bval"), filepath.Join(dir, "dwi.bvec")
	if err := os.WriteFile(bval, []byte(bv.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bvec, []byte(rows[0].String()+"\n"+rows[1].String()+"\n"+rows[2].String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return bval, bvec
}

// TestDMRIDTISynthetic runs `dmri dti` on a 4×3×2 float32 image of
// noiseless signals from known tensors (UKB-like table, random
// orientations in the b-vectors' frame, S0 varying per voxel) stored with
// a positive-determinant sform, so FSLFlipX is true: the eigenvectors must
// come out in the b-vectors' frame with no x flip, as the dyads of `dmri
// fit`. One voxel has a NaN, one an all-zero series (b0 ≤ 0), one three
// zero measurements (left out, still exact), one lies outside the mask.
// Tolerances: the signals are stored as float32 (relative rounding
// 6e-8, i.e. 6e-8 in ln S), which moves D by ≲ 1e-6 relative through the
// design's conditioning; 2e-5 relative on eigenvalues, MD, S0 and the
// tensor, 2e-5 on FA, and 1e-4 rad on eigenvectors (errors / eigenvalue
// gaps ≥ 0.2|D|) leave a margin while a flip or a wrong element order is
// O(1).
func TestDMRIDTISynthetic(t *testing.T) {
	dir := t.TempDir()
	d := fdmri.UKBDesign()
	bval, bvec := writeFSLTable(t, dir, d, d.N)
	const nx, ny, nz = 4, 3, 2
	nv := nx * ny * nz
	img, err := nifti.New(nifti.Float32, nx, ny, nz, d.N)
	if err != nil {
		t.Fatal(err)
	}
	img.Pixdim[1], img.Pixdim[2], img.Pixdim[3] = 2, 2, 2
	img.SetSform(nifti.Mat4{{2, 0, 0, -4}, {0, 2, 0, -3}, {0, 0, 2, 1}, {0, 0, 0, 1}}, nifti.XformScannerAnat)
	if !img.FSLFlipX() {
		t.Fatal("test image should have FSLFlipX true")
	}
	mask, err := nifti.NewLike(&img.Header, nifti.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	const nanVox, zeroVox, holeVox, outVox = 5, 9, 14, 23
	r := rand.New(rand.NewPCG(31, 32))
	type truth struct {
		l  [3]float64
		v  [3][3]float64 // v[k]: eigenvector of l[k]
		D  [6]float64    // Dxx, Dyy, Dzz, Dxy, Dxz, Dyz
		s0 float64
	}
	want := make([]truth, nv)
	for i := range nv {
		mask.Data[i] = 1
		if i == outVox {
			mask.Data[i] = 0
		}
		l := [3]float64{1.2e-3 + 0.8e-3*r.Float64(), 0.5e-3 + 0.2e-3*r.Float64(), 0.1e-3 + 0.2e-3*r.Float64()}
		R := randRotation(r)
		var D [3][3]float64
		for a := range 3 {
			for b := range 3 {
				for k := range 3 {
					D[a][b] += R[a][k] * l[k] * R[b][k]
				}
			}
		}
		tr := truth{l: l, D: [6]float64{D[0][0], D[1][1], D[2][2], D[0][1], D[0][2], D[1][2]}, s0: 300 + 20*float64(i)}
		for k := range 3 {
			tr.v[k] = [3]float64{R[0][k], R[1][k], R[2][k]}
		}
		want[i] = tr
		for j := range d.N {
			row := d.Row(j)
			b, g := row[0], row[1:4]
			var q float64
			for a := range 3 {
				for c := range 3 {
					q += g[a] * D[a][c] * g[c]
				}
			}
			val := tr.s0 * math.Exp(-b*q)
			switch {
			case i == nanVox && j == 40:
				val = math.NaN()
			case i == zeroVox:
				val = 0
			case i == holeVox && (j == 10 || j == 60 || j == 99):
				val = 0
			}
			img.Data[i+j*nv] = float32(val)
		}
	}
	dwi, maskPath := filepath.Join(dir, "dwi.nii.gz"), filepath.Join(dir, "mask.nii.gz")
	if err := nifti.Write(dwi, img); err != nil {
		t.Fatal(err)
	}
	if err := nifti.Write(maskPath, mask); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dti")
	code, _, errs := prism("dmri", "dti", "--dwi", dwi, "--bval", bval, "--bvec", bvec, "--mask", maskPath, "--out", out, "--save-tensor")
	if code != 0 {
		t.Fatalf("dmri dti: exit %d: %s", code, errs)
	}
	ref, err := nifti.ReadHeader(dwi)
	if err != nil {
		t.Fatal(err)
	}
	maps := map[string]*nifti.Volume{}
	for _, n := range append(append(append([]string{}, dtiScalars...), dtiVectors...), "dti_tensor") {
		v := readOut(t, out, n)
		checkGeometry(t, n, &v.Header, ref)
		maps[n] = v
	}
	skipped := map[int]bool{nanVox: true, zeroVox: true, outVox: true}
	for i := range nv {
		if skipped[i] {
			for n, v := range maps {
				_, _, _, nt := v.Shape()
				for k := range nt {
					if v.Data[i+k*nv] != 0 {
						t.Errorf("%s is %v at skipped voxel %d", n, v.Data[i+k*nv], i)
					}
				}
			}
			continue
		}
		tr := want[i]
		rel := func(name string, got float32, w float64) {
			if math.Abs(float64(got)-w) > 2e-5*math.Abs(w) {
				t.Errorf("voxel %d: %s = %v, want %v", i, name, got, w)
			}
		}
		for k, n := range []string{"dti_L1", "dti_L2", "dti_L3"} {
			rel(n, maps[n].Data[i], tr.l[k])
		}
		rel("dti_MD", maps["dti_MD"].Data[i], (tr.l[0]+tr.l[1]+tr.l[2])/3)
		rel("dti_S0", maps["dti_S0"].Data[i], tr.s0)
		if fa, _ := dti.Anisotropy(tr.l); math.Abs(float64(maps["dti_FA"].Data[i])-fa) > 2e-5 {
			t.Errorf("voxel %d: FA %v, want %v", i, maps["dti_FA"].Data[i], fa)
		}
		// dtifit's tensor order: Dxx, Dxy, Dxz, Dyy, Dyz, Dzz.
		for k, e := range []int{0, 3, 4, 1, 5, 2} {
			if got := float64(maps["dti_tensor"].Data[i+k*nv]); math.Abs(got-tr.D[e]) > 2e-5*tr.l[0] {
				t.Errorf("voxel %d: dti_tensor volume %d = %v, want %v", i, k, got, tr.D[e])
			}
		}
		for k, n := range dtiVectors {
			v := maps[n]
			got := [3]float64{float64(v.Data[i]), float64(v.Data[i+nv]), float64(v.Data[i+2*nv])}
			if a := axisAngle(got, tr.v[k]); a > 1e-4 {
				t.Errorf("voxel %d: %s = %v, want ±%v (off by %.3g rad)", i, n, got, tr.v[k], a)
			}
			if dti.Canonical(got) != got {
				t.Errorf("voxel %d: %s = %v not signed with z ≥ 0", i, n, got)
			}
		}
	}
	run := readDTIRun(t, out)
	if run.InMask != nv-1 || run.Fitted != nv-3 || run.Skipped[dmrifit.SkipNonFinite] != 1 || run.Skipped[dmrifit.SkipB0] != 1 {
		t.Errorf("run.json counts: %+v", run)
	}
	if run.ExVoxels != 1 || run.ExMeas != 3 || run.NegEig != 0 || run.Settings.WLSIterations != 1 || run.MaskSource != "file" {
		t.Errorf("run.json: %+v", run)
	}
	for _, k := range []string{"load", "fit", "write", "total"} {
		if !(run.Timings[k] >= 0) {
			t.Errorf("run.json timing %q missing", k)
		}
	}
}

// randRotation returns a uniformly distributed rotation matrix.
func randRotation(r *rand.Rand) [3][3]float64 {
	var q [4]float64
	var n float64
	for i := range q {
		q[i] = r.NormFloat64()
		n += q[i] * q[i]
	}
	n = math.Sqrt(n)
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

func axisAngle(a, b [3]float64) float64 {
	c := math.Abs(a[0]*b[0]+a[1]*b[1]+a[2]*b[2]) / math.Sqrt((a[0]*a[0]+a[1]*a[1]+a[2]*a[2])*(b[0]*b[0]+b[1]*b[1]+b[2]*b[2]))
	return math.Acos(math.Min(1, c))
}

// checkGeometry checks that an output has the input's grid, voxel sizes
// and transforms.
func checkGeometry(t *testing.T, name string, h, ref *nifti.Header) {
	t.Helper()
	for k := 1; k <= 3; k++ {
		if h.Dim[k] != ref.Dim[k] || h.Pixdim[k] != ref.Pixdim[k] {
			t.Errorf("%s: dim/pixdim %d = %d/%v, input %d/%v", name, k, h.Dim[k], h.Pixdim[k], ref.Dim[k], ref.Pixdim[k])
		}
	}
	if h.SformCode != ref.SformCode || h.QformCode != ref.QformCode || h.Srow != ref.Srow || h.SformMatrix() != ref.SformMatrix() || h.QformMatrix() != ref.QformMatrix() {
		t.Errorf("%s: transforms differ from the input's", name)
	}
	want := map[bool]int64{false: 3, true: 4}[strings.HasPrefix(name, "dti_V") || name == "dti_tensor"]
	if h.Dim[0] != want {
		t.Errorf("%s: %d dimensions, want %d", name, h.Dim[0], want)
	}
}

const dipySmallDir = "../../../shared/data/dmri/dipy-small"

// TestDMRIDTIRealScan runs `dmri dti` on DIPY's small_64D ROI (10×10×10,
// 1 b0 + 64 directions at b ≈ 1000, int16, transposed bvec with a NaN b0
// direction) with the automatic mask, and checks every output: input
// geometry, FA in [0, 1], unit and mutually orthogonal vectors (1e-6:
// float32 storage of unit vectors), L1 ≥ L2 ≥ L3, MD = mean eigenvalue
// and every map equal to the library's fit of the scan LoadScan gives
// (float32 storage: 1e-6 relative), zero outside the fitted voxels, and
// run.json's counts.
func TestDMRIDTIRealScan(t *testing.T) {
	if _, err := os.Stat(dipySmallDir); err != nil {
		t.Skipf("real scan not available (%v): the shared data folder is not beside this checkout", err)
	}
	files := dmrifit.ScanFiles{DWI: filepath.Join(dipySmallDir, "small_64D.nii"), Bval: filepath.Join(dipySmallDir, "small_64D.bval"),
		Bvec: filepath.Join(dipySmallDir, "small_64D.bvec")}
	out := filepath.Join(t.TempDir(), "dti")
	code, _, errs := prism("dmri", "dti", "--dwi", files.DWI, "--bval", files.Bval, "--bvec", files.Bvec, "--out", out)
	if code != 0 {
		t.Fatalf("dmri dti: exit %d: %s", code, errs)
	}
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dti.NewFitter(scan.Design, dti.DefaultWLSIterations)
	if err != nil {
		t.Fatal(err)
	}
	n := len(scan.Voxels)
	fits, ferrs := make([]dti.Fit, n), make([]error, n)
	if err := f.FitVoxels(scan.Signal, fits, ferrs, 1); err != nil {
		t.Fatal(err)
	}
	maps := map[string]*nifti.Volume{}
	for _, name := range append(append([]string{}, dtiScalars...), dtiVectors...) {
		v := readOut(t, out, name)
		checkGeometry(t, name, &v.Header, scan.Ref)
		maps[name] = v
	}
	if _, err := os.Stat(filepath.Join(out, "dti_tensor"+dmrifit.OutputExt)); !os.IsNotExist(err) {
		t.Errorf("dti_tensor written without --save-tensor")
	}
	nv := scan.NumVoxels()
	fitted := map[int]int{}
	failed := 0
	for v, i := range scan.Voxels {
		if ferrs[v] == nil {
			fitted[i] = v
		} else {
			failed++
		}
	}
	if len(fitted) < 200 { // the automatic mask keeps 249
		t.Fatalf("only %d voxels fitted", len(fitted))
	}
	close32 := func(got float32, want float64, scale float64) bool {
		return math.Abs(float64(got)-want) <= 1e-6*scale
	}
	for i := range nv {
		v, ok := fitted[i]
		if !ok {
			for name, m := range maps {
				_, _, _, nt := m.Shape()
				for k := range nt {
					if m.Data[i+k*nv] != 0 {
						t.Fatalf("%s nonzero at unfitted voxel %d", name, i)
					}
				}
			}
			continue
		}
		fit := fits[v]
		fa, md := maps["dti_FA"].Data[i], maps["dti_MD"].Data[i]
		l := [3]float32{maps["dti_L1"].Data[i], maps["dti_L2"].Data[i], maps["dti_L3"].Data[i]}
		if !(fa >= 0 && fa <= 1) || !(l[0] >= l[1] && l[1] >= l[2]) {
			t.Errorf("voxel %d: FA %v, eigenvalues %v", i, fa, l)
		}
		if !close32(md, (float64(l[0])+float64(l[1])+float64(l[2]))/3, math.Abs(float64(l[0]))) {
			t.Errorf("voxel %d: MD %v, eigenvalues %v", i, md, l)
		}
		scale := math.Max(math.Abs(fit.L[0]), math.Abs(fit.L[2]))
		if !close32(fa, fit.FA, 1) || !close32(md, fit.MD, scale) || !close32(l[0], fit.L[0], scale) || !close32(l[2], fit.L[2], scale) ||
			!close32(maps["dti_MO"].Data[i], fit.MO, 1) || !close32(maps["dti_S0"].Data[i], fit.S0*float64(scan.B0[i]), fit.S0*float64(scan.B0[i])) {
			t.Errorf("voxel %d: maps differ from the library fit %+v", i, fit)
		}
		var vec [3][3]float64
		for k, name := range dtiVectors {
			for c := range 3 {
				vec[k][c] = float64(maps[name].Data[i+c*nv])
				if !close32(maps[name].Data[i+c*nv], fit.V[k][c], 1) {
					t.Errorf("voxel %d: %s differs from the library fit", i, name)
				}
			}
		}
		for a := range 3 {
			for b := range 3 {
				dot := vec[a][0]*vec[b][0] + vec[a][1]*vec[b][1] + vec[a][2]*vec[b][2]
				if w := map[bool]float64{true: 1, false: 0}[a == b]; math.Abs(dot-w) > 1e-6 {
					t.Errorf("voxel %d: V%d·V%d = %v", i, a+1, b+1, dot)
				}
			}
		}
	}
	run := readDTIRun(t, out)
	if run.MaskSource != "auto" || run.InMask != scan.MaskCount() || run.Fitted != len(fitted) || run.Fitted+sumCounts(run.Skipped) != run.InMask {
		t.Errorf("run.json counts %+v; %d in mask, %d fitted, %d failed", run, scan.MaskCount(), len(fitted), failed)
	}
	if !(run.MedianFA > 0 && run.MedianFA < 1) {
		t.Errorf("median FA %v", run.MedianFA)
	}
}

func sumCounts(m map[string]int) int {
	s := 0
	for _, n := range m {
		s += n
	}
	return s
}

// TestDMRIDTIErrors: missing or inconsistent inputs fail with the file
// named, a non-zero exit and no output folder.
func TestDMRIDTIErrors(t *testing.T) {
	dir := t.TempDir()
	d := fdmri.UKBDesign()
	bval, bvec := writeFSLTable(t, dir, d, d.N)
	img, err := nifti.New(nifti.Float32, 2, 2, 1, d.N)
	if err != nil {
		t.Fatal(err)
	}
	for i := range img.Data {
		img.Data[i] = 100
	}
	dwi := filepath.Join(dir, "dwi.nii.gz")
	if err := nifti.Write(dwi, img); err != nil {
		t.Fatal(err)
	}
	badMask := filepath.Join(dir, "mask3.nii.gz")
	m, _ := nifti.New(nifti.Uint8, 3, 2, 1)
	if err := nifti.Write(badMask, m); err != nil {
		t.Fatal(err)
	}
	shortDir := filepath.Join(dir, "short")
	os.Mkdir(shortDir, 0o755)
	shortBval, shortBvec := writeFSLTable(t, shortDir, d, d.N-1)
	// b0 + 5 directions: too few to determine a tensor.
	fewDir := filepath.Join(dir, "few")
	os.Mkdir(fewDir, 0o755)
	fewBval, fewBvec := writeFSLTable(t, fewDir, d, 6)
	fewImg, _ := nifti.New(nifti.Float32, 2, 2, 1, 6)
	for i := range fewImg.Data {
		fewImg.Data[i] = 100
	}
	fewDWI := filepath.Join(fewDir, "dwi.nii.gz")
	if err := nifti.Write(fewDWI, fewImg); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{"--dwi", dwi, "--bval", bval, "--bvec", bvec}, "--out"},
		{"missing dwi", []string{"--dwi", filepath.Join(dir, "nope.nii.gz"), "--bval", bval, "--bvec", bvec}, "nope.nii.gz"},
		{"missing mask", []string{"--dwi", dwi, "--bval", bval, "--bvec", bvec, "--mask", filepath.Join(dir, "nomask.nii")}, "nomask.nii"},
		{"short bval", []string{"--dwi", dwi, "--bval", shortBval, "--bvec", shortBvec}, shortBval},
		{"mask grid", []string{"--dwi", dwi, "--bval", bval, "--bvec", bvec, "--mask", badMask}, "mask3.nii.gz"},
		{"too few directions", []string{"--dwi", fewDWI, "--bval", fewBval, "--bvec", fewBvec}, fewBval},
		{"negative iterations", []string{"--dwi", dwi, "--bval", bval, "--bvec", bvec, "--wls-iter", "-1"}, "--wls-iter"},
		{"stray argument", []string{"--dwi", dwi, "--bval", bval, "--bvec", bvec, "extra"}, "extra"},
	}
	for _, c := range cases {
		out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
		args := append([]string{"dmri", "dti"}, c.args...)
		if c.name != "no out" {
			args = append(args, "--out", out)
		}
		code, _, errs := prism(args...)
		if code == 0 {
			t.Errorf("%s: exit 0", c.name)
			continue
		}
		if !strings.Contains(errs, c.want) {
			t.Errorf("%s: message %q does not name %q", c.name, errs, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output folder created", c.name)
		}
	}
}
