package correct

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
)

// threeComp is the lingauss model Const + Quadratic + Bump: strongly
// correlated basis functions, posterior condition number ~10³.
var threeComp = []bool{true, false, true, false, false, true, true}

func lingaussTarget(t *testing.T) (*target, *lingauss.Family, []float64) {
	t.Helper()
	lf := lingauss.New()
	s := make([]family.Sample, 1)
	family.SimulateBatch(lf, family.SimOptions{Seed: 11, Lambda: 0.5}, 0, s)
	act := make([]bool, lf.Layout().DMax)
	lf.Layout().Active(threeComp, act)
	return newTarget(lf, s[0].Design, s[0].X, threeComp, act), lf, s[0].X
}

// badDraws returns J draws of N(m + 3·sd, 4S) (a proposal far off and
// too wide, as from a poor network) on the active dimensions.
func badDraws(lf *lingauss.Family, x []float64, idx []int, j int, rng *rand.Rand) [][]float64 {
	mean, cov := lf.ParamPosterior(x, threeComp)
	d := len(idx)
	c := make([]float64, d*d)
	for a, p := range idx {
		for b, q := range idx {
			c[a*d+b] = 4 * cov[p][q]
		}
	}
	l := cholesky(c, d)
	out := make([][]float64, j)
	xi := make([]float64, d)
	for i := range out {
		out[i] = make([]float64, d)
		for a := range xi {
			xi[a] = rng.NormFloat64()
		}
		lowerMul(l, d, xi, out[i])
		for a, p := range idx {
			out[i][a] += mean[p] + 3*math.Sqrt(cov[p][p])
		}
	}
	return out
}

// TestSMCExact checks the tempering sampler alone (no final importance
// stage, no network) against the closed forms: from a reference built on
// draws 3 posterior standard deviations off and twice too wide, 16
// independent runs of 512 particles with 16 MALA moves per step must give
//
//   - log mean Ẑ within 5 delta-method standard errors (over the runs)
//     of the exact log p(x | M), plus SE²/2 for the bias of the log.
//     Ẑ is unbiased, but from so poor a start its distribution has a long
//     right tail when the particles are few or mix slowly: with 64
//     particles and 4 moves the mean of 256 runs fell 0.8 nats short,
//     with 1024 and 16 moves 0.05 ± 0.03 (which is why the production
//     path starts from q and ends with an importance stage);
//   - weighted particle means within 0.15 posterior sd and standard
//     deviations within 15 % of the exact ones (pooled over the runs; the
//     MALA chains are correlated, so this is looser than the
//     independent-sample error 1/√4096 ≈ 0.016 by the autocorrelation of
//     a few moves per step).
func TestSMCExact(t *testing.T) {
	tg, lf, x := lingaussTarget(t)
	rng := rand.New(rand.NewPCG(1, 2))
	ref := newReference(badDraws(lf, x, tg.idx, 64, rng), len(tg.idx))
	s := DefaultSettings(SMC)
	s.Particles, s.Moves = 512, 16
	const runs = 16
	logZ := make([]float64, runs)
	d := len(tg.idx)
	sum, sum2 := make([]float64, d), make([]float64, d)
	steps := 0.0
	for r := range runs {
		out := runSMC(tg, ref, s, rand.New(rand.NewPCG(3, uint64(r))))
		if !out.ok {
			t.Fatalf("run %d did not reach β = 1", r)
		}
		logZ[r] = out.logZ
		steps += float64(out.steps) / runs
		for j, z := range out.z {
			w := math.Exp(out.logW[j]) / runs
			for a := range d {
				sum[a] += w * z[a]
				sum2[a] += w * z[a] * z[a]
			}
		}
	}
	est, se := logMeanExpTest(logZ)
	exact := lf.LogEvidence(x, threeComp)
	t.Logf("log Z: SMC %.4f ± %.4f, exact %.4f; %.1f steps per run", est, se, exact, steps)
	if math.Abs(est-exact) > 5*se+se*se/2 {
		t.Errorf("SMC log evidence %.4f, exact %.4f (SE %.4f)", est, exact, se)
	}
	mean, cov := lf.ParamPosterior(x, threeComp)
	for a, p := range tg.idx {
		m := sum[a]
		sd := math.Sqrt(sum2[a] - m*m)
		esd := math.Sqrt(cov[p][p])
		t.Logf("dim %d: mean %.4f (exact %.4f), sd %.4f (exact %.4f)", p, m, mean[p], sd, esd)
		if math.Abs(m-mean[p]) > 0.15*esd || math.Abs(sd/esd-1) > 0.15 {
			t.Errorf("dim %d: mean %.4f sd %.4f, exact %.4f and %.4f", p, m, sd, mean[p], esd)
		}
	}
}

