package family

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat/distuv"
)

// allMasks calls fn with every mask of length C (bit k of the index is
// component k).
func allMasks(C int, fn func(idx int, mask []bool)) {
	mask := make([]bool, C)
	for idx := 0; idx < 1<<C; idx++ {
		for k := range mask {
			mask[k] = idx>>k&1 == 1
		}
		fn(idx, mask)
	}
}

// validNoise reports whether exactly one of the noise components is on.
func validNoise(mask []bool, base int) bool {
	return ActiveCount(mask[base:]) == 1
}

type priorCase struct {
	name  string
	prior MaskPrior
	C     int
	base  int
	minOn int
}

func priorCases() []priorCase {
	return []priorCase{
		{"bernoulli", BernoulliPrior{NumBase: 4, NumNoise: 2}, 6, 4, 0},
		{"bernoulli-b3s", BernoulliPrior{NumBase: 4, NumNoise: 1, MinActive: 1}, 5, 4, 1},
		{"bernoulli-min2", BernoulliPrior{NumBase: 5, NumNoise: 3, MinActive: 2}, 8, 5, 2},
		{"dim-penalised", DimPenalisedPrior{Dims: []int{1, 3, 0, 2}, NumNoise: 2, LambdaMax: 0.5}, 6, 4, 0},
		{"dim-penalised-paper", DimPenalisedPrior{Dims: []int{1, 3, 3, 4}, NumNoise: 2}, 6, 4, 0},
	}
}

func TestMaskPriorNormalisedAndSupport(t *testing.T) {
	for _, c := range priorCases() {
		for _, lambda := range []float64{0, 0.13, 0.5, 0.91, 1} {
			var probs []float64
			allMasks(c.C, func(_ int, mask []bool) {
				lp := c.prior.LogProb(mask, lambda)
				possible := validNoise(mask, c.base) && ActiveCount(mask[:c.base]) >= c.minOn
				if !possible && !math.IsInf(lp, -1) {
					t.Errorf("%s λ=%g: impossible mask %s has log-prob %g", c.name, lambda, MaskString(mask), lp)
				}
				if possible && (math.IsInf(lp, 0) || math.IsNaN(lp)) {
					t.Errorf("%s λ=%g: possible mask %s has log-prob %g", c.name, lambda, MaskString(mask), lp)
				}
				probs = append(probs, math.Exp(lp))
			})
			// Σ over at most 256 masks of terms ≤ 1: rounding ≲ 256 ulp.
			if s := floats.Sum(probs); math.Abs(s-1) > 1e-13 {
				t.Errorf("%s λ=%g: probabilities sum to %.16g", c.name, lambda, s)
			}
		}
	}
}

// TestMaskPriorChiSquare compares sample frequencies with exp(LogProb) over
// the whole mask space by Pearson's χ² test. Cells with expected count < 5
// are pooled so the χ² approximation holds; the critical value is the 0.999
// quantile, so a correct sampler fails a fixed-seed run with probability
// 1/1000.
func TestMaskPriorChiSquare(t *testing.T) {
	const n = 200000
	for ci, c := range priorCases() {
		for li, lambda := range []float64{0.2, 0.5, 0.8} {
			r := rand.New(rand.NewPCG(uint64(ci), uint64(li)))
			counts := make([]float64, 1<<c.C)
			mask := make([]bool, c.C)
			for s := 0; s < n; s++ {
				c.prior.Sample(r, lambda, mask)
				idx := 0
				for k, on := range mask {
					if on {
						idx |= 1 << k
					}
				}
				counts[idx]++
			}
			chi2, df := 0.0, -1
			var poolObs, poolExp float64
			allMasks(c.C, func(idx int, m []bool) {
				e := n * math.Exp(c.prior.LogProb(m, lambda))
				if e == 0 {
					if counts[idx] != 0 {
						t.Errorf("%s λ=%g: sampled impossible mask %s", c.name, lambda, MaskString(m))
					}
					return
				}
				if e < 5 {
					poolObs += counts[idx]
					poolExp += e
					return
				}
				chi2 += (counts[idx] - e) * (counts[idx] - e) / e
				df++
			})
			if poolExp > 0 {
				chi2 += (poolObs - poolExp) * (poolObs - poolExp) / poolExp
				df++
			}
			crit := distuv.ChiSquared{K: float64(df)}.Quantile(0.999)
			if chi2 > crit {
				t.Errorf("%s λ=%g: χ² = %.1f > %.1f (df %d)", c.name, lambda, chi2, crit, df)
			}
		}
	}
}

