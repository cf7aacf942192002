package spec

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
)

// TestLingaussSpecSameSimulations: the spec re-creating lingauss-k6 draws
// the same λ, masks and θ and gives bit-identical observations for the
// same seed (the expressions perform the same floating-point operations in
// the same order as the built-in family).
func TestLingaussSpecSameSimulations(t *testing.T) {
	sf, err := Load("../../examples/lingauss-k6/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lf := lingauss.New()
	const n = 300
	a, b := make([]family.Sample, n), make([]family.Sample, n)
	for _, seed := range []uint64{1, 42} {
		family.SimulateBatch(lf, family.SimOptions{Seed: seed, Lambda: math.NaN()}, 0, a)
		family.SimulateBatch(sf, family.SimOptions{Seed: seed, Lambda: math.NaN()}, 0, b)
		for i := range a {
			if a[i].Lambda != b[i].Lambda || family.MaskString(a[i].Mask) != family.MaskString(b[i].Mask) {
				t.Fatalf("seed %d sample %d: λ/mask %v %s vs %v %s", seed, i, a[i].Lambda, family.MaskString(a[i].Mask), b[i].Lambda, family.MaskString(b[i].Mask))
			}
			for j := range a[i].X {
				if a[i].X[j] != b[i].X[j] || a[i].Theta[j%6] != b[i].Theta[j%6] {
					t.Fatalf("seed %d sample %d value %d: built-in %v, spec %v", seed, i, j, a[i].X[j], b[i].X[j])
				}
			}
		}
	}
	// The likelihoods agree too (same formula; rounding may differ in the
	// last bits, so a relative 1e-12).
	for i := range a[:20] {
		la := lf.LogLikelihood(a[i].Design, a[i].X, a[i].Theta, a[i].Mask, nil)
		lb := sf.LogLikelihood(b[i].Design, b[i].X, b[i].Theta, b[i].Mask, nil)
		if math.Abs(la-lb) > 1e-12*math.Abs(la) {
			t.Errorf("sample %d: log-likelihood built-in %v, spec %v", i, la, lb)
		}
	}
	if got, want := family.ModelSpaceSize(sf).String(), family.ModelSpaceSize(lf).String(); got != want {
		t.Errorf("model space %s, want %s", got, want)
	}
}
