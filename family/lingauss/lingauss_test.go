package lingauss

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/family"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// denseLogDensity is log N(y; 0, Σ) from a dense gonum Cholesky
// factorisation of Σ.
func denseLogDensity(t *testing.T, y []float64, sigma *mat.SymDense) float64 {
	var ch mat.Cholesky
	if !ch.Factorize(sigma) {
		t.Fatal("Σ not positive definite")
	}
	var sy mat.VecDense
	yv := mat.NewVecDense(len(y), y)
	if err := ch.SolveVecTo(&sy, yv); err != nil {
		t.Fatal(err)
	}
	return -0.5 * (float64(len(y))*math.Log(2*math.Pi) + ch.LogDet() + mat.Dot(yv, &sy))
}

// testMasks are base-component masks (noise appended) used across tests.
var testMasks = [][]bool{
	{false, false, false, false, false, false, true},
	{false, false, false, true, false, false, true},
	{true, true, false, false, false, false, true},
	{false, true, true, false, false, true, true},
	{true, true, true, true, true, true, true},
}

// simulate draws θ ~ N(0,I) and y from the model under mask.
func simulate(f *Family, r *rand.Rand, mask []bool) (theta, y []float64) {
	theta = make([]float64, K)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	y = make([]float64, N)
	f.Simulate(r, f.GridDesign(), theta, mask, y)
	return theta, y
}

// denseCov returns Σ = σ²I + Φ_SΦ_Sᵀ, built entry by entry from Basis.
func denseCov(mask []bool) *mat.SymDense {
	x := Grid()
	s := mat.NewSymDense(N, nil)
	for i := 0; i < N; i++ {
		for j := i; j < N; j++ {
			v := 0.0
			for k := 0; k < K; k++ {
				if mask[k] {
					v += Basis(k, x[i]) * Basis(k, x[j])
				}
			}
			if i == j {
				v += Sigma * Sigma
			}
			s.SetSym(i, j, v)
		}
	}
	return s
}

func TestBasisClosedForms(t *testing.T) {
	cases := []struct {
		k       int
		x, want float64
	}{
		{0, 3.7, 1},
		{1, 2.5, 0.25},
		{2, 3, 0.09},
		{3, math.Pi / 2, 1},
		{4, math.Pi, -1},
		{5, 5, 1},
		{5, 7, math.Exp(-2)},
	}
	for _, c := range cases {
		if got := Basis(c.k, c.x); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("φ_%d(%g) = %.17g, want %.17g", c.k, c.x, got, c.want)
		}
	}
	g := Grid()
	if len(g) != 100 || g[0] != 0 || math.Abs(g[99]-9.9) > 1e-15 {
		t.Errorf("grid = [%g … %g] (%d points)", g[0], g[len(g)-1], len(g))
	}
}

func TestRegistered(t *testing.T) {
	f, err := family.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Components()) != K+1 || f.Layout().DMax != K {
		t.Errorf("C = %d, DMax = %d", len(f.Components()), f.Layout().DMax)
	}
}

// TestLogLikelihood compares with a sum of gonum normal log densities and the
// gradient with central finite differences.
func TestLogLikelihood(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(1, 2))
	d := f.GridDesign()
	grad := make([]float64, K)
	mu := make([]float64, N)
	for _, mask := range testMasks {
		theta, y := simulate(f, r, mask)
		// Evaluate away from the generating θ so the gradient is not ~0.
		for i := range theta {
			theta[i] += 0.3 * r.NormFloat64()
		}
		f.Forward(d, theta, mask, mu)
		want := 0.0
		for j := range y {
			want += distuv.Normal{Mu: mu[j], Sigma: Sigma}.LogProb(y[j])
		}
		got := f.LogLikelihood(d, y, theta, mask, grad)
		if math.Abs(got-want) > 1e-10*math.Abs(want) {
			t.Errorf("log-lik %g, want %g", got, want)
		}
		for i := range theta {
			h := 1e-6
			t0 := theta[i]
			theta[i] = t0 + h
			fp := f.LogLikelihood(d, y, theta, mask, nil)
			theta[i] = t0 - h
			fm := f.LogLikelihood(d, y, theta, mask, nil)
			theta[i] = t0
			// The log-likelihood is quadratic in θ, so central differences
			// are exact up to rounding: 1e-16·|f|/h ≈ 1e-8 for |f| ~ 100.
			fd := (fp - fm) / (2 * h)
			if math.Abs(fd-grad[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Errorf("mask %s: ∂/∂θ_%d = %g, FD %g", family.MaskString(mask), i, grad[i], fd)
			}
			if !mask[i] && grad[i] != 0 {
				t.Errorf("inactive θ_%d has gradient %g", i, grad[i])
			}
		}
	}
}

