package spec

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/numpytest"
)

// TestPKExampleClosedForms checks the pharmacokinetics example's numpy
// simulator (examples/pharmacokinetics/simulate.py), run through the
// external-simulator pool, against the closed-form concentration curves of
// its linear sub-models: an IV bolus C = D/V·e^{−kt}; first-order
// absorption (the Bateman function) C = D·ka/(V(ka−k))·(e^{−kt} − e^{−ka·t});
// and an IV bolus with a peripheral compartment, the biexponential
// C = D/V·[(α−k21)e^{−αt} + (k21−β)e^{−βt}]/(α−β) with α, β the roots of
// s² − (k12+k21+k)s + k21·k (k = CL/V). The residuals divided by the
// sample's noise standard deviation must be N(0,1): every |z| < 6 (about
// 3,000 residuals; P(|z| > 6) ≈ 2e−9 each) and mean z² within
// 5·√(2/M) of 1 (the standard error of a mean of M χ²₁ values). The RK4
// error (step 0.025 h; relative ≲ 1e−5) is far below the smallest noise
// (sd 0.01 mg/L, cv 5 %), so a wrong ODE term or noise model fails.
func TestPKExampleClosedForms(t *testing.T) {
	numpytest.Require(t)
	fam, err := Load("../../examples/pharmacokinetics/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := fam.(External)
	defer f.Close()
	out := make([]family.Sample, 600)
	if _, err := family.TrySimulateBatch(f, family.SimOptions{Seed: 3, Lambda: 0.5}, 0, out); err != nil {
		t.Fatal(err)
	}
	const dose = 100.0
	idx := map[string]int{}
	for k, c := range f.Components() {
		idx[c.Name] = k
	}
	var sumZ2 float64
	var m, models int
	seen := map[string]bool{}
	for _, s := range out {
		if !s.Mask[idx["LinearElim"]] || (s.Mask[idx["Absorption"]] && s.Mask[idx["Peripheral"]]) {
			continue
		}
		p := f.Natural(s.Theta, s.Mask)
		V := p.Shared["V"]
		k := p.Components[idx["LinearElim"]]["CL"] / V
		conc := func(t float64) float64 {
			switch {
			case s.Mask[idx["Absorption"]]:
				ka := p.Components[idx["Absorption"]]["ka"]
				return dose * ka / (V * (ka - k)) * (math.Exp(-k*t) - math.Exp(-ka*t))
			case s.Mask[idx["Peripheral"]]:
				k12, k21 := p.Components[idx["Peripheral"]]["k12"], p.Components[idx["Peripheral"]]["k21"]
				b := k12 + k21 + k
				disc := math.Sqrt(b*b - 4*k21*k)
				alpha, beta := (b+disc)/2, (b-disc)/2
				return dose / V * ((alpha-k21)*math.Exp(-alpha*t) + (k21-beta)*math.Exp(-beta*t)) / (alpha - beta)
			}
			return dose / V * math.Exp(-k*t)
		}
		seen[family.MaskString(s.Mask)] = true
		models++
		for j, tj := range f.Family.Grid() {
			c := conc(tj)
			sd := 0.0
			if s.Mask[idx["Proportional"]] {
				sd = p.Components[idx["Proportional"]]["cv"] * c
			} else {
				sd = p.Components[idx["Additive"]]["sd"]
			}
			z := (s.X[j] - c) / sd
			if math.Abs(z) > 6 {
				t.Fatalf("sample %d (mask %s) at t = %g h: simulated %g, closed form %g, sd %g (z = %.1f)", s.Index, family.MaskString(s.Mask), tj, s.X[j], c, sd, z)
			}
			sumZ2 += z * z
			m++
		}
	}
	mean := sumZ2 / float64(m)
	tol := 5 * math.Sqrt(2/float64(m))
	t.Logf("%d samples of %d masks, %d residuals: mean z² %.4f (tolerance %.4f)", models, len(seen), m, mean, tol)
	if len(seen) < 6 || m < 1000 {
		t.Fatalf("too few linear sub-model samples (%d masks, %d residuals)", len(seen), m)
	}
	if math.Abs(mean-1) > tol {
		t.Errorf("mean z² %.4f, want 1 ± %.4f", mean, tol)
	}
}

// BenchmarkExternalPK times the pharmacokinetics example through prism's
// external-simulator path with one worker process, batches of 256 (λ, M,
// θ drawn by prism, framing, the Python simulator, decoding), for
// comparison with `python3 examples/pharmacokinetics/simulate.py --bench`
// (the same numpy code alone; docs/benchmarks.md).
func BenchmarkExternalPK(b *testing.B) {
	numpytest.Require(b)
	text, err := os.ReadFile("../../examples/pharmacokinetics/family.yaml")
	if err != nil {
		b.Fatal(err)
	}
	dir, _ := filepath.Abs("../../examples/pharmacokinetics")
	fam, err := Parse([]byte(strings.Replace(string(text), "workers: 2", "workers: 1", 1)), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fam.(External).Close()
	out := make([]family.Sample, 256)
	opt := family.SimOptions{Seed: 1, Lambda: math.NaN()}
	if _, err := family.TrySimulateBatch(fam, opt, 0, out); err != nil { // start-up
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := family.TrySimulateBatch(fam, opt, uint64(i+1)*256, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*256)/b.Elapsed().Seconds(), "samples/s")
}
