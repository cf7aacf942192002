package dmrifit

import (
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/nifti"
)

const slab = "../../shared/data/dmri/mrtrix3-msmt-slab/"

func slabFiles(t *testing.T) ScanFiles {
	t.Helper()
	if _, err := os.Stat(slab + "dwi.nii.gz"); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
	return ScanFiles{DWI: slab + "dwi.nii.gz", Bval: slab + "dwi.bval", Bvec: slab + "dwi.bvec", Mask: slab + "mask.nii.gz"}
}

// TestLoadScanSlab: shapes and counts from the dataset's README (15×15×11
// ×102, 6 b≈0 volumes at b = 0.5, mask of 2218 voxels), and the
// normalised signal of a few voxels recomputed here from the raw image.
func TestLoadScanSlab(t *testing.T) {
	files := slabFiles(t)
	s, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nx != 15 || s.Ny != 15 || s.Nz != 11 || s.Design.N != 102 || s.B0Volumes != 6 {
		t.Fatalf("grid %d×%d×%d×%d, %d b0 volumes", s.Nx, s.Ny, s.Nz, s.Design.N, s.B0Volumes)
	}
	if s.MaskCount() != 2218 || s.MaskSource != "file" {
		t.Fatalf("mask: %d voxels from %s, want 2218 from file", s.MaskCount(), s.MaskSource)
	}
	if len(s.Voxels)+s.SkippedTotal() != 2218 || len(s.Signal) != len(s.Voxels)*102 {
		t.Fatalf("%d fitted + %d skipped, %d signal values", len(s.Voxels), s.SkippedTotal(), len(s.Signal))
	}
	img, err := nifti.Read(files.DWI)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{0, len(s.Voxels) / 2, len(s.Voxels) - 1} {
		i := s.Voxels[v]
		series := img.Voxel(i)
		var b0 float64
		var nb0 int
		for j := range series {
			if s.Design.Row(j)[0] < 1 { // the b0 volumes have b = 0.5
				b0 += float64(series[j])
				nb0++
			}
		}
		b0 /= float64(nb0)
		for j := range series {
			want := float64(series[j]) / b0
			if got := s.Signal[v*102+j]; math.Abs(got-want) > 1e-12*math.Abs(want) {
				t.Fatalf("voxel %d volume %d: %v, want %v", i, j, got, want)
			}
		}
	}
}

// writeSynthetic writes a 6×5×4×8 scan (2 b0 volumes) and an all-ones
// mask to dir and returns their files. Voxel 7 has a NaN, voxel 8 has b0 = 0 and voxel 9 b0 < 0.
func writeSynthetic(t *testing.T, dir string) ScanFiles {
	t.Helper()
	const nx, ny, nz, nt = 6, 5, 4, 8
	img, err := nifti.New(nifti.Float32, nx, ny, nz, nt)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	nv := nx * ny * nz
	for i := 0; i < nv; i++ {
		for j := 0; j < nt; j++ {
			img.Data[i+j*nv] = float32(100 + 50*r.Float64())
		}
	}
	img.Data[7+3*nv] = float32(math.NaN())
	img.Data[8], img.Data[8+nv] = 0, 0
	img.Data[9], img.Data[9+nv] = -5, 1
	files := ScanFiles{DWI: filepath.Join(dir, "dwi.nii.gz"), Bval: filepath.Join(dir, "b.bval"), Bvec: filepath.Join(dir, "b.bvec")}
	if err := nifti.Write(files.DWI, img); err != nil {
		t.Fatal(err)
	}
	bval := "0 5 1000 1000 1000 2000 2000 2000\n"
	bvec := "nan 0 1 0 0 0.6 0 0.8\nnan 0 0 1 0 0.8 0.6 0\nnan 1 0 0 1 0 0.8 0.6\n"
	if err := os.WriteFile(files.Bval, []byte(bval), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.Bvec, []byte(bvec), 0o644); err != nil {
		t.Fatal(err)
	}
	// An all-ones mask file keeps every voxel in.
	m, _ := nifti.New(nifti.Uint8, nx, ny, nz)
	for i := range m.Data {
		m.Data[i] = 1
	}
	files.Mask = filepath.Join(dir, "mask.nii")
	if err := nifti.Write(files.Mask, m); err != nil {
		t.Fatal(err)
	}
	return files
}

