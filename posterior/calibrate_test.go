package posterior

import (
	"math"
	"slices"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/family/lingauss"
	"github.com/prismsbi/prism/network"
)

// attenuatedPosterior returns a lingauss-k6 Posterior whose parameter
// denoiser is the exact Gaussian-posterior one with its step scaled by
// kappa: D = θ + κ(D* − θ) (κ = 1: exact). Rows name observations by
// index: below calibStart they are obs[i]; from calibStart on they are
// simulation i − calibStart of the stream calibSeed, which is what
// CalibrateDenoiser simulates.
func attenuatedPosterior(t testing.TB, obs []Observation, kappa float64, calibSeed uint64) *Posterior {
	t.Helper()
	return wrappedPosterior(t, obs, calibSeed, func(d Denoiser) Denoiser { return scaledStep{d, kappa} })
}

// wrappedPosterior is attenuatedPosterior with the exact denoiser passed
// through wrap.
func wrappedPosterior(t testing.TB, obs []Observation, calibSeed uint64, wrap func(Denoiser) Denoiser) *Posterior {
	t.Helper()
	lf := lingauss.New()
	net, err := network.New(lf, tinyConfig(lf), 1)
	if err != nil {
		t.Fatal(err)
	}
	p := New(net)
	cache := map[int]*gaussPost{}
	post := func(i int, mask []bool) *gaussPost {
		if g, ok := cache[i]; ok {
			return g
		}
		y := []float64(nil)
		if i < calibStart {
			y = obs[i].X
		} else {
			s := make([]family.Sample, 1)
			family.SimulateBatch(lf, family.SimOptions{Seed: calibSeed, Lambda: math.NaN()}, uint64(i-calibStart), s)
			y = s[0].X
		}
		g := newGaussPost(lf, y, mask)
		cache[i] = g
		return g
	}
	p.denoiserHook = func(rowObs []int, masks [][]bool, active []bool) Denoiser {
		d := &gaussDenoiser{dim: lingauss.K}
		for r, i := range rowObs {
			d.rows = append(d.rows, post(i, masks[r]))
		}
		return wrap(d)
	}
	return p
}

// calibStart separates test observations from calibration simulations in
// attenuatedPosterior's row indices; CalibrateDenoiser's rows count from
// 0, so tests calibrate a Posterior whose hook is offset (offsetHook).
const calibStart = 1 << 20

// offsetHook shifts the observation indices CalibrateDenoiser passes to
// the hook into attenuatedPosterior's calibration range.
func offsetHook(p *Posterior) func() {
	orig := p.denoiserHook
	p.denoiserHook = func(rowObs []int, masks [][]bool, active []bool) Denoiser {
		shifted := make([]int, len(rowObs))
		for i, o := range rowObs {
			shifted[i] = o + calibStart
		}
		return orig(shifted, masks, active)
	}
	return func() { p.denoiserHook = orig }
}

// scaledStep scales another denoiser's step by kappa.
type scaledStep struct {
	inner Denoiser
	kappa float64
}

func (s scaledStep) Denoise(theta []float64, sigma float64, d, jac []float64) error {
	if err := s.inner.Denoise(theta, sigma, d, jac); err != nil {
		return err
	}
	for i := range d {
		d[i] = theta[i] + s.kappa*(d[i]-theta[i])
	}
	if jac != nil {
		dim := lingauss.K
		for r := range len(d) / dim {
			for i := range dim {
				row := jac[(r*dim+i)*dim : (r*dim+i+1)*dim]
				for k := range row {
					row[k] *= s.kappa
				}
				row[i] += 1 - s.kappa
			}
		}
	}
	return nil
}