func logMeanExpTest(l []float64) (float64, float64) {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = math.Max(mx, v)
	}
	n := float64(len(l))
	m, v := 0.0, 0.0
	for _, x := range l {
		m += math.Exp(x-mx) / n
	}
	for _, x := range l {
		d := math.Exp(x-mx) - m
		v += d * d / (n - 1)
	}
	return mx + math.Log(m), math.Sqrt(v/n) / m
}

// TestGradients checks ∇ log γ and ∇ log r against central differences
// (step 10⁻⁵; both are smooth, so the truncation error is O(h²) ≈ 10⁻¹⁰
// relative and rounding ≈ 10⁻¹¹/h; tolerance 10⁻⁵ relative + 10⁻⁶).
func TestGradients(t *testing.T) {
	tg, lf, x := lingaussTarget(t)
	rng := rand.New(rand.NewPCG(5, 6))
	d := len(tg.idx)
	ref := newReference(badDraws(lf, x, tg.idx, 16, rng), d)
	rs := ref.scratch()
	z := badDraws(lf, x, tg.idx, 1, rng)[0]
	gg, gr := make([]float64, d), make([]float64, d)
	tg.logProb(z, gg)
	ref.logProb(z, gr, rs)
	const h = 1e-5
	for a := range d {
		zp := append([]float64(nil), z...)
		zm := append([]float64(nil), z...)
		zp[a] += h
		zm[a] -= h
		fg := (tg.logProb(zp, nil) - tg.logProb(zm, nil)) / (2 * h)
		fr := (ref.logProb(zp, nil, rs) - ref.logProb(zm, nil, rs)) / (2 * h)
		if math.Abs(fg-gg[a]) > 1e-5*math.Abs(fg)+1e-6 {
			t.Errorf("∇log γ[%d] = %.8g, finite difference %.8g", a, gg[a], fg)
		}
		if math.Abs(fr-gr[a]) > 1e-5*math.Abs(fr)+1e-6 {
			t.Errorf("∇log r[%d] = %.8g, finite difference %.8g", a, gr[a], fr)
		}
	}
}

// TestReferenceNormalised checks that the kernel mixture is a normalised
// density that its sampler follows: E_r[1/r] over a box is not easy, so
// instead E_s[r(z)/s(z)] = 1 for a wide Gaussian s covering r (Monte
// Carlo with 200,000 draws, tolerance 5 standard errors).
func TestReferenceNormalised(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const d = 2
	draws := make([][]float64, 10)
	for i := range draws {
		draws[i] = []float64{rng.NormFloat64(), 0.3 * rng.NormFloat64()}
		if i%2 == 0 {
			draws[i][0] += 4 // two modes
		}
	}
	ref := newReference(draws, d)
	rs := ref.scratch()
	const n, sd = 200000, 4.0
	m, m2 := 0.0, 0.0
	for range n {
		z := []float64{2 + sd*rng.NormFloat64(), sd * rng.NormFloat64()}
		ls := -0.5*((z[0]-2)*(z[0]-2)+z[1]*z[1])/(sd*sd) - math.Log(2*math.Pi*sd*sd)
		w := math.Exp(ref.logProb(z, nil, rs) - ls)
		m += w / n
		m2 += w * w / n
	}
	se := math.Sqrt((m2 - m*m) / n)
	t.Logf("E_s[r/s] = %.4f ± %.4f", m, se)
	if math.Abs(m-1) > 5*se {
		t.Errorf("kernel mixture integrates to %.4f ± %.4f", m, se)
	}
	// Its sampler: mean of draws vs the mixture mean (mean of the centres).
	cm := 0.0
	for _, c := range draws {
		cm += c[0] / float64(len(draws))
	}
	sm := 0.0
	z, xi := make([]float64, d), make([]float64, d)
	for range n {
		ref.sample(rng, z, xi)
		sm += z[0] / n
	}
	if math.Abs(sm-cm) > 0.03 {
		t.Errorf("sampler mean %.4f, mixture mean %.4f", sm, cm)
	}
}

