package network

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

func strataConfig(f family.Family) Config {
	c := tinyConfig(f)
	c.LambdaStrata = 4
	return c
}

// TestLambdaCDFBeta: for lingauss's prior (Bernoulli(λ) on six
// components, the noise term always on) p(λ | M) is Beta(k+1, 7−k) for a
// mask with k components. The tabulated CDF (midpoint density on 256
// cells) must match the regularised incomplete beta function; the
// midpoint rule's error per cell is h³f”/24 and accumulates to
// ≲ h²·max|f'|/8 ≈ 5·10⁻⁵ for these densities (|f'| ≤ 25), so 2·10⁻⁴.
// invertCDF must invert it to 10⁻⁹.
func TestLambdaCDFBeta(t *testing.T) {
	f := lookup(t, "lingauss-k6")
	cdf := make([]float64, strataGrid+1)
	for k := 0; k <= 6; k++ {
		m := make([]bool, 7)
		for i := range k {
			m[i] = true
		}
		m[6] = true
		if err := lambdaCDF(f.MaskPrior(), family.LambdaDist{}, m, cdf); err != nil {
			t.Fatal(err)
		}
		for _, l := range []float64{0.01, 0.1, 0.33, 0.5, 0.77, 0.95} {
			want := mathext.RegIncBeta(float64(k+1), float64(7-k), l)
			if got := evalCDF(cdf, l); math.Abs(got-want) > 2e-4 {
				t.Errorf("k = %d: F(%v) = %v, Beta CDF %v", k, l, got, want)
			}
			if back := invertCDF(cdf, evalCDF(cdf, l)); math.Abs(back-l) > 1e-9 {
				t.Errorf("k = %d: F⁻¹(F(%v)) = %v", k, l, back)
			}
		}
	}
}

// TestLambdaStrataLoss: the batch holds J = 4 strata per sample, spaced
// 1/J apart in F(λ | M), one of them the sample's own λ; and the strata
// loss equals the mean over j of the ordinary loss with every sample's λ
// replaced by its j-th stratum (float32 forward passes of O(10) losses:
// 10⁻⁵ relative).
func TestLambdaStrataLoss(t *testing.T) {
	n := newNet(t, "lingauss-k6", strataConfig, 60)
	perturbParams(n, 0.3, 61)
	s := simulate(n.fam, 62, 0, 6)
	var b Batch
	if err := n.MakeBatch(s, 63, &b); err != nil {
		t.Fatal(err)
	}
	const J = 4
	if len(b.SLambda) != J*len(s) {
		t.Fatalf("%d strata rows for %d samples", len(b.SLambda), len(s))
	}
	cdf := make([]float64, strataGrid+1)
	for i := range s {
		if err := lambdaCDF(n.fam.MaskPrior(), n.trainLambda, s[i].Mask, cdf); err != nil {
			t.Fatal(err)
		}
		own := false
		for j := range J {
			l := float64(b.SLambda[i*J+j])
			own = own || math.Abs(l-s[i].Lambda) < 1e-6
			if j > 0 {
				if d := evalCDF(cdf, l) - evalCDF(cdf, float64(b.SLambda[i*J+j-1])); math.Abs(d-1.0/J) > 1e-5 {
					t.Errorf("sample %d: strata %d and %d are %v apart in F, want %v", i, j-1, j, d, 1.0/J)
				}
			}
		}
		if !own {
			t.Errorf("sample %d: own λ %v not among the strata %v", i, s[i].Lambda, b.SLambda[i*J:(i+1)*J])
		}
	}
	g := engine.NewGraph()
	_, ml, pl := n.Loss(g, &b)
	plain := newNet(t, "lingauss-k6", tinyConfig, 60)
	perturbParams(plain, 0.3, 61)
	want := 0.0
	for j := range J {
		var bj Batch
		if err := plain.MakeBatch(s, 63, &bj); err != nil {
			t.Fatal(err)
		}
		for i := range s {
			bj.Lambda[i] = b.SLambda[i*J+j]
		}
		g.Reset()
		_, mj, pj := plain.Loss(g, &bj)
		if math.Abs(pj-pl) > 1e-5*math.Abs(pl) {
			t.Errorf("θ loss %v with strata, %v without", pl, pj)
		}
		want += mj / J
	}
	if math.Abs(ml-want) > 1e-5*want {
		t.Errorf("strata mask loss %v, mean of the per-stratum losses %v", ml, want)
	}
}

// TestLambdaCDFRho: with ρ = (1−m)·U(0, 1) + m·Beta(p, 1) the tabulated
// CDF of p(λ | M) ∝ ρ(λ)·λ^k (1−λ)^{6−k} must match the mixture of
// regularised incomplete beta functions
// F(l) = [(1−m)B₁·I_l(k+1, 7−k) + m·p·B_p·I_l(k+p, 7−k)] / [(1−m)B₁ + m·p·B_p]
// with B₁ = B(k+1, 7−k), B_p = B(k+p, 7−k). Tolerance as in
// TestLambdaCDFBeta, doubled: ρ's factor λ^{p−1} steepens the densities
// (|f'| ≲ 45 for p = 3).
func TestLambdaCDFRho(t *testing.T) {
	f := lookup(t, "lingauss-k6")
	const m, p = 0.75, 3.0
	rho := family.LambdaDist{Mix: m, Power: p}
	cdf := make([]float64, strataGrid+1)
	for k := 0; k <= 6; k++ {
		mask := make([]bool, 7)
		for i := range k {
			mask[i] = true
		}
		mask[6] = true
		if err := lambdaCDF(f.MaskPrior(), rho, mask, cdf); err != nil {
			t.Fatal(err)
		}
		kf := float64(k)
		b1 := math.Exp(mathext.Lbeta(kf+1, 7-kf))
		bp := math.Exp(mathext.Lbeta(kf+p, 7-kf))
		for _, l := range []float64{0.01, 0.1, 0.33, 0.5, 0.77, 0.95} {
			want := ((1-m)*b1*mathext.RegIncBeta(kf+1, 7-kf, l) + m*p*bp*mathext.RegIncBeta(kf+p, 7-kf, l)) / ((1-m)*b1 + m*p*bp)
			if got := evalCDF(cdf, l); math.Abs(got-want) > 4e-4 {
				t.Errorf("k = %d: F(%v) = %v, want %v", k, l, got, want)
			}
		}
	}
}