// TestCalibrateDenoiser estimates the calibration of the exact denoiser
// and of the exact denoiser with its step cut to 70 %. Because θ₀ − D*(θ)
// is uncorrelated with every function of θ, the least-squares slope of
// θ₀ − θ on the step κ(D* − θ) is 1/κ in expectation; each knot's raw
// slope must be within 4 of its standard errors (plus 1e−3) of it. The
// shrunk scale of the exact denoiser must then stay within 4 SE of 1.
func TestCalibrateDenoiser(t *testing.T) {
	const seed = 41
	for _, kappa := range []float64{1, 0.7} {
		p := attenuatedPosterior(t, nil, kappa, seed)
		restore := offsetHook(p)
		c, err := p.CalibrateDenoiser(CalibrateOptions{Simulations: 300, Levels: 8, PerLevel: 4, Seed: seed})
		restore()
		if err != nil {
			t.Fatal(err)
		}
		for g := range c.LogSigma {
			want := 1 / kappa
			if d := math.Abs(c.Raw[g] - want); d > 4*c.SE[g]+1e-3 {
				t.Errorf("κ %v, σ %.3g: raw slope %.4f ± %.4f, want %.4f", kappa, math.Exp(c.LogSigma[g]), c.Raw[g], c.SE[g], want)
			}
			if kappa == 1 && math.Abs(c.Scale[g]-1) > 4*c.SE[g]+1e-3 {
				t.Errorf("exact denoiser, σ %.3g: scale %.4f", math.Exp(c.LogSigma[g]), c.Scale[g])
			}
		}
		if kappa == 0.7 && math.Abs(c.At(0.3)-1/0.7) > 0.02 {
			t.Errorf("κ 0.7: λ(0.3) = %.4f, want ≈ %.4f", c.At(0.3), 1/0.7)
		}
		// The same seed gives the same calibration.
		restore = offsetHook(p)
		c2, err := p.CalibrateDenoiser(CalibrateOptions{Simulations: 300, Levels: 8, PerLevel: 4, Seed: seed})
		restore()
		if err != nil || !slices.Equal(c.Raw, c2.Raw) {
			t.Errorf("κ %v: a second calibration with the same seed differs (%v)", kappa, err)
		}
	}
}

// TestCalibratedSampler: the sampler with the attenuated denoiser draws
// too wide a posterior (its variances exceed the exact ones by far more
// than Monte Carlo error); with the calibration of that denoiser, whose
// step it restores exactly up to the calibration's error, the samples
// have the exact mean and covariance within 5 standard errors, and log q
// stays the density of the samples (log E_q[p/q] = 0 within 5 SE + 1e−4,
// as in TestGaussianSampler).
func TestCalibratedSampler(t *testing.T) {
	const seed = 43
	obs, _ := lingaussObs(1, 11)
	p := attenuatedPosterior(t, obs, 0.7, seed)
	lf := lingauss.New()
	g := newGaussPost(lf, obs[0].X, threeComp)
	const n = 3000
	masks := [][][]bool{Repeat(threeComp, n)}
	so := SampleOptions{Options: Options{Seed: 3}}

	ts, err := p.SampleTheta(obs, masks, so)
	if err != nil {
		t.Fatal(err)
	}
	wider := 0
	for a, i := range g.idx {
		var m, v float64
		for _, th := range ts[0].Theta {
			m += th[i] / n
		}
		for _, th := range ts[0].Theta {
			v += (th[i] - m) * (th[i] - m) / (n - 1)
		}
		if v > 1.1*(g.s.At(a, a)) {
			wider++
		}
	}
	if wider != len(g.idx) {
		t.Fatalf("the attenuated denoiser made %d of %d variances > 1.1× exact; the test needs it to be visibly wrong", wider, len(g.idx))
	}

	restore := offsetHook(p)
	c, err := p.CalibrateDenoiser(CalibrateOptions{Simulations: 400, PerLevel: 4, Seed: seed})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetDenoiserCalibration(c); err != nil {
		t.Fatal(err)
	}
	ts, err = p.SampleAndLogProb(obs, masks, so)
	if err != nil {
		t.Fatal(err)
	}
	checkMoments(t, g, ts[0].Theta, DefaultSigmaMin)
	lr := make([]float64, n)
	s2 := DefaultSigmaMin * DefaultSigmaMin
	for j, th := range ts[0].Theta {
		lr[j] = g.logDensity(th, s2) - ts[0].LogQ[j]
	}
	if norm, se := LogMeanExp(lr); math.Abs(norm) > 5*se+1e-4 {
		t.Errorf("calibrated: log E_q[p/q] = %.3g ± %.2g: log q is not the density of the samples", norm, se)
	}
}

// taperedStep divides another denoiser's step by 1 + β·w(σ), the width
// stage's factor: the width stage must find β.
type taperedStep struct {
	inner Denoiser
	fit   *WidthFit
	beta  float64
}

func (s taperedStep) Denoise(theta []float64, sigma float64, d, jac []float64) error {
	return scaledStep{s.inner, 1 / (1 + s.beta*s.fit.weight(sigma))}.Denoise(theta, sigma, d, jac)
}

