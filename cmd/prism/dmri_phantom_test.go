package main

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/nifti"
)

// phantomVoxel is one synthetic ball-and-sticks voxel of the phantom.
type phantomVoxel struct {
	f   []float64    // stick fractions
	dir [][3]float64 // stick directions (unit, in the b-vectors' frame)
}

// ballSticks is the b3s signal written out independently of the
// simulator (shared Gamma-distributed diffusivity with mean d and standard
// deviation s, as the reference implementation):
// S0·[(1−Σf)(1+b s²/d)^−(d/s)² + Σ f_i (1+b (g·n_i)² s²/d)^−(d/s)²].
func ballSticks(v phantomVoxel, b float64, g []float64, s0, d, s float64) float64 {
	k := d * d / (s * s)
	fiso := 1.0
	for _, f := range v.f {
		fiso -= f
	}
	val := fiso * math.Pow(1+b*s*s/d, -k)
	for i, f := range v.f {
		c := g[0]*v.dir[i][0] + g[1]*v.dir[i][1] + g[2]*v.dir[i][2]
		val += f * math.Pow(1+b*c*c*s*s/d, -k)
	}
	return s0 * val
}

// phantom is a synthetic ball-and-sticks scan written as NIfTI with FSL
// gradient tables, and its truth per voxel.
type phantom struct {
	dwi, bval, bvec, mask string
	truth                 []phantomVoxel
}

// writePhantom writes the phantom of TestDMRIPhantom into dir: 8 × 4 × 2
// voxels on the UKB-like protocol at SNR 80 (the top of the b3s priors'
// noise range) with S0 = 1000 and the shared Gamma diffusivity of
// in-vivo white matter (mean 1.5e−3, standard deviation 0.5e−3 mm²/s):
// 8 ball-only voxels, 32 with one stick (f = 0.5) and 24 with two sticks
// (f = 0.4, 0.3) crossing at 90°, orientations random. The sform has a
// negative determinant, so FSL's x flip does not apply and dyads are in
// the b-vectors' frame, where the truth is given.
func writePhantom(t *testing.T, dir string) phantom {
	t.Helper()
	d := fdmri.UKBDesign()
	bval, bvec := writeFSLTable(t, dir, d, d.N)
	const nx, ny, nz = 8, 4, 2
	nv := nx * ny * nz
	img, err := nifti.New(nifti.Float32, nx, ny, nz, d.N)
	if err != nil {
		t.Fatal(err)
	}
	img.Pixdim[1], img.Pixdim[2], img.Pixdim[3] = 2, 2, 2
	img.SetSform(nifti.Mat4{{-2, 0, 0, 8}, {0, 2, 0, -3}, {0, 0, 2, 1}, {0, 0, 0, 1}}, nifti.XformScannerAnat)
	if img.FSLFlipX() {
		t.Fatal("phantom should not need FSL's x flip")
	}
	const snr, s0, diff, diffStd = 80, 1000, 1.5e-3, 0.5e-3
	r := rand.New(rand.NewPCG(71, 72))
	unit := func() [3]float64 {
		for {
			v := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			if n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]); n > 1e-6 {
				return [3]float64{v[0] / n, v[1] / n, v[2] / n}
			}
		}
	}
	truth := make([]phantomVoxel, nv)
	for i := range nv {
		switch {
		case i < 8: // ball only
		case i < 40: // one stick
			truth[i] = phantomVoxel{f: []float64{0.5}, dir: [][3]float64{unit()}}
		default: // two sticks crossing at 90°
			a := unit()
			c := unit()
			dot := a[0]*c[0] + a[1]*c[1] + a[2]*c[2]
			for k := range 3 {
				c[k] -= dot * a[k]
			}
			n := math.Sqrt(c[0]*c[0] + c[1]*c[1] + c[2]*c[2])
			for k := range 3 {
				c[k] /= n
			}
			truth[i] = phantomVoxel{f: []float64{0.4, 0.3}, dir: [][3]float64{a, c}}
		}
		for j := range d.N {
			row := d.Row(j)
			y := ballSticks(truth[i], row[0], row[1:4], s0, diff, diffStd) + s0/snr*r.NormFloat64()
			img.Data[i+j*nv] = float32(y)
		}
	}
	mask, err := nifti.NewLike(&img.Header, nifti.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mask.Data {
		mask.Data[i] = 1
	}
	ph := phantom{dwi: filepath.Join(dir, "dwi.nii.gz"), bval: bval, bvec: bvec, mask: filepath.Join(dir, "mask.nii.gz"), truth: truth}
	if err := nifti.Write(ph.dwi, img); err != nil {
		t.Fatal(err)
	}
	if err := nifti.Write(ph.mask, mask); err != nil {
		t.Fatal(err)
	}
	return ph
}

// phantomFit summarises one fit of the phantom.
type phantomFit struct {
	angles   []float64          // dyads1 to the nearest true stick, sorted, stick voxels
	meanProb map[int][4]float64 // true count → mean nfibres_prob over its voxels
	right    map[int]int        // true count → voxels whose most probable count is right
	voxels   map[int]int        // true count → voxels
}

func (f phantomFit) medianAngle() float64 { return f.angles[len(f.angles)/2] }

