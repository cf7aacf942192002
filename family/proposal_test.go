package family_test

import (
	"math"
	"testing"

	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/dmri"
)

// TestFractionProposal checks the defensive proposal on b3s with every
// compartment on (λ = 1, so the three stick-breaking latents are active):
// each LogWeight equals log p(ε)/r(ε) computed from the two Gaussian
// densities directly (1e-12), weights stay below 1/(1−Mix), and weighted
// averages reproduce prior expectations: E_r[w] = 1 and
// E_r[w·1{ε₀ > 1.5}] = P(N(0,1) > 1.5) = 0.0668, each within 4 Monte Carlo
// standard errors of the weighted mean (so a wrong weight formula, which
// shifts both by far more, fails). The proposal must also show the tail
// more often than the prior does.
func TestFractionProposal(t *testing.T) {
	f, err := family.Lookup("b3s")
	if err != nil {
		t.Fatal(err)
	}
	prop := &family.FractionProposal{Scale: 2.5, Mix: 0.5}
	if err := prop.Validate(); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	s := make([]family.Sample, n)
	family.SimulateBatch(f, family.SimOptions{Seed: 9, Lambda: 1, Proposal: prop}, 0, s)
	nf := f.Layout().FractionLatents()
	if nf != 3 {
		t.Fatalf("b3s has %d fraction latents, want 3", nf)
	}
	logPhi := func(x, sd float64) float64 { return -0.5*x*x/(sd*sd) - math.Log(sd) - 0.5*math.Log(2*math.Pi) }
	const tail = 1.5
	var w, w2, wt, wt2 float64
	raw := 0
	for i := range s {
		th := s[i].Theta
		lp, lw := 0.0, 0.0
		for j := range nf {
			lp += logPhi(th[j], 1)
			lw += logPhi(th[j], prop.Scale)
		}
		want := lp - math.Log((1-prop.Mix)*math.Exp(lp)+prop.Mix*math.Exp(lw))
		if math.Abs(s[i].LogWeight-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Fatalf("sample %d: log weight %v, want %v", i, s[i].LogWeight, want)
		}
		wi := math.Exp(s[i].LogWeight)
		if wi > 1/(1-prop.Mix)+1e-12 {
			t.Fatalf("sample %d: weight %v above %v", i, wi, 1/(1-prop.Mix))
		}
		w += wi
		w2 += wi * wi
		if th[0] > tail {
			raw++
			wt += wi
			wt2 += wi * wi
		}
	}
	check := func(name string, sum, sum2, want float64) {
		mean := sum / n
		se := math.Sqrt((sum2/n - mean*mean) / n)
		if math.Abs(mean-want) > 4*se {
			t.Errorf("%s: weighted mean %.4f ± %.4f, want %.4f", name, mean, se, want)
		}
	}
	check("E[w]", w, w2, 1)
	check("E[w·1{ε₀>1.5}]", wt, wt2, 0.5*math.Erfc(tail/math.Sqrt2))
	if frac := float64(raw) / n; frac < 2*0.0668 {
		t.Errorf("proposal puts %.3f of ε₀ above %.1f, the prior 0.067: no tail oversampling", frac, tail)
	}
	for _, bad := range []family.FractionProposal{{Scale: 1, Mix: 0.5}, {Scale: 2, Mix: 0}, {Scale: 2, Mix: 1}, {Scale: math.NaN(), Mix: 0.5}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	// Without a proposal every weight is 1.
	family.SimulateBatch(f, family.SimOptions{Seed: 9, Lambda: 1}, 0, s[:100])
	for i := range s[:100] {
		if s[i].LogWeight != 0 {
			t.Fatalf("sample %d without proposal has log weight %v", i, s[i].LogWeight)
		}
	}
}
