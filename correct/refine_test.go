package correct

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/posterior"
)

// refineLingauss returns n starting samples (full latent vectors) of the
// lingauss model threeComp, drawn from N(m + off·sd, scale²·S) around the
// exact posterior N(m, S), and the exact moments.
func refineLingauss(t *testing.T, n int, off, scale float64, seed uint64) (posterior.Observation, [][]bool, [][]float64, []float64, [][]float64, []int) {
	t.Helper()
	tg, lf, x := lingaussTarget(t)
	mean, cov := lf.ParamPosterior(x, threeComp)
	d := len(tg.idx)
	c := make([]float64, d*d)
	for a, p := range tg.idx {
		for b, q := range tg.idx {
			c[a*d+b] = scale * scale * cov[p][q]
		}
	}
	l := cholesky(c, d)
	rng := rand.New(rand.NewPCG(seed, 3))
	masks := make([][]bool, n)
	thetas := make([][]float64, n)
	xi, w := make([]float64, d), make([]float64, d)
	for j := range thetas {
		masks[j] = threeComp
		thetas[j] = make([]float64, lf.Layout().DMax)
		for a := range xi {
			xi[a] = rng.NormFloat64()
		}
		lowerMul(l, d, xi, w)
		for a, p := range tg.idx {
			thetas[j][p] = mean[p] + off*math.Sqrt(cov[p][p]) + w[a]
		}
	}
	return posterior.Observation{Design: tg.design, X: x}, masks, thetas, mean, cov, tg.idx
}

// checkMoments compares the samples' means and variances on the active
// dimensions with the exact posterior: |mean − m| ≤ tolMean sd and
// |var/S − 1| ≤ tolVar.
func checkMoments(t *testing.T, thetas [][]float64, mean []float64, cov [][]float64, idx []int, tolMean, tolVar float64) {
	t.Helper()
	n := float64(len(thetas))
	for _, p := range idx {
		var s, s2 float64
		for _, th := range thetas {
			s += th[p]
		}
		m := s / n
		for _, th := range thetas {
			s2 += (th[p] - m) * (th[p] - m)
		}
		sd := math.Sqrt(cov[p][p])
		v := s2 / (n - 1) / cov[p][p]
		t.Logf("θ%d: mean off by %.3f sd, variance ratio %.3f", p, (m-mean[p])/sd, v)
		if math.Abs(m-mean[p]) > tolMean*sd || math.Abs(v-1) > tolVar {
			t.Errorf("θ%d: mean %.4f (exact %.4f, sd %.4f), variance ratio %.3f: outside ±%.2f sd / ±%.2f", p, m, mean[p], sd, v, tolMean, tolVar)
		}
	}
}