// fitPhantom runs `prism dmri fit` on the phantom with the network flags
// net (e.g. --model b3s) into dir and summarises dyads1 and nfibres_prob.
func fitPhantom(t *testing.T, ph phantom, dir string, net ...string) phantomFit {
	t.Helper()
	args := append([]string{"dmri", "fit", "--dwi", ph.dwi, "--bval", ph.bval, "--bvec", ph.bvec, "--mask", ph.mask, "--out", dir, "--quiet", "--ess-samples", "4"}, net...)
	code, _, errs := prism(args...)
	if code != 0 {
		t.Fatalf("dmri fit %v: exit %d: %s", net, code, errs)
	}
	read := func(name string) *nifti.Volume {
		v, err := nifti.Read(filepath.Join(dir, name+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dyads, nfib := read("dyads1"), read("nfibres_prob")
	nv := len(ph.truth)
	fit := phantomFit{meanProb: map[int][4]float64{}, right: map[int]int{}, voxels: map[int]int{}}
	for i, tr := range ph.truth {
		count := len(tr.f)
		var p [4]float64
		best := 0
		for k := range 4 {
			p[k] = float64(nfib.Data[i+k*nv])
			if p[k] > p[best] {
				best = k
			}
		}
		mp := fit.meanProb[count]
		for k := range 4 {
			mp[k] += p[k]
		}
		fit.meanProb[count] = mp
		fit.voxels[count]++
		if best == count {
			fit.right[count]++
		}
		if count == 0 {
			continue
		}
		got := [3]float64{float64(dyads.Data[i]), float64(dyads.Data[i+nv]), float64(dyads.Data[i+2*nv])}
		worst := 90.0
		for _, n := range tr.dir {
			c := math.Abs(got[0]*n[0] + got[1]*n[1] + got[2]*n[2])
			worst = math.Min(worst, math.Acos(math.Min(c, 1))*180/math.Pi)
		}
		fit.angles = append(fit.angles, worst)
	}
	for count, mp := range fit.meanProb {
		for k := range mp {
			mp[k] /= float64(fit.voxels[count])
		}
		fit.meanProb[count] = mp
	}
	slices.Sort(fit.angles)
	a := fit.angles
	t.Logf("%v: dyads1 median angle to the nearest true stick %.1f° (quartiles %.1f°, %.1f°) over %d voxels", net, fit.medianAngle(), a[len(a)/4], a[3*len(a)/4], len(a))
	for count := 0; count <= 2; count++ {
		t.Logf("%v: %d sticks: mean nfibres_prob %.2f, most probable count right in %d of %d voxels", net, count, fit.meanProb[count], fit.right[count], fit.voxels[count])
	}
	return fit
}

// TestDMRIPhantom is the synthetic phantom of issue 7 (writePhantom),
// fitted through the CLI with both shipped dMRI networks at the default
// λ = 0.3. For each, the recovered dyads1 must lie within 10° (median over
// voxels with sticks) of the nearest true stick.
//
// The paper's b3s network detects presence (stick voxels get P(0 sticks) ≤
// 0.05, ball-only voxels at least 0.2) but does not count sticks at this
// diffusivity: its prior puts 65 % of simulations at d > 3.5e−3 mm²/s and
// rarely has two large sticks (docs/validation.md, "fibre counts").
// b3s-brain (in-vivo priors, docs/families/dmri.md) must satisfy the
// issue's criterion, nfibres_prob concentrating on the true count: for
// ball-only, one-stick and two-stick voxels alike, a mean probability of
// at least phantomMinProb on the true count and the most probable count
// right in at least phantomMinRight of the voxels (the shipped network:
// 0.91, 0.85 and 0.76, and 64 of 64).
//
// PRISM_PHANTOM_CHECKPOINT=DIR fits with that checkpoint instead of the
// embedded b3s-brain (to follow a training run).
func TestDMRIPhantom(t *testing.T) {
	if testing.Short() {
		t.Skip("fits 64 voxels with each of the embedded b3s and b3s-brain networks")
	}
	dir := t.TempDir()
	ph := writePhantom(t, dir)

	paper := fitPhantom(t, ph, filepath.Join(dir, "fit-b3s"), "--model", "b3s")
	if med := paper.medianAngle(); med > 10 {
		t.Errorf("b3s: dyads1 median angle %.1f° > 10°", med)
	}
	for count := 0; count <= 2; count++ {
		mp := paper.meanProb[count]
		switch {
		case count == 0 && mp[0] < 0.2:
			t.Errorf("b3s: ball-only voxels: mean P(0 sticks) %.2f < 0.2", mp[0])
		case count > 0 && mp[0] > 0.05:
			t.Errorf("b3s: %d-stick voxels: mean P(0 sticks) %.2f > 0.05", count, mp[0])
		}
	}

	net := []string{"--model", "b3s-brain"}
	if ck := os.Getenv("PRISM_PHANTOM_CHECKPOINT"); ck != "" {
		net = []string{"--checkpoint", ck}
	}
	brain := fitPhantom(t, ph, filepath.Join(dir, "fit-brain"), net...)
	if med := brain.medianAngle(); med > 10 {
		t.Errorf("%v: dyads1 median angle %.1f° > 10°", net, med)
	}
	for count := 0; count <= 2; count++ {
		if p := brain.meanProb[count][count]; p < phantomMinProb {
			t.Errorf("%v: %d-stick voxels: mean nfibres_prob of the true count %.2f < %.2f", net, count, p, phantomMinProb)
		}
		if r, n := brain.right[count], brain.voxels[count]; float64(r) < phantomMinRight*float64(n) {
			t.Errorf("%v: %d-stick voxels: most probable count right in %d of %d (< %.0f %%)", net, count, r, n, 100*phantomMinRight)
		}
	}
}

// The fibre-count criterion of TestDMRIPhantom. "Concentrates" is read as
// most of the mass on the true count (0.7; the mask prior at λ = 0.3
// gives at most 0.48 to any count) and the right answer as the most probable one
// in 90 % of voxels. The fit is deterministic; the margin to the shipped
// network's 0.76 (two sticks, the lowest) covers the float rounding of
// other CPUs, which moves these probabilities by ~1e−3.
const (
	phantomMinProb  = 0.7
	phantomMinRight = 0.9
)