// TestForwardOffGrid checks that a copy of the grid (not the tabulated one)
// gives the same forward model, i.e. the tabulation is right.
func TestForwardOffGrid(t *testing.T) {
	f := New()
	theta := []float64{0.4, -1.1, 2, 0.7, -0.3, 1.3}
	mask := []bool{true, true, true, true, true, true, true}
	a := make([]float64, N)
	b := make([]float64, N)
	f.Forward(f.GridDesign(), theta, mask, a)
	f.Forward(family.Design{N: N, CovDim: 1, Cov: Grid()}, theta, mask, b)
	for j := range a {
		if math.Abs(a[j]-b[j]) > 1e-15 {
			t.Fatalf("x=%g: grid %g, off-grid %g", Grid()[j], a[j], b[j])
		}
	}
}

func TestSimulateNoiseIsGaussian(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(3, 4))
	mask := testMasks[3]
	mu := make([]float64, N)
	var z []float64
	for s := 0; s < 100; s++ {
		theta, y := simulate(f, r, mask)
		f.Forward(f.GridDesign(), theta, mask, mu)
		for j := range y {
			z = append(z, (y[j]-mu[j])/Sigma)
		}
	}
	slices.Sort(z)
	n := float64(len(z))
	d := 0.0
	for i, v := range z {
		c := distuv.UnitNormal.CDF(v)
		d = math.Max(d, math.Max(c-float64(i)/n, float64(i+1)/n-c))
	}
	// KS critical value at level 0.001.
	if crit := 1.949 / math.Sqrt(n); d > crit {
		t.Errorf("standardised residuals: KS D = %g > %g", d, crit)
	}
}

// TestLogEvidenceDense compares the Woodbury evaluation with the dense
// 100-dimensional Gaussian log density (gonum Cholesky of Σ).
func TestLogEvidenceDense(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(5, 6))
	for _, mask := range testMasks {
		for rep := 0; rep < 3; rep++ {
			_, y := simulate(f, r, mask)
			for _, other := range testMasks {
				want := denseLogDensity(t, y, denseCov(other))
				got := f.LogEvidence(y, other)
				// Both are O(100) sums of well-conditioned terms (cond Σ ≤
				// 1 + ‖Φ‖²/σ² ≈ 1e3): agreement to 1e-10 relative.
				if math.Abs(got-want) > 1e-10*math.Abs(want) {
					t.Errorf("data from %s, model %s: log evidence %.12g, dense %.12g",
						family.MaskString(mask), family.MaskString(other), got, want)
				}
			}
		}
	}
}

// TestLogEvidenceMonteCarlo estimates p(y|M) = E_{θ~N(0,I)} p(y|θ,M) by
// simple Monte Carlo from the prior. The tolerance is 4 standard errors of
// the log of the estimate (delta method: sd(w)/(mean(w)·√n) for
// likelihood weights w), plus 1e-12.
func TestLogEvidenceMonteCarlo(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(7, 8))
	d := f.GridDesign()
	const n = 200000
	lw := make([]float64, n)
	theta := make([]float64, K)
	for mi, mask := range testMasks[:4] {
		_, y := simulate(f, r, mask)
		// Shrink the data towards zero so the posterior is not too far in
		// the prior's tail for importance-free Monte Carlo (this keeps the
		// effective sample size in the thousands for two components).
		floats.Scale(0.6, y)
		for i := range lw {
			for k := range theta {
				theta[k] = r.NormFloat64()
			}
			lw[i] = f.LogLikelihood(d, y, theta, mask, nil)
		}
		m := floats.Max(lw)
		var s1, s2 float64
		for _, l := range lw {
			w := math.Exp(l - m)
			s1 += w
			s2 += w * w
		}
		mean := s1 / n
		sd := math.Sqrt(s2/n - mean*mean)
		est := m + math.Log(mean)
		se := sd / (mean * math.Sqrt(n))
		ess := s1 * s1 / s2
		exact := f.LogEvidence(y, mask)
		t.Logf("mask %s: MC %.5f ± %.5f (ESS %.0f), exact %.5f", family.MaskString(mask), est, se, ess, exact)
		if ess < 100 {
			t.Fatalf("mask %d: effective sample size %g too small for the test to be meaningful", mi, ess)
		}
		if math.Abs(est-exact) > 4*se+1e-12 {
			t.Errorf("mask %s: MC log evidence %g ± %g (ESS %.0f), exact %g",
				family.MaskString(mask), est, se, ess, exact)
		}
	}
}