// TestCalibrateWidth runs the width stage alone (on a calibration whose
// least-squares scale is 1) for the exact denoiser and for one whose step
// is cut by 1 + β₀·w(σ) with β₀ = 0.3. At β = β₀ the calibrated denoiser
// is exact, its posteriors have the right width and the ranks' variance
// is the target in expectation; so β must be within 4 of its standard
// errors of β₀ (plus 0.02, the root finder's resolution and the rank
// statistic's steps). The same seed gives the same β.
func TestCalibrateWidth(t *testing.T) {
	const seed = 53
	taper := &WidthFit{SigmaFull: 0.03, SigmaZero: 0.3}
	opt := CalibrateOptions{Width: 800, WidthSamples: 40, WidthSigmaFull: taper.SigmaFull, WidthSigmaZero: taper.SigmaZero, Seed: seed}
	for _, beta0 := range []float64{0, 0.3} {
		p := wrappedPosterior(t, nil, seed, func(d Denoiser) Denoiser { return taperedStep{d, taper, beta0} })
		fit := func() *DenoiserCalibration {
			c := &DenoiserCalibration{LogSigma: []float64{math.Log(1e-3), math.Log(0.01), math.Log(0.1), math.Log(1)}, Scale: []float64{1, 1, 1, 1}}
			restore := offsetHook(p)
			defer restore()
			if err := p.fitWidth(c, opt); err != nil {
				t.Fatal(err)
			}
			return c
		}
		c := fit()
		w := c.Width
		t.Logf("β₀ %v: β %.4f ± %.4f over %d values, rank variance %.5f → %.5f (target %.5f)", beta0, w.Boost, w.SE, w.Values, w.Before, w.Variance, w.Target)
		if !(w.SE > 0) || math.Abs(w.Boost-beta0) > 4*w.SE+0.02 {
			t.Errorf("β₀ %v: width stage found β %.4f ± %.4f", beta0, w.Boost, w.SE)
		}
		if beta0 > 0 && !(w.Before < w.Target) {
			t.Errorf("β₀ %v: the cut step's rank variance %.5f is not below the target %.5f; the test needs too-wide posteriors", beta0, w.Before, w.Target)
		}
		for _, sigma := range []float64{1e-3, 0.03, 0.1, 0.3, 1} {
			if want := 1 + w.Boost*taper.weight(sigma); math.Abs(c.At(sigma)-want) > 1e-12 {
				t.Errorf("λ(%v) = %v, want %v", sigma, c.At(sigma), want)
			}
		}
		if again := fit(); again.Width.Boost != w.Boost {
			t.Errorf("β₀ %v: a second fit with the same seed gives β %v, not %v", beta0, again.Width.Boost, w.Boost)
		}
	}
}

// TestCalibrationAt checks λ(σ): the knots' values at the knots, linear
// in ln σ between them, constant beyond the ends; and Validate's refusals.
func TestCalibrationAt(t *testing.T) {
	c := &DenoiserCalibration{LogSigma: []float64{math.Log(0.01), math.Log(1), math.Log(100)}, Scale: []float64{1.4, 1.2, 1}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sigma, want float64 }{
		{0.001, 1.4}, {0.01, 1.4}, {0.1, 1.3}, {1, 1.2}, {10, 1.1}, {100, 1}, {1e4, 1},
	} {
		if got := c.At(tc.sigma); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("λ(%g) = %v, want %v", tc.sigma, got, tc.want)
		}
	}
	// The width factor 1 + β·w(σ): w = 1 up to σ_full, 0 from σ_zero, linear
	// in ln σ between (σ = 0.1 is its midpoint between 0.01 and 1).
	c.Width = &WidthFit{Boost: 0.5, SigmaFull: 0.01, SigmaZero: 1}
	for _, tc := range []struct{ sigma, want float64 }{
		{0.001, 1.4 * 1.5}, {0.01, 1.4 * 1.5}, {0.1, 1.3 * 1.25}, {1, 1.2}, {100, 1},
	} {
		if got := c.At(tc.sigma); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("with width factor: λ(%g) = %v, want %v", tc.sigma, got, tc.want)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*DenoiserCalibration{
		{LogSigma: []float64{0}, Scale: []float64{1}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1}},
		{LogSigma: []float64{1, 0}, Scale: []float64{1, 1}},
		{LogSigma: []float64{0, math.NaN()}, Scale: []float64{1, 1}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, -1}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, 11}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, math.Inf(1)}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, 1}, Width: &WidthFit{SigmaFull: 0.3, SigmaZero: 0.03}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, 1}, Width: &WidthFit{SigmaFull: 0, SigmaZero: 0.3}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, 1}, Width: &WidthFit{Boost: 5, SigmaFull: 0.03, SigmaZero: 0.3}},
		{LogSigma: []float64{0, 1}, Scale: []float64{1, 1}, Width: &WidthFit{Boost: math.NaN(), SigmaFull: 0.03, SigmaZero: 0.3}},
	} {
		if bad.Validate() == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
}
