package dmrifit

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dti"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/posterior"
)

// TestPhantomTensorVoxels: a noise-free (SNR 10⁹) tensor-only phantom voxel
// is recovered by the independent tensor fit of package dti: its
// eigenvalues lie in the phantom's ranges (1.4–2, 0.5–0.9, 0.2–0.4)·10⁻³
// mm²/s (up to 10⁻⁹ of rounding and noise), and b0 volumes normalise to 1.
func TestPhantomTensorVoxels(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(7, 7)))
	x, err := PhantomVoxels("Tensor", d, 20, 1e9, 3)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dti.NewFitter(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := f.NewWorkspace()
	lo := [3]float64{1.4e-3, 0.5e-3, 0.2e-3}
	hi := [3]float64{2e-3, 0.9e-3, 0.4e-3}
	for v := range 20 {
		s := x[v*d.N : (v+1)*d.N]
		if math.Abs(s[0]-1) > 1e-6 || math.Abs(s[1]-1) > 1e-6 {
			t.Errorf("voxel %d: b0 signals %v %v, want 1", v, s[0], s[1])
		}
		fit, err := f.FitVoxel(s, ws)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			if fit.L[k] < lo[k]-1e-9 || fit.L[k] > hi[k]+1e-9 {
				t.Errorf("voxel %d: eigenvalue %d = %g outside [%g, %g]", v, k, fit.L[k], lo[k], hi[k])
			}
		}
	}
}

// TestPhantomNoise: at SNR 40 the b0-normalised diffusion-weighted signal
// of ball+stick voxels scatters around the noise-free one with standard
// deviation ≈ 1/40 (Rician ≈ Gaussian at these signal levels; the
// normalisation by the mean of two noisy b0s adds ≈ 1/(40√2) relative);
// the estimate from 50 voxels × 40 volumes is within 20 % of
// √(σ²·s̄² + σ²) bounds [0.02, 0.04].
func TestPhantomNoise(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(8, 8)))
	clean, err := PhantomVoxels("Ball+Stick", d, 50, 1e9, 5)
	if err != nil {
		t.Fatal(err)
	}
	noisy, err := PhantomVoxels("Ball+Stick", d, 50, 40, 5)
	if err != nil {
		t.Fatal(err)
	}
	var ss float64
	var n int
	for v := range 50 {
		for j := 2; j < d.N; j++ {
			e := noisy[v*d.N+j] - clean[v*d.N+j]
			ss += e * e
			n++
		}
	}
	if sd := math.Sqrt(ss / float64(n)); sd < 0.02 || sd > 0.04 {
		t.Errorf("noise SD %v at SNR 40, want ≈ 0.025–0.03", sd)
	}
	if _, err := PhantomVoxels("Stick", d, 1, 40, 1); err == nil || !strings.Contains(err.Error(), "unknown phantom class") {
		t.Errorf("unknown class: %v", err)
	}
}

// TestSelectionPhantomCounts runs the classification with an untrained
// bszt network: fractions in [0, 1], predictions counted once per voxel;
// a family without zeppelins and tensors (b3s) is refused.
func TestSelectionPhantomCounts(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(9, 9)))
	net := smallBSZT(t)
	res, err := SelectionPhantom(posterior.New(net), d, 6, 40, 0.3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d classes", len(res))
	}
	for _, r := range res {
		total := 0
		for _, k := range r.Predicted {
			total += k
		}
		if total != 6 || r.Right < 0 || r.Right > 1 || r.RightAmong < 0 || r.RightAmong > 1 || !(r.MeanProb >= 0 && r.MeanProb <= 1) {
			t.Errorf("%+v", r)
		}
	}
	if _, err := SelectionPhantom(randomB3S(t), d, 2, 40, 0.3, 1, nil); err == nil || !strings.Contains(err.Error(), "phantom class") {
		t.Errorf("b3s: %v", err)
	}
}

