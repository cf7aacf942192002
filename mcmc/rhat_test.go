package mcmc

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSplitRhatHandExample checks the BDA3 formula on chains small enough
// to do by hand: (1,2,3,4) and (2,3,4,5) split into (1,2), (3,4), (2,3),
// (4,5); W = 0.5, B = 2·var(1.5, 3.5, 2.5, 4.5) = 10/3, so
// R̂² = (½·0.5 + (10/3)/2)/0.5 = 23/6.
func TestSplitRhatHandExample(t *testing.T) {
	got := SplitRhat([][]float64{{1, 2, 3, 4}, {2, 3, 4, 5}})
	want := math.Sqrt(23.0 / 6)
	if math.Abs(got-want) > 1e-14 {
		t.Fatalf("SplitRhat = %.16g, want √(23/6) = %.16g", got, want)
	}
	// An odd chain drops its middle draw: (1,2,9,3,4) is (1,2),(3,4).
	if got := SplitRhat([][]float64{{1, 2, 9, 3, 4}, {2, 3, -7, 4, 5}}); math.Abs(got-want) > 1e-14 {
		t.Fatalf("odd length: SplitRhat = %.16g, want %.16g", got, want)
	}
	if !math.IsNaN(SplitRhat([][]float64{{1, 2, 3}})) || !math.IsNaN(SplitRhat([][]float64{{1, 1, 1, 1}})) {
		t.Fatal("too short or constant chains must give NaN")
	}
}

// iidChains returns m chains of n draws from transform(N(0,1)).
func iidChains(seed uint64, m, n int, transform func(k, i int, z float64) float64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	c := make([][]float64, m)
	for k := range c {
		c[k] = make([]float64, n)
		for i := range c[k] {
			c[k][i] = transform(k, i, r.NormFloat64())
		}
	}
	return c
}

// TestRhatIID: for m = 4 chains of 2000 i.i.d. draws (8 half-chains of
// n = 1000), R̂² = 1 + (B/W − 1)/n with B/W ~ F(7, 7992) ≈ χ²₇/7, whose
// 0.1 % and 99.9 % quantiles are 0.085 and 3.47. So R̂ − 1 lies in
// [−0.00046, +0.0012] with probability 0.998; the bounds below are those.
// The rank-normalised draws are again i.i.d. normal, so the same holds
// for bulk and tail R̂.
func TestRhatIID(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		ch := iidChains(seed, 4, 2000, func(_, _ int, z float64) float64 { return z })
		for name, r := range map[string]float64{"split": SplitRhat(ch), "rank": RankRhat(ch)} {
			if !(r > 1-0.00046 && r < 1+0.0012) {
				t.Errorf("seed %d: %s R̂ = %.6f for i.i.d. chains, want within [0.99954, 1.0012]", seed, name, r)
			}
		}
	}
}

// TestRhatNonStationary: chains that drift, sit at different levels, or
// differ only in scale must be flagged (R̂ well above 1.05). The expected
// values follow from R̂² ≈ 1 + B/(nW) with the populations' moments:
// a drift of 2 over the chain gives half-chain means 0.5 and 1.5 and
// R̂ ≈ 1.12; one chain of four shifted by 1 gives R̂ ≈ 1.10; neither is
// within 0.02 of 1 by chance (TestRhatIID: |R̂ − 1| < 0.0012).
func TestRhatNonStationary(t *testing.T) {
	const n = 2000
	drift := iidChains(4, 4, n, func(_, i int, z float64) float64 { return z + 2*float64(i)/n })
	shift := iidChains(5, 4, n, func(k, _ int, z float64) float64 {
		if k == 3 {
			return z + 1
		}
		return z
	})
	for name, ch := range map[string][][]float64{"drift": drift, "shift": shift} {
		if r := SplitRhat(ch); !(r > 1.08 && r < 1.16) {
			t.Errorf("%s: SplitRhat = %.4f, want ≈ 1.10–1.12", name, r)
		}
		if r := RankRhat(ch); !(r > 1.05) {
			t.Errorf("%s: RankRhat = %.4f, want > 1.05", name, r)
		}
	}
	// Same mean, one chain three times wider: the means agree (split R̂
	// stays near 1) but the folded draws |x − median| do not.
	scale := iidChains(6, 4, n, func(k, _ int, z float64) float64 {
		if k == 3 {
			return 3 * z
		}
		return z
	})
	if r := SplitRhat(scale); r > 1.01 {
		t.Errorf("scale: SplitRhat = %.4f, want ≈ 1 (equal means)", r)
	}
	if r := RankRhat(scale); !(r > 1.05) {
		t.Errorf("scale: RankRhat = %.4f, want > 1.05 (tail R̂ sees the scale)", r)
	}
}

// TestRankRhatMonotoneInvariance: rank normalisation makes the bulk R̂
// invariant under a strictly increasing transformation (here exp(3x)),
// exactly. (The tail R̂ folds around the median and is not invariant.)
func TestRankRhatMonotoneInvariance(t *testing.T) {
	ch := iidChains(8, 4, 500, func(k, i int, z float64) float64 { return z + 0.3*float64(k) })
	ex := make([][]float64, len(ch))
	for k := range ch {
		ex[k] = make([]float64, len(ch[k]))
		for i, x := range ch[k] {
			ex[k][i] = math.Exp(3 * x)
		}
	}
	a, b := SplitRhat(rankNormalise(ch)), SplitRhat(rankNormalise(ex))
	if math.Abs(a-b) > 1e-12 || a < 1.05 {
		t.Fatalf("bulk R̂ %.15f before and %.15f after exp (want equal, and > 1.05 for chains shifted by 0.3 sd)", a, b)
	}
}