func TestLoadScanSkipsAndErrors(t *testing.T) {
	dir := t.TempDir()
	files := writeSynthetic(t, dir)
	s, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped[SkipNonFinite] != 1 || s.Skipped[SkipB0] != 2 || len(s.Voxels) != 120-3 {
		t.Fatalf("skipped %v, %d fitted; want 1 non-finite, 2 b0 ≤ 0, 117 fitted", s.Skipped, len(s.Voxels))
	}
	for _, v := range s.Voxels {
		if v == 7 || v == 8 || v == 9 {
			t.Fatalf("voxel %d should have been skipped", v)
		}
	}
	// Mismatched table length.
	bad := files
	bad.Bval = filepath.Join(dir, "short.bval")
	bad.Bvec = filepath.Join(dir, "short.bvec")
	os.WriteFile(bad.Bval, []byte("0 1000 1000\n"), 0o644)
	os.WriteFile(bad.Bvec, []byte("0 1 0\n0 0 1\n1 0 0\n"), 0o644)
	if _, err := LoadScan(bad); err == nil || !strings.Contains(err.Error(), "8 volumes") {
		t.Errorf("volume/b-value count mismatch: err = %v", err)
	}
	// Mask on another grid.
	m2, _ := nifti.New(nifti.Uint8, 6, 5, 3)
	bad = files
	bad.Mask = filepath.Join(dir, "mask2.nii")
	nifti.Write(bad.Mask, m2)
	if _, err := LoadScan(bad); err == nil || !strings.Contains(err.Error(), "grid") {
		t.Errorf("mask grid mismatch: err = %v", err)
	}
}

// TestAutoMask: a bright ball (b0 ≈ 1000) with a dark hole in its centre,
// on a noisy background (≈ 50) with a separate bright speck, gives exactly
// the ball with its hole filled.
func TestAutoMask(t *testing.T) {
	const n = 20
	b0 := make([]float32, n*n*n)
	want := make([]bool, n*n*n)
	r := rand.New(rand.NewPCG(2, 2))
	for z := 0; z < n; z++ {
		for y := 0; y < n; y++ {
			for x := 0; x < n; x++ {
				i := x + n*(y+n*z)
				d2 := (x-10)*(x-10) + (y-10)*(y-10) + (z-10)*(z-10)
				b0[i] = float32(50 + 20*r.Float64())
				if d2 <= 36 {
					want[i] = true
					b0[i] = float32(900 + 200*r.Float64())
					if d2 <= 2 {
						b0[i] = 40 // hole
					}
				}
			}
		}
	}
	b0[1+n*(1+n*1)] = 1100 // isolated speck
	got := AutoMask(b0, n, n, n)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("voxel %d: mask %v, want %v", i, got[i], want[i])
		}
	}
}

// samplePosterior builds a one-voxel-per-case posterior with known dyads.
func TestDyadAndDispersion(t *testing.T) {
	const S = 200
	p, err := NewStickSamples([]int{0, 1, 2}, 1, S)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	for s := 0; s < S; s++ {
		// voxel 0: every sample along (θ, φ) = (1, 2), alternately as the
		// antipode (θ' = π − θ, φ' = φ + π) — the same axis.
		th, ph := 1.0, 2.0
		if s%2 == 1 {
			th, ph = math.Pi-1, 2+math.Pi
		}
		p.Theta[0][s], p.Phi[0][s] = float32(th), float32(ph)
		// voxel 1: half along x, half along y: T = diag(½, ½, 0),
		// dispersion ½, principal axis in the xy plane.
		if s%2 == 0 {
			p.Theta[0][S+s], p.Phi[0][S+s] = math.Pi/2, 0
		} else {
			p.Theta[0][S+s], p.Phi[0][S+s] = math.Pi/2, math.Pi/2
		}
		// voxel 2: uniform on the sphere: T → I/3, dispersion → 2/3.
		z := 2*r.Float64() - 1
		p.Theta[0][2*S+s], p.Phi[0][2*S+s] = float32(math.Acos(z)), float32(2*math.Pi*r.Float64()-math.Pi)
	}
	dir, disp := p.Dyad(0, 0)
	st, ct := math.Sincos(1)
	sp, cp := math.Sincos(2)
	want := [3]float64{st * cp, st * sp, ct}
	if d := math.Abs(dir[0]*want[0] + dir[1]*want[1] + dir[2]*want[2]); math.Abs(d-1) > 1e-6 || disp > 1e-6 || dir[2] < 0 {
		t.Errorf("single axis: dyad %v (|cos| %v), dispersion %v; want %v, 0", dir, d, disp, want)
	}
	dir, disp = p.Dyad(0, 1)
	if math.Abs(disp-0.5) > 1e-6 || math.Abs(dir[2]) > 1e-6 {
		t.Errorf("x/y mixture: dyad %v, dispersion %v; want xy plane, 0.5", dir, disp)
	}
	// For n uniform, each entry of the mean dyadic tensor has sd ≤
	// √(var(n_a n_b)/S) ≤ 0.3/√200 ≈ 0.02; λ_max exceeds 1/3 by up to a few
	// of those, so dispersion ∈ [2/3 − 0.1, 2/3].
	if _, disp = p.Dyad(0, 2); disp > 2.0/3+1e-9 || disp < 2.0/3-0.1 {
		t.Errorf("uniform axes: dispersion %v, want ≈ 2/3", disp)
	}
}