// TestSelectionPhantomSampled: the sampled phantom (bszt-conv's path),
// forced on a perturbed bszt network, against the listed phantom's exact
// signature probabilities with the same network: per class, the mean
// probability of the true signature over n voxels is a mean of n
// independent frequencies over ModelDraws draws, so its standard error is
// at most √(1/4 / (ModelDraws·n)); allowed 4 of them plus 2e−3 for float32
// sums (the listed probabilities are float64 of float32 log q). Counts
// sum to n.
func TestSelectionPhantomSampled(t *testing.T) {
	const n, lambda, seed = 6, 0.6, 3
	d := synthDesign(rand.New(rand.NewPCG(9, 9)))
	net := smallBSZT(t)
	perturb(net, 3)
	post := posterior.New(net)
	exact, err := SelectionPhantom(post, d, n, 40, lambda, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultFitSettings()
	s.Correct, s.Lambda, s.Seed, s.Samples, s.Steps = "none", lambda, seed, ModelDraws, 2
	ft, err := NewSelectFitter(post, s)
	if err != nil {
		t.Fatal(err)
	}
	ft.sampled, ft.Models, ft.masks = true, nil, nil
	sampled, err := phantomResults(d, n, 40, seed, ft.sampledPhantomClass)
	if err != nil {
		t.Fatal(err)
	}
	tol := 4*math.Sqrt(0.25/float64(ModelDraws*n)) + 2e-3
	for i, r := range sampled {
		total := 0
		for _, k := range r.Predicted {
			total += k
		}
		if r.Class != exact[i].Class || total != n {
			t.Errorf("class %s: %d predictions, want %d", r.Class, total, n)
		}
		if math.Abs(r.MeanProb-exact[i].MeanProb) > tol {
			t.Errorf("class %s: mean probability of the true class %.4f sampled, %.4f exact (tolerance %.3f)", r.Class, r.MeanProb, exact[i].MeanProb, tol)
		}
	}
}

// TestSelectionPhantomBSZTConv: the phantom classifies with a bszt-conv
// network (21 components, no model list); the sampled phantom with a
// correction (forced on bszt: an untrained bszt-conv network's draws
// reach Bingham classes, whose Laplace starts take minutes) counts every
// voxel once and reports the corrected classes; hasSignature accepts
// exactly the signatures the classes can form.
func TestSelectionPhantomBSZTConv(t *testing.T) {
	d := synthDesign(rand.New(rand.NewPCG(9, 9)))
	conv := posterior.New(smallNet(t, "bszt-conv", fdmri.BSZTConv()))
	check := func(what string, res []PhantomResult, corrected bool) {
		t.Helper()
		for _, r := range res {
			total := 0
			for _, k := range r.Predicted {
				total += k
			}
			if total != r.N || !(r.MeanProb >= 0 && r.MeanProb <= 1+1e-9) || corrected != (r.CorrectClasses > 0) {
				t.Errorf("%s: %+v", what, r)
			}
		}
	}
	res, err := SelectionPhantom(conv, d, 2, 40, 0.3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("bszt-conv", res, false)

	net := smallBSZT(t)
	perturb(net, 3)
	s := DefaultFitSettings()
	s.Correct, s.CorrectParticles, s.Lambda, s.Seed, s.Samples, s.Steps = "smc", 8, 0.3, 1, ModelDraws, 2
	ft, err := NewSelectFitter(posterior.New(net), s)
	if err != nil {
		t.Fatal(err)
	}
	ft.sampled, ft.Models, ft.masks = true, nil, nil
	if res, err = phantomResults(d, 1, 40, 1, ft.sampledPhantomClass); err != nil {
		t.Fatal(err)
	}
	check("bszt sampled, corrected", res, true)

	classes := ComponentClasses(fdmri.BSZT())
	for sig, want := range map[string]bool{"Ball+2Stick": true, "3Tensor": true, "4Stick": false, "Ball+Dot": false} {
		if hasSignature(classes, sig) != want {
			t.Errorf("hasSignature(bszt, %s) = %v, want %v", sig, !want, want)
		}
	}
}
