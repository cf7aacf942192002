package dmrifit

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dti"
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
