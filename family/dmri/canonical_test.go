package dmri

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
)

// TestCanonicalizeKeepsLikelihood checks Canonicalize on b3s-brain-sorted
// against the definition: after it, the active sticks come first with
// non-increasing fractions, the multiset of (fraction, direction) pairs and
// the shared and noise parameters are unchanged, and so is the noiseless
// signal (compared at 1e-9: the fraction latents are recomputed through
// the incomplete beta function, whose inversion is accurate to ~1e-12).
func TestCanonicalizeKeepsLikelihood(t *testing.T) {
	f := B3SBrainSorted()
	d := UKBDesign()
	r := rand.New(rand.NewPCG(5, 6))
	inner := b3sSpec().MaskPrior
	sticks := f.stickSlots()
	sorted := 0
	for it := 0; it < 300; it++ {
		mask := make([]bool, len(f.Components()))
		inner.Sample(r, r.Float64(), mask) // unpacked masks, as the raw prior draws them
		theta := make([]float64, f.Layout().DMax)
		for j := range theta {
			theta[j] = r.NormFloat64()
		}
		before := make([]float64, d.N)
		f.Forward(d, theta, mask, before)
		nb := f.Natural(theta, mask)
		m2 := append([]bool(nil), mask...)
		th2 := append([]float64(nil), theta...)
		f.Canonicalize(th2, m2)
		after := make([]float64, d.N)
		f.Forward(d, th2, m2, after)
		for j := range before {
			if math.Abs(before[j]-after[j]) > 1e-9 {
				t.Fatalf("draw %d: signal %d changed from %v to %v (mask %v → %v)", it, j, before[j], after[j], mask, m2)
			}
		}
		na := f.Natural(th2, m2)
		n, prev := 0, math.Inf(1)
		for i, k := range sticks {
			if !m2[k] {
				continue
			}
			if i != n {
				t.Fatalf("draw %d: mask %v not packed", it, m2)
			}
			n++
			if fr := na.Fractions[k]; fr > prev+1e-12 {
				t.Fatalf("draw %d: fractions %v not decreasing", it, na.Fractions)
			} else {
				prev = fr
			}
		}
		nbefore := 0
		for _, k := range sticks {
			if mask[k] {
				nbefore++
			}
		}
		if n != nbefore || m2[0] != mask[0] || math.Abs(na.Fractions[0]-nb.Fractions[0]) > 1e-9 ||
			na.Shared["d"] != nb.Shared["d"] || na.Shared["d_std"] != nb.Shared["d_std"] {
			t.Fatalf("draw %d: ball, shared parameters or stick count changed: %+v → %+v", it, nb, na)
		}
		if n >= 2 {
			sorted++
		}
	}
	if sorted < 50 {
		t.Fatalf("only %d of 300 draws had two or more sticks", sorted)
	}
}

// TestSortedPriorNormalised checks SortedPrior against its definition: its
// probabilities sum to 1 over all masks (to rounding), unpacked masks get
// none, and a Monte Carlo frequency of each packed mask under Sample lies
// within 5 standard errors of exp(LogProb).
func TestSortedPriorNormalised(t *testing.T) {
	f := B3SBrainSorted()
	p := f.MaskPrior()
	C := len(f.Components())
	for _, lambda := range []float64{0.1, 0.3, 0.8} {
		total := 0.0
		probs := map[string]float64{}
		for bits := 0; bits < 1<<C; bits++ {
			m := make([]bool, C)
			for k := range C {
				m[k] = bits&(1<<k) != 0
			}
			if lp := p.LogProb(m, lambda); !math.IsInf(lp, -1) {
				total += math.Exp(lp)
				probs[family.MaskString(m)] = math.Exp(lp)
			}
		}
		if math.Abs(total-1) > 1e-12 {
			t.Fatalf("λ = %v: probabilities sum to %v", lambda, total)
		}
		if _, ok := probs["10101"]; ok {
			t.Fatalf("λ = %v: unpacked mask 10101 has positive probability", lambda)
		}
		const n = 20000
		r := rand.New(rand.NewPCG(7, uint64(lambda*100)))
		count := map[string]int{}
		m := make([]bool, C)
		for range n {
			p.Sample(r, lambda, m)
			count[family.MaskString(m)]++
		}
		for k, c := range count {
			q := probs[k]
			se := math.Sqrt(q * (1 - q) / n)
			if math.Abs(float64(c)/n-q) > 5*se+1e-12 {
				t.Errorf("λ = %v: mask %s frequency %v, probability %v (se %v)", lambda, k, float64(c)/n, q, se)
			}
		}
	}
}