func TestSortByMeanFraction(t *testing.T) {
	p, _ := NewStickSamples([]int{5}, 3, 2)
	for i, f := range []float32{0.1, 0.5, 0.3} {
		p.F[i][0], p.F[i][1] = f, f
		p.Theta[i][0], p.Theta[i][1] = float32(i), float32(i)
	}
	p.SortByMeanFraction()
	for i, want := range []float32{0.5, 0.3, 0.1} {
		if p.F[i][0] != want || p.F[i][1] != want {
			t.Fatalf("stick %d: f %v, want %v", i, p.F[i], want)
		}
	}
	if p.Theta[0][0] != 1 || p.Theta[1][0] != 2 || p.Theta[2][0] != 0 {
		t.Fatalf("θ did not move with f: %v %v %v", p.Theta[0], p.Theta[1], p.Theta[2])
	}
}

// TestWriteReadCompare writes a posterior, reads the folder back, checks
// every file's shape and a few values, and compares the folder with itself
// and with a copy whose dyads1 are rotated by a known angle.
func TestWriteReadCompare(t *testing.T) {
	dir := t.TempDir()
	files := writeSynthetic(t, dir)
	s, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	const S = 4
	p, _ := NewStickSamples(s.Voxels, 2, S)
	for v := range s.Voxels {
		for k := 0; k < S; k++ {
			o := v*S + k
			p.F[0][o], p.F[1][o] = 0.5, 0.2
			if v%3 == 0 {
				p.F[1][o] = 0.01 // one stick only
			}
			p.Theta[0][o], p.Phi[0][o] = 0.3, 0.7
			p.Theta[1][o], p.Phi[1][o] = 1.2, -2
			p.D[o], p.DStd[o], p.S0[o] = 1e-3, 2e-4, 1
		}
	}
	a := filepath.Join(dir, "a")
	if err := WriteBedpostX(a, s.Ref, s.Mask, p); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"merged_th1samples", "merged_ph2samples", "merged_f1samples"} {
		v, err := nifti.Read(filepath.Join(a, name+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, nt := v.Shape(); nt != S {
			t.Errorf("%s has %d volumes, want %d", name, nt, S)
		}
	}
	th, _ := nifti.Read(filepath.Join(a, "mean_th1samples.nii.gz"))
	if i := s.Voxels[0]; math.Abs(float64(th.Data[i])-0.3) > 1e-6 || th.Data[7] != 0 {
		t.Errorf("mean_th1 %v at a fitted voxel (want 0.3), %v at a skipped one (want 0)", th.Data[i], th.Data[7])
	}
	fa, err := ReadBedpostX(a)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Fibres != 2 || len(fa.Mask) != 120 {
		t.Fatalf("read back %d fibres, %d mask voxels", fa.Fibres, len(fa.Mask))
	}
	self, err := Compare(fa, fa)
	if err != nil {
		t.Fatal(err)
	}
	if self.CountAgreement != 1 || self.Fibres[0].Angle.Mean > 0.05 || self.Fibres[0].FracRMSDiff != 0 {
		t.Errorf("self comparison: %+v", self)
	}
	// Rotate dyads1 by 20° about the z axis (θ fixed at 0.3 rad, φ + δ gives
	// an angle of 2·asin(sin θ·sin(δ/2)) between the axes); drop f1 by 0.1.
	delta := 2 * math.Asin(math.Sin(20*math.Pi/360)/math.Sin(0.3))
	for o := range p.Phi[0] {
		p.Phi[0][o] += float32(delta)
		p.F[0][o] -= 0.1
	}
	b := filepath.Join(dir, "b")
	if err := WriteBedpostX(b, s.Ref, s.Mask, p); err != nil {
		t.Fatal(err)
	}
	fb, err := ReadBedpostX(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(fa, fb)
	if err != nil {
		t.Fatal(err)
	}
	f1 := c.Fibres[0]
	// float32 storage: angles good to ~1e−4°, fractions to ~1e−7.
	if f1.Angle.N != 117 || math.Abs(f1.Angle.Median-20) > 1e-3 || math.Abs(f1.AngleWeightedMean-20) > 1e-3 {
		t.Errorf("rotated dyads1: %+v", f1)
	}
	if math.Abs(f1.FracMeanDiff*120/117+0.1) > 1e-6 || c.Fibres[1].Angle.Median > 1e-3 {
		t.Errorf("fraction difference %v (over 120 mask voxels, 117 fitted), fibre 2 angle %v", f1.FracMeanDiff, c.Fibres[1].Angle.Median)
	}
	// Counts: 3 skipped voxels have 0 sticks in both; others 1 or 2.
	if c.CountAgreement != 1 || c.CountConfusion[0][0] != 3 || c.CountConfusion[1][1]+c.CountConfusion[2][2] != 117 {
		t.Errorf("counts: agreement %v, confusion %v", c.CountAgreement, c.CountConfusion)
	}
	out := filepath.Join(dir, "cmp")
	if err := WriteComparisonPNGs(out, fa, fb, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"angle_dyads1.png", "diff_f1.png", "nfibres.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != 6*PNGScale || b.Dy() != 5*PNGScale {
			t.Errorf("%s is %v", name, b)
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(out, "c.json"), c); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	data, _ := os.ReadFile(filepath.Join(out, "c.json"))
	if err := json.Unmarshal(data, &back); err != nil || back["fibre_count_agreement"] != 1.0 {
		t.Errorf("compare.json: %v %v", err, back["fibre_count_agreement"])
	}
}

// TestAutoMaskSlab: on the slab (little background, bright CSF) the
// automatic mask agrees with the supplied MRtrix3 mask: Dice 0.984 when
// written (2238 vs 2218 voxels, 2193 in both); the test asks for ≥ 0.95.
func TestAutoMaskSlab(t *testing.T) {
	files := slabFiles(t)
	ref, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	files.Mask = ""
	auto, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	both := 0
	for i := range auto.Mask {
		if auto.Mask[i] && ref.Mask[i] {
			both++
		}
	}
	dice := 2 * float64(both) / float64(auto.MaskCount()+ref.MaskCount())
	if auto.MaskSource != "auto" || dice < 0.95 {
		t.Fatalf("auto mask (%s): %d voxels, %d shared with the file mask's %d: Dice %.3f", auto.MaskSource, auto.MaskCount(), both, ref.MaskCount(), dice)
	}
}

// TestLoadScanRefusesBadInput: one table-driven case per way a scan can
// be unusable; each must fail with a message naming the file and the
// problem.
func TestLoadScanRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	files := writeSynthetic(t, dir)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A mask with the DWI's matrix but another geometry.
	mask := func(name string, edit func(h *nifti.Header)) string {
		m, _ := nifti.New(nifti.Uint8, 6, 5, 4)
		for i := range m.Data {
			m.Data[i] = 1
		}
		edit(&m.Header)
		p := filepath.Join(dir, name)
		if err := nifti.Write(p, m); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sameBvec := write("same.bvec", "0 0 0 0 0 0 0 0\n0 0 0 0 0 0 0 0\n1 1 1 1 1 1 1 1\n")
	for _, tc := range []struct {
		name string
		edit func(f *ScanFiles)
		want []string
	}{
		{"all b = 0", func(f *ScanFiles) { f.Bval = write("zero.bval", "0 0 0 0 0 0 0 0\n") }, []string{"zero.bval", "every volume is a b ≤ 50"}},
		{"b in ms/µm²", func(f *ScanFiles) { f.Bval = write("ms.bval", "0 0.005 1 1 1 2 2 2\n") }, []string{"ms.bval", "multiply them by 1000"}},
		{"identical directions", func(f *ScanFiles) { f.Bvec = sameBvec }, []string{"same.bvec", "1 distinct axes"}},
		{"mask shifted 50 mm", func(f *ScanFiles) {
			f.Mask = mask("shifted.nii", func(h *nifti.Header) {
				h.SetSform(nifti.Mat4{{1, 0, 0, 50}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, 1)
			})
		}, []string{"shifted.nii", "not on the grid", "by 50 mm"}},
		{"mask with 6 mm voxels", func(f *ScanFiles) {
			f.Mask = mask("coarse.nii", func(h *nifti.Header) { h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 6, 6, 6 })
		}, []string{"coarse.nii", "not on the grid", "voxel sizes 6×6×6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := files
			tc.edit(&f)
			_, err := LoadScan(f)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestLoadScanSkipsImplausible: a value of 1e30 in one volume, or a b0
// far above the rest of the mask, skips the voxel and counts it.
func TestLoadScanSkipsImplausible(t *testing.T) {
	dir := t.TempDir()
	files := writeSynthetic(t, dir)
	img, err := nifti.Read(files.DWI)
	if err != nil {
		t.Fatal(err)
	}
	nv := 6 * 5 * 4
	img.Data[20+5*nv] = 1e30 // one diffusion-weighted volume
	for j := range 8 {
		img.Data[21+j*nv] = 1e30 // every volume: S/b0 ≈ 1, but b0 ≈ 10²⁸ × the median
	}
	img.Data[22+4*nv] = -1e6 // a negative outlier
	if err := nifti.Write(files.DWI, img); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped[SkipImplausible] != 3 || s.Skipped[SkipNonFinite] != 1 || s.Skipped[SkipB0] != 2 || len(s.Voxels) != 120-6 {
		t.Fatalf("skipped %v, %d fitted; want 3 implausible, 1 non-finite, 2 b0 ≤ 0, 114 fitted", s.Skipped, len(s.Voxels))
	}
	for _, v := range s.Voxels {
		if v >= 20 && v <= 22 {
			t.Fatalf("voxel %d should have been skipped", v)
		}
	}
}

// TestCompareRefusesOtherGrid: two output folders (or a folder and a DTI
// folder) whose images have the same matrix but another geometry are not
// compared voxel by voxel.
func TestCompareRefusesOtherGrid(t *testing.T) {
	dir := t.TempDir()
	s, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := NewStickSamples(s.Voxels, 1, 2)
	for i := range p.F[0] {
		p.F[0][i], p.Theta[0][i], p.D[i] = 0.5, 0.3, 1e-3
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := WriteBedpostX(a, s.Ref, s.Mask, p); err != nil {
		t.Fatal(err)
	}
	shifted := *s.Ref
	shifted.SetSform(nifti.Mat4{{1, 0, 0, 50}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, 1)
	if err := WriteBedpostX(b, &shifted, s.Mask, p); err != nil {
		t.Fatal(err)
	}
	fa, err := ReadBedpostX(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := ReadBedpostX(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(fa, fb); err == nil || !strings.Contains(err.Error(), "not on the grid") || !strings.Contains(err.Error(), "50 mm") {
		t.Errorf("Compare across grids: err = %v", err)
	}
	// A DTI folder on the shifted grid.
	dti := filepath.Join(dir, "dti")
	os.MkdirAll(dti, 0o755)
	for name, vols := range map[string]int{"dti_V1": 3, "dti_FA": 1} {
		v, err := nifti.NewLike(&shifted, nifti.Float32, 6, 5, 4, vols)
		if err != nil {
			t.Fatal(err)
		}
		if err := nifti.Write(filepath.Join(dti, name+".nii.gz"), v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := CompareDTI(fa, dti, 0.5); err == nil || !strings.Contains(err.Error(), "not on the grid") {
		t.Errorf("CompareDTI across grids: err = %v", err)
	}
}
