package spec

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
)

// TestPriorPushforward: each prior's map sends N(0,1) latents to its
// distribution, checked by a Kolmogorov–Smirnov distance against the
// closed-form CDF (n = 20,000: the 0.1 % critical value is 1.95/√n ≈
// 0.0138), and the inverse recovers the latent (|Δz| < 1e−7 for |z| ≤ 3,
// the precision of Φ⁻¹ after Φ).
func TestPriorPushforward(t *testing.T) {
	cases := []struct {
		prior string
		cdf   func(v float64) float64
	}{
		{"uniform(-2, 3)", func(v float64) float64 { return (v + 2) / 5 }},
		{"log_uniform(0.1, 10)", func(v float64) float64 { return (math.Log(v) - math.Log(0.1)) / (math.Log(10) - math.Log(0.1)) }},
		{"normal(1, 2)", func(v float64) float64 { return family.Phi((v - 1) / 2) }},
		{"truncated_normal(30, 10, 5, 80)", func(v float64) float64 {
			a, b := family.Phi(-2.5), family.Phi(5)
			return (family.Phi((v-30)/10) - a) / (b - a)
		}},
		{"sphere", func(v float64) float64 { return (1 - math.Cos(v)) / 2 }}, // polar angle: cos θ uniform
	}
	const n = 20000
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		ps, err := parsePrior(c.prior)
		if err != nil {
			t.Fatal(err)
		}
		p := &ps[0]
		v := make([]float64, n)
		for i := range v {
			v[i] = p.natural(r.NormFloat64())
		}
		sort.Float64s(v)
		d := 0.0
		for i, x := range v {
			F := c.cdf(x)
			d = max(d, math.Abs(F-float64(i)/n), math.Abs(F-float64(i+1)/n))
		}
		if d > 1.95/math.Sqrt(n) {
			t.Errorf("%s: KS distance %.4f", c.prior, d)
		}
		for _, q := range ps {
			for z := -3.0; z <= 3; z += 0.25 {
				back, err := q.latent(q.natural(z))
				if err != nil || math.Abs(back-z) > 1e-7 {
					t.Errorf("%s: latent(natural(%v)) = %v, %v", c.prior, z, back, err)
				}
			}
		}
	}
	ps, _ := parsePrior("log_uniform(1, 2)")
	if _, err := ps[0].latent(3); err == nil || !strings.Contains(err.Error(), "outside the support") {
		t.Errorf("value outside the support: %v", err)
	}
}

// TestExpressions compares compiled expressions with Go arithmetic.
func TestExpressions(t *testing.T) {
	vars := map[string]int{"x": 0, "a": 1}
	env := []float64{1.7, -0.4}
	x, a := env[0], env[1]
	cases := map[string]float64{
		"a * sin(x) + 2":         a*math.Sin(x) + 2,
		"-0.5*(x-5)*(x-5)":       -0.5 * (x - 5) * (x - 5),
		"x^2^0.5":                math.Pow(x, math.Pow(2, 0.5)),
		"(x/10)^3":               (x / 10) * (x / 10) * (x / 10),
		"exp(-a) / sqrt(x)":      math.Exp(-a) / math.Sqrt(x),
		"abs(a) - -x + pi":       math.Abs(a) + x + math.Pi,
		"1.5e-1 * tanh(x * a)":   0.15 * math.Tanh(x*a),
		"log(x) - cos(x)*tan(a)": math.Log(x) - math.Cos(x)*math.Tan(a),
	}
	for src, want := range cases {
		e, _, err := compile(src, vars)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := e.eval(env); got != want {
			t.Errorf("%s = %v, want %v", src, got, want)
		}
	}
	for src, msg := range map[string]string{
		"b + 1": `unknown variable "b"`, "foo(x)": `unknown function "foo"`, "(x + 1": "missing ')'",
		"x +": "unexpected end", "x 2": "unexpected",
	} {
		if _, _, err := compile(src, vars); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", src, err, msg)
		}
	}
}