func TestParseMethod(t *testing.T) {
	for s, want := range map[string]Method{"none": None, "": None, "is": IS, "smc": SMC} {
		if m, err := ParseMethod(s); err != nil || m != want {
			t.Errorf("ParseMethod(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMethod("mcmc"); err == nil {
		t.Error("ParseMethod(mcmc) accepted")
	}
	if _, err := (Settings{Method: SMC, Replicates: 1}).withDefaults(); err == nil {
		t.Error("1 replicate accepted")
	}
	if _, err := (Settings{Method: None}).withDefaults(); err == nil {
		t.Error("method none accepted by Evidence")
	}
}

// TestModels checks the corrected model posterior against a hand
// computation (p ∝ p(M | λ) Z_M) and the failure rule: a failed model
// flags the observation only when it holds ≥ 1 % of the corrected mass.
func TestModels(t *testing.T) {
	lf := lingauss.New()
	a, b, c := lingauss.MaskFromIndex(1), lingauss.MaskFromIndex(3), lingauss.MaskFromIndex(7)
	res := []Result{{Mask: a, LogEvidence: -10}, {Mask: b, LogEvidence: -10 + math.Log(3)}, {Mask: c, LogEvidence: -20, Failed: true, Reason: "test"}}
	const lambda = 0.3
	mp := Models(lf, res, lambda)
	w := make([]float64, 3)
	sum := 0.0
	for m, r := range res {
		w[m] = math.Exp(lf.MaskPrior().LogProb(r.Mask, lambda) + r.LogEvidence + 10)
		sum += w[m]
	}
	for m := range w {
		if math.Abs(mp.Prob[m]-w[m]/sum) > 1e-12 {
			t.Errorf("model %d: p = %v, want %v", m, mp.Prob[m], w[m]/sum)
		}
	}
	if mp.Failed {
		t.Errorf("flagged by a model of mass %.2g: %s", mp.Prob[2], mp.Reason)
	}
	res[2].LogEvidence = -10
	if mp = Models(lf, res, lambda); !mp.Failed || mp.Prob[2] < 0.01 {
		t.Errorf("a failed model of mass %.2g did not flag the observation", mp.Prob[2])
	}
	for m := range res {
		res[m].LogEvidence = math.Inf(-1)
	}
	if mp = Models(lf, res, lambda); !mp.Failed {
		t.Error("no finite evidence, not flagged")
	}
}

// TestDrawWithin: conditioned on candidates 0 and 2 of three with
// posterior probabilities 0.5, 0.3, 0.2, the draws come only from them,
// candidate 0 with probability 0.5/0.7; with every candidate kept the
// draws are Draw's, sample for sample.
func TestDrawWithin(t *testing.T) {
	var res []Result
	for m := range 3 {
		res = append(res, Result{Mask: lingauss.MaskFromIndex(m + 1), Theta: [][]float64{{float64(m)}}, LogW: []float64{0}})
	}
	c := Corrected{ModelPosterior: ModelPosterior{Masks: [][]bool{res[0].Mask, res[1].Mask, res[2].Mask}, Prob: []float64{0.5, 0.3, 0.2}}, Results: res, s1: 3, s2: 9}
	const n = 4000
	_, th := c.DrawWithin([]bool{true, false, true}, n)
	k := 0
	for _, x := range th {
		switch x[0] {
		case 0:
			k++
		case 1:
			t.Fatal("drew candidate 1, which is not kept")
		}
	}
	p := 0.5 / 0.7
	// 4 binomial standard deviations: a false alarm once in ~16,000 seeds.
	if sd := math.Sqrt(p * (1 - p) / n); math.Abs(float64(k)/n-p) > 4*sd {
		t.Errorf("candidate 0 in %.3f of the draws, want %.3f ± %.3f", float64(k)/n, p, 4*sd)
	}
	_, all := c.DrawWithin([]bool{true, true, true}, 50)
	_, ref := c.Draw(50)
	for j := range ref {
		if all[j][0] != ref[j][0] {
			t.Fatalf("draw %d: %v with every candidate kept, %v from Draw", j, all[j][0], ref[j][0])
		}
	}
}