// TestRefineConverges starts 2000 chains 3 posterior sd off and twice too
// wide (a poor q) on the lingauss model Const + Quadratic + Bump
// (posterior condition number ~10³) and checks that 40 refinement steps
// reach the exact Gaussian posterior. With independent draws the
// Monte Carlo SE of a mean is 1/√2000 ≈ 0.022 sd and of a variance ratio
// √(2/2000) ≈ 0.032; the chains are exact MCMC after the burn-in, but
// their end points keep a trace of the start after 20 fixed-kernel steps,
// so the tolerances are 0.1 sd and 0.15 (≈ 5 SE).
func TestRefineConverges(t *testing.T) {
	o, masks, thetas, mean, cov, idx := refineLingauss(t, 2000, 3, 2, 1)
	st, err := Refine(lingauss.New(), []posterior.Observation{o}, [][][]bool{masks}, [][][]float64{thetas}, RefineSettings{Steps: 40, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acceptance %.3f, moved %.3f", st[0].Accept, st[0].Moved)
	checkMoments(t, thetas, mean, cov, idx, 0.1, 0.15)
}

// TestRefineInvariant starts 4000 chains at exact posterior draws: a few
// steps must leave the exact posterior (up to Monte Carlo error: SE of a
// mean 1/√4000 ≈ 0.016 sd, of a variance ratio √(2/4000) ≈ 0.022, bands
// ≈ 4 SE: 0.07 sd and 0.09). The burn-in half adapts the step from
// chains that are already in equilibrium, so the whole run is invariant.
func TestRefineInvariant(t *testing.T) {
	o, masks, thetas, mean, cov, idx := refineLingauss(t, 4000, 0, 1, 2)
	st, err := Refine(lingauss.New(), []posterior.Observation{o}, [][][]bool{masks}, [][][]float64{thetas}, RefineSettings{Steps: 6, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Moved < 0.9 {
		t.Errorf("only %.2f of the chains moved (acceptance %.3f)", st[0].Moved, st[0].Accept)
	}
	checkMoments(t, thetas, mean, cov, idx, 0.07, 0.09)
}

// TestRefineReproducible checks that a seed gives identical samples and
// that Steps = 0 leaves them unchanged.
func TestRefineReproducible(t *testing.T) {
	run := func(steps int) [][]float64 {
		o, masks, thetas, _, _, _ := refineLingauss(t, 50, 2, 2, 5)
		if _, err := Refine(lingauss.New(), []posterior.Observation{o, o}, [][][]bool{masks, masks}, [][][]float64{thetas, clone2(thetas)}, RefineSettings{Steps: steps, Seed: 9}); err != nil {
			t.Fatal(err)
		}
		return thetas
	}
	a, b, z := run(5), run(5), run(0)
	_, _, orig, _, _, _ := refineLingauss(t, 50, 2, 2, 5)
	for j := range a {
		for p := range a[j] {
			if a[j][p] != b[j][p] {
				t.Fatalf("sample %d, θ%d: %v then %v with the same seed", j, p, a[j][p], b[j][p])
			}
			if z[j][p] != orig[j][p] {
				t.Fatalf("sample %d changed with 0 steps", j)
			}
		}
	}
	if _, err := Refine(lingauss.New(), []posterior.Observation{{}}, nil, nil, RefineSettings{Steps: 1}); err == nil {
		t.Error("mismatched lengths accepted")
	}
}

func clone2(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for i := range x {
		out[i] = append([]float64(nil), x[i]...)
	}
	return out
}

// BenchmarkLogLikelihoodGradB3S is one likelihood-and-gradient call of
// b3s-brain with two sticks on the UKB-like table (105 measurements), the
// unit of the refinement's cost.
func BenchmarkLogLikelihoodGradB3S(b *testing.B) {
	f, err := family.Lookup("b3s-brain")
	if err != nil {
		b.Fatal(err)
	}
	des := fdmri.UKBDesign()
	mask := []bool{true, true, true, false, true}
	r := rand.New(rand.NewPCG(1, 1))
	theta := make([]float64, f.Layout().DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	x := make([]float64, des.N)
	f.Simulate(r, des, theta, mask, x)
	grad := make([]float64, f.Layout().DMax)
	b.ReportAllocs()
	for b.Loop() {
		f.LogLikelihood(des, x, theta, mask, grad)
	}
}

// TestRefineJumpsConverge is TestRefineConverges for the independence
// jumps alone: on the Gaussian lingauss posterior the Newton search finds
// the exact mode and Hessian, so the t proposal covers the posterior and
// 4 jumps from starts 3 sd off and twice too wide reach it. Tolerances as
// in TestRefineConverges (≈ 5 independent-sample SE: a chain that never
// jumped keeps its start, P ≈ (1 − acceptance)⁴).
func TestRefineJumpsConverge(t *testing.T) {
	o, masks, thetas, mean, cov, idx := refineLingauss(t, 2000, 3, 2, 1)
	st, err := Refine(lingauss.New(), []posterior.Observation{o}, [][][]bool{masks}, [][][]float64{thetas}, RefineSettings{Jumps: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("acceptance %.3f, moved %.3f", st[0].Accept, st[0].Moved)
	if st[0].Accept < 0.5 {
		t.Errorf("jump acceptance %.3f on a Gaussian posterior, want ≥ 0.5", st[0].Accept)
	}
	checkMoments(t, thetas, mean, cov, idx, 0.1, 0.15)
}

// TestRefineJumpsInvariant is TestRefineInvariant for the jumps followed
// by MALA steps: from exact draws the moments stay exact (bands ≈ 4 SE).
func TestRefineJumpsInvariant(t *testing.T) {
	o, masks, thetas, mean, cov, idx := refineLingauss(t, 4000, 0, 1, 2)
	if _, err := Refine(lingauss.New(), []posterior.Observation{o}, [][][]bool{masks}, [][][]float64{thetas}, RefineSettings{Jumps: 2, Steps: 2, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	checkMoments(t, thetas, mean, cov, idx, 0.07, 0.09)
}

// TestCanonical relabels b3s-brain samples with sticks 2 and 3 (or 3
// alone) on to sticks 1 and 2 (or 1): the noiseless signal — hence the
// likelihood — must be unchanged, the mask canonical, and a canonical
// sample left as it is.
func TestCanonical(t *testing.T) {
	f, err := family.Lookup("b3s-brain")
	if err != nil {
		t.Fatal(err)
	}
	des := fdmri.UKBDesign()
	exch := []int{1, 2, 3}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ mask, want []bool }{
		{[]bool{true, false, true, true, true}, []bool{true, true, true, false, true}},
		{[]bool{true, false, false, true, true}, []bool{true, true, false, false, true}},
		{[]bool{true, true, false, true, true}, []bool{true, true, true, false, true}},
	} {
		theta := make([]float64, f.Layout().DMax)
		for i := range theta {
			theta[i] = r.NormFloat64()
		}
		m2, th2 := canonical(f, c.mask, theta, exch)
		for k := range m2 {
			if m2[k] != c.want[k] {
				t.Fatalf("mask %v relabelled to %v, want %v", c.mask, m2, c.want)
			}
		}
		a, b := make([]float64, des.N), make([]float64, des.N)
		f.Forward(des, theta, c.mask, a)
		f.Forward(des, th2, m2, b)
		for j := range a {
			// Through natural parameters and back: the stick-breaking and
			// orientation inverses keep ≈ 1e−12 relative.
			if math.Abs(a[j]-b[j]) > 1e-9 {
				t.Fatalf("mask %v: signal %d %v before, %v after relabelling", c.mask, j, a[j], b[j])
			}
		}
		m3, th3 := canonical(f, m2, th2, exch)
		if &m3[0] != &m2[0] || &th3[0] != &th2[0] {
			t.Errorf("a canonical sample was relabelled again")
		}
	}
}