// TestParamPosteriorConditioning computes the posterior a second way, by
// conditioning the joint Gaussian of (θ_S, y) in data space:
// mean = Φ_SᵀΣ⁻¹y, cov = I − Φ_SᵀΣ⁻¹Φ_S, with a dense 100×100 Σ.
func TestParamPosteriorConditioning(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(9, 10))
	x := Grid()
	for _, mask := range testMasks {
		_, y := simulate(f, r, mask)
		mean, cov := f.ParamPosterior(y, mask)
		var ch mat.Cholesky
		if !ch.Factorize(denseCov(mask)) {
			t.Fatal("Σ not positive definite")
		}
		phi := mat.NewDense(N, K, nil)
		for j := 0; j < N; j++ {
			for k := 0; k < K; k++ {
				if mask[k] {
					phi.Set(j, k, Basis(k, x[j]))
				}
			}
		}
		var sy mat.VecDense
		if err := ch.SolveVecTo(&sy, mat.NewVecDense(N, y)); err != nil {
			t.Fatal(err)
		}
		var wantMean mat.VecDense
		wantMean.MulVec(phi.T(), &sy)
		var sphi, q mat.Dense
		if err := ch.SolveTo(&sphi, phi); err != nil {
			t.Fatal(err)
		}
		q.Mul(phi.T(), &sphi)
		for a := 0; a < K; a++ {
			// Solutions of systems with condition number ≲ 1e3: 1e-10 absolute
			// on O(1) quantities.
			if math.Abs(mean[a]-wantMean.AtVec(a)) > 1e-10 {
				t.Errorf("mask %s: mean[%d] = %g, want %g", family.MaskString(mask), a, mean[a], wantMean.AtVec(a))
			}
			for b := 0; b < K; b++ {
				want := -q.At(a, b)
				if a == b && mask[a] {
					want++
				}
				if math.Abs(cov[a][b]-want) > 1e-10 {
					t.Errorf("mask %s: cov[%d][%d] = %g, want %g", family.MaskString(mask), a, b, cov[a][b], want)
				}
			}
		}
	}
}

// TestParamPosteriorQuadrature integrates the unnormalised posterior
// N(θ;0,1)·p(y|θ) numerically for one-component models.
func TestParamPosteriorQuadrature(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(11, 12))
	d := f.GridDesign()
	for k := 0; k < K; k++ {
		mask := make([]bool, K+1)
		mask[k], mask[K] = true, true
		_, y := simulate(f, r, mask)
		theta := make([]float64, K)
		// Trapezoid rule on [−6, 6] with 240001 nodes (h = 5e-5): the
		// posterior sd is ≥ 0.05, so the integrand is resolved with ≥ 1000
		// nodes per sd and the error of the smooth, rapidly decaying
		// integrand is far below 1e-9.
		const lo, hi, m = -6.0, 6.0, 240000
		h := (hi - lo) / m
		lps := make([]float64, m+1)
		for i := range lps {
			theta[k] = lo + float64(i)*h
			lps[i] = distuv.UnitNormal.LogProb(theta[k]) + f.LogLikelihood(d, y, theta, mask, nil)
		}
		top := floats.Max(lps)
		var z, s1, s2 float64
		for i, lp := range lps {
			w := math.Exp(lp - top)
			if i == 0 || i == m {
				w /= 2
			}
			v := lo + float64(i)*h
			z += w
			s1 += w * v
			s2 += w * v * v
		}
		qm := s1 / z
		qv := s2/z - qm*qm
		mean, cov := f.ParamPosterior(y, mask)
		if math.Abs(mean[k]-qm) > 1e-9 || math.Abs(cov[k][k]-qv) > 1e-9 {
			t.Errorf("component %d: posterior N(%g, %g), quadrature N(%g, %g)", k, mean[k], cov[k][k], qm, qv)
		}
		// Log evidence from the same quadrature: log ∫ = top + log(z·h).
		if ev, q := f.LogEvidence(y, mask), top+math.Log(z*h); math.Abs(ev-q) > 1e-8 {
			t.Errorf("component %d: log evidence %g, quadrature %g", k, ev, q)
		}
	}
}

func TestModelPosterior(t *testing.T) {
	f := New()
	r := rand.New(rand.NewPCG(13, 14))
	prior := family.BernoulliPrior{NumBase: K, NumNoise: 1}
	_, y := simulate(f, r, testMasks[3])
	for _, lambda := range []float64{0.1, 0.5, 0.9} {
		post := f.ModelPosterior(y, lambda)
		if len(post) != NumMasks {
			t.Fatalf("len = %d", len(post))
		}
		// Independent evaluation: dense log densities plus the prior's
		// log-probability, normalised.
		lp := make([]float64, NumMasks)
		for idx := range lp {
			mask := MaskFromIndex(idx)
			if MaskIndex(mask) != idx {
				t.Fatalf("MaskIndex(MaskFromIndex(%d)) = %d", idx, MaskIndex(mask))
			}
			lp[idx] = prior.LogProb(mask, lambda) + denseLogDensity(t, y, denseCov(mask))
		}
		z := floats.LogSumExp(lp)
		for idx := range lp {
			want := math.Exp(lp[idx] - z)
			if math.Abs(post[idx]-want) > 1e-9*math.Max(want, 1e-3) {
				t.Errorf("λ=%g mask %d: posterior %g, want %g", lambda, idx, post[idx], want)
			}
		}
		if s := floats.Sum(post); math.Abs(s-1) > 1e-12 {
			t.Errorf("posterior sums to %g", s)
		}
	}
}