// TestGroupPrior: the pharmacokinetics mask prior (Bernoulli on two
// components, one of {LinearElim, SaturableElim}, one of two noise
// components) sums to 1 over all 2⁶ masks, has exactly 16 possible masks
// (ModelSpaceSize), and 100,000 draws match exp(LogProb) within 5
// binomial standard errors per mask.
func TestGroupPrior(t *testing.T) {
	fam, err := Load("../../examples/pharmacokinetics/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prior := fam.MaskPrior()
	if got := family.ModelSpaceSize(fam).String(); got != "16" {
		t.Errorf("model space %s, want 16", got)
	}
	const C, n = 6, 100000
	for _, lambda := range []float64{0.1, 0.5, 0.9} {
		sum, possible := 0.0, 0
		probs := make([]float64, 1<<C)
		mask := make([]bool, C)
		for m := range probs {
			for k := range mask {
				mask[k] = m>>k&1 == 1
			}
			probs[m] = math.Exp(prior.LogProb(mask, lambda))
			sum += probs[m]
			if probs[m] > 0 {
				possible++
			}
		}
		if math.Abs(sum-1) > 1e-12 || possible != 16 {
			t.Errorf("λ=%v: total %v over %d possible masks", lambda, sum, possible)
		}
		counts := make([]int, 1<<C)
		r := rand.New(rand.NewPCG(3, uint64(lambda*10)))
		for range n {
			prior.Sample(r, lambda, mask)
			m := 0
			for k, on := range mask {
				if on {
					m |= 1 << k
				}
			}
			counts[m]++
		}
		for m, p := range probs {
			se := math.Sqrt(p * (1 - p) / n)
			if f := float64(counts[m]) / n; math.Abs(f-p) > 5*se+1e-12 {
				t.Errorf("λ=%v mask %06b: frequency %.4f, probability %.4f", lambda, m, f, p)
			}
		}
	}
}

// TestSpecNaturalLatent: Latent inverts Natural for the pharmacokinetics
// spec and for a spec with simplex fractions and a sphere parameter.
func TestSpecNaturalLatent(t *testing.T) {
	const fracSpec = `name: frac-test
components:
  - {name: A, params: [{name: dir, prior: sphere}], term: "fraction * cos(dir_theta) * x"}
  - {name: B, params: [{name: b, prior: "normal(0, 2)"}], term: "fraction * b"}
  - {name: C, term: "fraction"}
  - {name: Noise, role: noise, params: [{name: s, prior: "log_uniform(0.1, 1)"}], noise: "s"}
shared: [{name: g, prior: "uniform(0, 1)"}]
fractions: {components: [A, B, C], alpha: [1, 2, 0.5]}
observation: {values: [0, 1, 2]}
simulator: {builtin: additive}
`
	ff, err := Parse([]byte(fracSpec), ".")
	if err != nil {
		t.Fatal(err)
	}
	pk, err := Load("../../examples/pharmacokinetics/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []family.Family{ff, pk} {
		// Draw masks and latents directly (an External family would start
		// its processes to simulate).
		r := rand.New(rand.NewPCG(5, 6))
		active := make([]bool, f.Layout().DMax)
		for range 200 {
			mask := make([]bool, len(f.Components()))
			f.MaskPrior().Sample(r, 0.6, mask)
			theta := make([]float64, f.Layout().DMax)
			for j := range theta {
				theta[j] = r.NormFloat64()
			}
			back, err := f.Latent(f.Natural(theta, mask), mask)
			if err != nil {
				t.Fatalf("%s mask %s: %v", f.Name(), family.MaskString(mask), err)
			}
			f.Layout().Active(mask, active)
			for j, a := range active {
				if a && math.Abs(back[j]-theta[j]) > 1e-6 {
					t.Fatalf("%s mask %s latent %d: %v → %v", f.Name(), family.MaskString(mask), j, theta[j], back[j])
				}
			}
		}
	}
	// Fractions of the active simplex components sum to 1.
	p := ff.Natural([]float64{0.3, -0.2, 0, 0, 0, 0, 0, 0}, []bool{true, true, true, true})
	if s := p.Fractions[0] + p.Fractions[1] + p.Fractions[2]; math.Abs(s-1) > 1e-12 {
		t.Errorf("fractions %v sum to %v", p.Fractions, s)
	}
}

// TestSpecGradient: the spec family's finite-difference likelihood
// gradient matches the built-in lingauss-k6's analytic one (relative
// 1e−6: central differences with step 1e−5 on a quadratic are exact up to
// rounding of ~1e−11·|ℓ|/h).
func TestSpecGradient(t *testing.T) {
	sf, err := Load("../../examples/lingauss-k6/family.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lf := lingauss.New()
	s := make([]family.Sample, 5)
	family.SimulateBatch(lf, family.SimOptions{Seed: 4, Lambda: 0.7}, 0, s)
	ga, gb := make([]float64, 6), make([]float64, 6)
	for _, x := range s {
		lf.LogLikelihood(x.Design, x.X, x.Theta, x.Mask, ga)
		sf.LogLikelihood(x.Design, x.X, x.Theta, x.Mask, gb)
		for j := range ga {
			if math.Abs(ga[j]-gb[j]) > 1e-6*(1+math.Abs(ga[j])) {
				t.Errorf("sample %d ∂/∂θ%d: analytic %v, spec %v", x.Index, j, ga[j], gb[j])
			}
		}
	}
}

// TestSpecErrors: bad spec files fail with an error naming the problem.
func TestSpecErrors(t *testing.T) {
	base := "name: t\nobservation: {values: [0, 1]}\nsimulator: {builtin: additive}\n"
	cases := map[string]string{
		"components:\n  - {name: A, term: x}\n":                                                                         "role: noise",
		"components:\n  - {name: N, role: noise, noise: '1'}\n  - {name: A, term: x}\n":                                 "base components must come before",
		"components:\n  - {name: A, term: y}\n  - {name: N, role: noise, noise: '1'}\n":                                 `unknown variable "y"`,
		"components:\n  - {name: A, params: [{name: a, prior: 'gamma(1, 2)'}], term: a}\n":                              `unknown prior "gamma"`,
		"components:\n  - {name: A, term: x, colour: red}\n":                                                            "field colour not found",
		"components:\n  - {name: A}\n  - {name: N, role: noise, noise: '1'}\n":                                          "needs a term",
		"components:\n  - {name: A, term: x}\n  - {name: N, role: noise, noise: '1'}\nmask_prior: {one_of: [[A, N]]}\n": "not a base component",
		"components:\n  - {name: A, term: x}\n  - {name: A, role: noise, noise: '1'}\n":                                 "appears twice",
		"components:\n  - {name: A, term: x, tags: ['a b']}\n  - {name: N, role: noise, noise: '1'}\n":                  "tag \"a b\"",
	}
	for body, want := range cases {
		_, err := Parse([]byte(base+body), ".")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
	if _, err := Parse([]byte("name: lingauss-k6\ncomponents:\n  - {name: A, term: x}\n  - {name: N, role: noise, noise: '1'}\nobservation: {values: [0]}\nsimulator: {builtin: additive}\n"), "."); err != nil {
		t.Fatal(err)
	} else if err := family.Install(mustParse(t, "name: lingauss-k6\ncomponents:\n  - {name: A, term: x}\n  - {name: N, role: noise, noise: '1'}\nobservation: {values: [0]}\nsimulator: {builtin: additive}\n")); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Errorf("installing a spec under a built-in name: %v", err)
	}
}

func mustParse(t *testing.T, text string) family.Family {
	t.Helper()
	f, err := Parse([]byte(text), ".")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSpecTags: a component's tags reach family.Component.Tags in order,
// and a component without tags has none.
func TestSpecTags(t *testing.T) {
	src := "name: t\nobservation: {values: [0, 1]}\nsimulator: {builtin: additive}\n" +
		"components:\n  - {name: A, term: x, tags: [stick, oriented]}\n  - {name: B, term: x}\n  - {name: N, role: noise, noise: '1'}\n"
	f, err := Parse([]byte(src), ".")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Components()
	if !c[0].Has("stick") || !c[0].Has("oriented") || c[0].Has("ball") || len(c[0].Tags) != 2 {
		t.Errorf("component A tags %q, want [stick oriented]", c[0].Tags)
	}
	if len(c[1].Tags) != 0 {
		t.Errorf("component B tags %q, want none", c[1].Tags)
	}
}