// TestB3SPriorMatchesReferenceFormula checks the closed form of the
// min-active prior against the reference code's definition: logsumexp over the forced index f of Σ_{k≠f} log Bern(M_k; λ),
// minus log K, −Inf when M_f is off.
func TestB3SPriorMatchesReferenceFormula(t *testing.T) {
	p := BernoulliPrior{NumBase: 4, NumNoise: 1, MinActive: 1}
	for _, lambda := range []float64{1e-9, 0.3, 0.77, 1} {
		l := clipLambda(lambda)
		allMasks(5, func(_ int, mask []bool) {
			if !mask[4] {
				return
			}
			terms := []float64{}
			for f := 0; f < 4; f++ {
				if !mask[f] {
					continue
				}
				s := 0.0
				for k := 0; k < 4; k++ {
					if k == f {
						continue
					}
					if mask[k] {
						s += math.Log(l)
					} else {
						s += math.Log(1 - l)
					}
				}
				terms = append(terms, s)
			}
			want := math.Inf(-1)
			if len(terms) > 0 {
				want = floats.LogSumExp(terms) - math.Log(4)
			}
			got := p.LogProb(mask, lambda)
			if math.IsInf(want, -1) != math.IsInf(got, -1) || (!math.IsInf(want, -1) && math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want))) {
				t.Errorf("λ=%g mask %s: log-prob %g, reference formula %g", lambda, MaskString(mask), got, want)
			}
		})
	}
}

func TestDimPenalisedPaperFormula(t *testing.T) {
	p := DimPenalisedPrior{Dims: []int{1, 3, 0}, NumNoise: 2}
	// λ = 1: no penalty, p_k = p0 = 0.5 for every component.
	for k := range p.Dims {
		if got := p.Prob(k, 1); math.Abs(got-0.5) > 1e-15 {
			t.Errorf("p_%d(λ=1) = %g, want 0.5", k, got)
		}
	}
	// λ = 0.25, dim 3: logit p = 0 − 0.75·4·3 = −9.
	if got, want := p.Prob(1, 0.25), 1/(1+math.Exp(9)); math.Abs(got-want) > 1e-16 {
		t.Errorf("p_1(0.25) = %g, want %g", got, want)
	}
	// A zero-dimensional component is never penalised.
	if got := p.Prob(2, 0); got != 0.5 {
		t.Errorf("p_2(0) = %g, want 0.5", got)
	}
	// log p(M) for M = (1,0,1 | 0,1) at λ = 0.25 by hand.
	want := math.Log(1/(1+math.Exp(3))) + math.Log(1-1/(1+math.Exp(9))) + math.Log(0.5) + math.Log(0.5)
	if got := p.LogProb([]bool{true, false, true, false, true}, 0.25); math.Abs(got-want) > 1e-14 {
		t.Errorf("LogProb = %g, want %g", got, want)
	}
}

func TestMaskPriorSampleDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	mask := make([]bool, 8)
	for _, c := range priorCases() {
		allocs := testing.AllocsPerRun(100, func() {
			c.prior.Sample(r, 0.4, mask[:c.C])
			c.prior.LogProb(mask[:c.C], 0.4)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Sample+LogProb", c.name, allocs)
		}
	}
}

// TestMaskPriorTable: every prior's table (BernoulliPrior's closed form,
// the generic fallback for the others) must reproduce LogProb on the whole
// mask space at interior and clipped λ, −Inf included (float64 sums of
// three terms of order 10: tolerance 1e-12 relative).
func TestMaskPriorTable(t *testing.T) {
	for _, c := range priorCases() {
		var masks [][]bool
		allMasks(c.C, func(_ int, mask []bool) { masks = append(masks, append([]bool(nil), mask...)) })
		table := NewMaskPriorTable(c.prior, masks)
		dst := make([]float64, len(masks))
		for _, lambda := range []float64{0, 1e-9, 0.13, 0.5, 0.91, 1} {
			table.LogProbs(lambda, dst)
			for j, m := range masks {
				want := c.prior.LogProb(m, lambda)
				if math.IsInf(want, -1) != math.IsInf(dst[j], -1) || (!math.IsInf(want, -1) && math.Abs(dst[j]-want) > 1e-12*math.Max(1, math.Abs(want))) {
					t.Fatalf("%s λ=%g mask %s: table %v, LogProb %v", c.name, lambda, MaskString(m), dst[j], want)
				}
			}
		}
	}
}