// TestModelPosteriorCalibration checks E_y[p(M_k = 1 | y, λ)] = λ over data
// simulated from the prior predictive at λ (a consequence of Bayes' rule),
// which ties Simulate, the mask prior and the evidence together. The
// tolerance is 4 standard errors of the mean inclusion probability.
func TestModelPosteriorCalibration(t *testing.T) {
	f := New()
	const n = 3000
	for _, lambda := range []float64{0.25, 0.7} {
		out := make([]family.Sample, n)
		family.SimulateBatch(f, family.SimOptions{Seed: 99, Lambda: lambda}, 0, out)
		incl := make([][]float64, K)
		for k := range incl {
			incl[k] = make([]float64, n)
		}
		for i, s := range out {
			post := f.ModelPosterior(s.X, lambda)
			for idx, p := range post {
				for k := 0; k < K; k++ {
					if idx>>k&1 == 1 {
						incl[k][i] += p
					}
				}
			}
		}
		for k := 0; k < K; k++ {
			m := floats.Sum(incl[k]) / n
			v := 0.0
			for _, p := range incl[k] {
				v += (p - m) * (p - m)
			}
			se := math.Sqrt(v / (n - 1) / n)
			if math.Abs(m-lambda) > 4*se {
				t.Errorf("λ=%g: mean inclusion of %s = %g ± %g", lambda, baseNames[k], m, se)
			}
		}
	}
}

func TestNaturalLatent(t *testing.T) {
	f := New()
	mask := []bool{true, false, true, false, false, true, true}
	theta := []float64{0.5, 9, -1.25, 9, 9, 2}
	p := f.Natural(theta, mask)
	if len(p.Components) != 3 || p.Components[2][ParamName] != -1.25 {
		t.Fatalf("Natural = %+v", p)
	}
	back, err := f.Latent(p, mask)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.5, 0, -1.25, 0, 0, 2}; !slices.Equal(back, want) {
		t.Errorf("Latent = %v, want %v", back, want)
	}
	bad := []struct {
		name string
		p    family.Params
		mask []bool
	}{
		{"missing", family.Params{Components: map[int]map[string]float64{0: {"c1": 1}}}, mask},
		{"unknown name", family.Params{Components: map[int]map[string]float64{0: {"c1": 1}, 2: {"c2": 1}, 5: {"c1": 1}}}, mask},
		{"inactive", family.Params{Components: map[int]map[string]float64{0: {"c1": 1}, 1: {"c1": 1}, 2: {"c1": 1}, 5: {"c1": 1}}}, mask},
		{"fractions", family.Params{Components: map[int]map[string]float64{0: {"c1": 1}, 2: {"c1": 1}, 5: {"c1": 1}}, Fractions: []float64{1}}, mask},
		{"short mask", p, mask[:6]},
		{"noise off", family.Params{}, []bool{false, false, false, false, false, false, false}},
	}
	for _, b := range bad {
		if _, err := f.Latent(b.p, b.mask); err == nil {
			t.Errorf("%s: Latent accepted invalid input", b.name)
		}
	}
}

func TestModelPosteriorDoesNotPanicOnExtremeData(t *testing.T) {
	f := New()
	y := make([]float64, N)
	for j := range y {
		y[j] = 1e3 * math.Sin(float64(j))
	}
	post := f.ModelPosterior(y, 0.5)
	if s := floats.Sum(post); math.Abs(s-1) > 1e-12 || slices.ContainsFunc(post, math.IsNaN) {
		t.Errorf("posterior for extreme data: sum %g, %v", s, post)
	}
}

func BenchmarkModelPosterior(b *testing.B) {
	f := New()
	r := rand.New(rand.NewPCG(1, 1))
	_, y := simulate(f, r, testMasks[3])
	for b.Loop() {
		f.ModelPosterior(y, 0.5)
	}
}

func BenchmarkSimulateBatch(b *testing.B) {
	f := New()
	out := make([]family.Sample, 4096)
	opt := family.SimOptions{Seed: 1, Lambda: math.NaN()}
	for b.Loop() {
		family.SimulateBatch(f, opt, 0, out)
	}
	b.ReportMetric(float64(b.N*len(out))/b.Elapsed().Seconds(), "sims/s")
}
