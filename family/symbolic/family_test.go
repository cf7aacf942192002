package symbolic

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
)

// envelopeTruth restates the paper's noise envelopes (catalogue IDs 42–49)
// independently of noise.go.
var envelopeTruth = map[string]func(c []float64, x float64) float64{
	"NoiseObserver":            func(c []float64, x float64) float64 { return 1 },
	"NoiseIncreasing":          func(c []float64, x float64) float64 { return x + 1 },
	"NoiseDecreasing":          func(c []float64, x float64) float64 { return 11 - x },
	"NoiseQuadratic":           func(c []float64, x float64) float64 { return math.Pow(x, 2) + 1 },
	"NoiseQuadraticDecreasing": func(c []float64, x float64) float64 { return 11 - math.Pow(x, 2) },
	"NoiseExponential":         func(c []float64, x float64) float64 { return math.Exp(c[1] * x) },
	"NoiseSigmoid":             func(c []float64, x float64) float64 { return 1 / (1 + math.Exp(-c[1]*(x-c[2]))) },
	"NoisePeaked":              func(c []float64, x float64) float64 { return math.Exp(-math.Pow(x-c[1], 2) / (c[2] + 1e-3)) },
}

// paramsFor builds natural parameters c1, c2, … for one component.
func paramsFor(c ...float64) map[string]float64 {
	m := map[string]float64{}
	for i, v := range c {
		m[paramNames[i]] = v
	}
	return m
}

// TestSimulatedNoiseVariance checks, for every noise model, that the
// simulated residuals x_j − μ_j have mean 0 and variance
// c1²·envelope(x_j)² + StdFloor² at every grid point. With R replicates the
// per-point ratio s_j²/v_j has standard error √(2/R) (χ²_R/R); over 1000
// points the largest deviation of a Gaussian-like statistic is ≈ 3.3 s.e.,
// and χ²'s right skew adds a little, so 6 s.e. is asserted per point. The
// grand mean over all R·N draws has s.e. √(2/(RN)) and gets 5 s.e.; the
// standardised mean Σ(x−μ)/σ/√(RN) is N(0,1) and gets 5.
func TestSimulatedNoiseVariance(t *testing.T) {
	f, _ := New(50)
	d := GridDesign()
	r := rand.New(rand.NewPCG(11, 12))
	cs := map[string][]float64{
		"NoiseObserver": {0.7}, "NoiseIncreasing": {1.2}, "NoiseDecreasing": {0.9},
		"NoiseQuadratic": {0.35}, "NoiseQuadraticDecreasing": {0.6}, "NoiseExponential": {2.3, 0.27},
		"NoiseSigmoid": {3.1, 0.55, 4.4}, "NoisePeaked": {1.7, 6.2, 2.35},
	}
	const R = 600
	x := make([]float64, d.N)
	mu := make([]float64, d.N)
	for n := f.k; n < len(f.ids); n++ {
		name := f.comps[n].Name
		c := cs[name]
		mask := maskOf(f, 6, n) // ConstantWide gives a non-zero mean
		theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{
			6: paramsFor(-2.75), n: paramsFor(c...)}}, mask)
		if err != nil {
			t.Fatal(err)
		}
		f.Forward(d, theta, mask, mu)
		sumSq := make([]float64, d.N)
		var sumZ float64
		for rep := 0; rep < R; rep++ {
			f.Simulate(r, d, theta, mask, x)
			for j := range x {
				res := x[j] - mu[j]
				sumSq[j] += res * res
				v := c[0]*c[0]*math.Pow(envelopeTruth[name](c, d.Cov[j]), 2) + StdFloor*StdFloor
				sumZ += res / math.Sqrt(v)
			}
		}
		var grand float64
		worst, worstJ := 0.0, 0
		for j := range sumSq {
			v := c[0]*c[0]*math.Pow(envelopeTruth[name](c, d.Cov[j]), 2) + StdFloor*StdFloor
			ratio := sumSq[j] / R / v
			grand += ratio
			if dev := math.Abs(ratio - 1); dev > worst {
				worst, worstJ = dev, j
			}
		}
		grand /= float64(d.N)
		se := math.Sqrt(2.0 / R)
		if worst > 6*se {
			t.Errorf("%s: variance ratio at x=%g is off by %.3f (6 s.e. = %.3f)", name, d.Cov[worstJ], worst, 6*se)
		}
		if dev := math.Abs(grand - 1); dev > 5*math.Sqrt(2.0/(R*float64(d.N))) {
			t.Errorf("%s: mean variance ratio %.5f", name, grand)
		}
		if z := sumZ / math.Sqrt(R*float64(d.N)); math.Abs(z) > 5 {
			t.Errorf("%s: standardised residual mean %.2f", name, z)
		}
	}
}

// TestForwardClosedForm evaluates a three-function model through
// Latent → Forward on the whole grid against the expression written out.
func TestForwardClosedForm(t *testing.T) {
	f, _ := New(15)
	d := GridDesign()
	// K=15: 0 Linear, 5 Sinusoidal, 14 RampDown, 15 NoiseObserver.
	mask := maskOf(f, 0, 5, 14, 15)
	theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{
		0: paramsFor(1.3), 5: paramsFor(2.5, 1.7), 14: paramsFor(4.6, 5.555), 15: paramsFor(0.4)}}, mask)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, d.N)
	f.Forward(d, theta, mask, out)
	for j, x := range d.Cov {
		want := 1.3*x + 2.5*math.Sin(1.7*x)
		if x <= 5.555 {
			want += 4.6 * (5.555 - x)
		}
		// Parameters pass through Φ⁻¹ then Φ (≈ 1e-15 relative each).
		if !closeTo(out[j], want, 1e-12) {
			t.Fatalf("Forward at x=%g: %.16g, want %.16g", x, out[j], want)
		}
	}
}

// TestLogLikelihoodValue compares ℓ with the Gaussian density written out.
func TestLogLikelihoodValue(t *testing.T) {
	f, _ := New(50)
	d := GridDesign()
	n := f.k + 6                // NoiseSigmoid
	mask := maskOf(f, 1, 11, n) // Quadratic, GaussianBump, NoiseSigmoid
	theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{
		1: paramsFor(-0.37), 11: paramsFor(8.8, 2.9), n: paramsFor(3.1, 0.55, 4.4)}}, mask)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	x := make([]float64, d.N)
	f.Simulate(r, d, theta, mask, x)
	var want float64
	for j, xv := range d.Cov {
		mu := -0.37*xv*xv + 8.8*math.Exp(-(xv-2.9)*(xv-2.9))
		sd := math.Hypot(3.1/(1+math.Exp(-0.55*(xv-4.4))), StdFloor)
		z := (x[j] - mu) / sd
		want += -0.5*z*z - math.Log(sd) - 0.5*math.Log(2*math.Pi)
	}
	got := f.LogLikelihood(d, x, theta, mask, nil)
	withGrad := f.LogLikelihood(d, x, theta, mask, make([]float64, f.layout.DMax))
	// 1000 terms of magnitude ≲ 3, summed in float64: ≲ 1e-12 relative.
	if !closeTo(got, want, 1e-11) || got != withGrad {
		t.Errorf("log-likelihood %.15g (with gradient %.15g), want %.15g", got, withGrad, want)
	}
}

// TestNaturalLatentRoundTrip maps random latents to natural parameters and
// back for random masks of every family. Φ⁻¹(Φ(z)) loses ≈ ε/φ(z) relative
// to u, i.e. ≲ 1e-12 for |z| < 5.
func TestNaturalLatentRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, k := range librarySizes {
		f, _ := New(k)
		mask := make([]bool, len(f.ids))
		active := make([]bool, f.layout.DMax)
		for rep := 0; rep < 20; rep++ {
			f.MaskPrior().Sample(r, r.Float64(), mask)
			theta := make([]float64, f.layout.DMax)
			for i := range theta {
				theta[i] = math.Max(-5, math.Min(5, r.NormFloat64()))
			}
			p := f.Natural(theta, mask)
			if len(p.Components) != family.ActiveCount(mask) {
				t.Fatalf("K=%d: Natural gave %d components for %d active", k, len(p.Components), family.ActiveCount(mask))
			}
			back, err := f.Latent(p, mask)
			if err != nil {
				t.Fatalf("K=%d: %v", k, err)
			}
			f.layout.Active(mask, active)
			for i := range theta {
				want := 0.0
				if active[i] {
					want = theta[i]
				}
				if math.Abs(back[i]-want) > 1e-9 {
					t.Fatalf("K=%d: latent %d round trip %.15g, want %.15g", k, i, back[i], want)
				}
			}
			p2 := f.Natural(back, mask)
			for i, m := range p.Components {
				for name, v := range m {
					if !closeTo(p2.Components[i][name], v, 1e-13) {
						t.Fatalf("K=%d: component %d %s: %.17g then %.17g", k, i, name, v, p2.Components[i][name])
					}
				}
			}
		}
	}
}

func TestLatentErrors(t *testing.T) {
	f, _ := New(15)
	mask := maskOf(f, 5, 15) // Sinusoidal + NoiseObserver
	good := func() map[int]map[string]float64 {
		return map[int]map[string]float64{5: paramsFor(2.5, 1.7), 15: paramsFor(0.4)}
	}
	if _, err := f.Latent(family.Params{Components: good()}, mask); err != nil {
		t.Fatalf("valid parameters rejected: %v", err)
	}
	cases := []struct {
		name string
		edit func(p *family.Params, m []bool) []bool
		want string
	}{
		{"missing component", func(p *family.Params, m []bool) []bool { delete(p.Components, 5); return m }, "no parameters"},
		{"missing parameter", func(p *family.Params, m []bool) []bool { delete(p.Components[5], "c2"); return m }, "missing parameter"},
		{"unknown name", func(p *family.Params, m []bool) []bool { p.Components[5]["c3"] = 1; return m }, "no parameter \"c3\""},
		{"out of range", func(p *family.Params, m []bool) []bool { p.Components[5]["c2"] = 5.5; return m }, "outside its prior U(0.5,5)"},
		{"NaN", func(p *family.Params, m []bool) []bool { p.Components[15]["c1"] = math.NaN(); return m }, "outside"},
		{"inactive component", func(p *family.Params, m []bool) []bool { p.Components[0] = paramsFor(1); return m }, "switches off"},
		{"index out of range", func(p *family.Params, m []bool) []bool { p.Components[20] = paramsFor(1); return m }, "out of range"},
		{"shared", func(p *family.Params, m []bool) []bool { p.Shared = map[string]float64{"d": 1}; return m }, "no shared"},
		{"short mask", func(p *family.Params, m []bool) []bool { return m[:19] }, "19 entries"},
		{"two noise models", func(p *family.Params, m []bool) []bool { m[16] = true; return m }, "2 noise models"},
		{"no noise model", func(p *family.Params, m []bool) []bool {
			m[15] = false
			delete(p.Components, 15)
			return m
		}, "0 noise models"},
	}
	for _, tc := range cases {
		p := family.Params{Components: good()}
		m := tc.edit(&p, slices.Clone(mask))
		_, err := f.Latent(p, m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}

	// Prior edges are accepted and round-trip through latents of ∓Inf.
	f50, _ := New(50)
	ne := f50.k + 5 // NoiseExponential, c1 ~ U(0,5)
	m := maskOf(f50, ne)
	theta, err := f50.Latent(family.Params{Components: map[int]map[string]float64{ne: paramsFor(0, 0.5)}}, m)
	if err != nil {
		t.Fatal(err)
	}
	p := f50.Natural(theta, m)
	if got := p.Components[ne]; got["c1"] != 0 || got["c2"] != 0.5 {
		t.Errorf("edge values round trip to %v", got)
	}
}

func TestDesigns(t *testing.T) {
	f, _ := New(30)
	for _, spec := range []string{"", "grid"} {
		ds, err := f.Designs(spec)
		if err != nil {
			t.Fatal(err)
		}
		d := ds.SampleDesign(nil)
		if d.N != 1000 || d.CovDim != 1 || len(d.Cov) != 1000 || d.Name != "grid" {
			t.Fatalf("Designs(%q) = N %d, CovDim %d, len %d, name %q", spec, d.N, d.CovDim, len(d.Cov), d.Name)
		}
		for j, x := range d.Cov {
			if x != float64(j)*0.01 {
				t.Fatalf("x[%d] = %g, want %g", j, x, float64(j)*0.01)
			}
		}
		if d.Cov[999] != 9.99 {
			t.Errorf("last grid point %v, want 9.99", d.Cov[999])
		}
	}
	if _, err := f.Designs("ukb"); err == nil || !strings.Contains(err.Error(), "grid") {
		t.Errorf("Designs(\"ukb\") error %v", err)
	}
}

// TestSimulateBatchReproducible checks that the same seed gives the same
// samples, that every mask has exactly one noise model, and that a sample
// can be regenerated on its own from SampleRNG.
func TestSimulateBatchReproducible(t *testing.T) {
	f, _ := New(50)
	opt := family.SimOptions{Seed: 42, Lambda: 0.5}
	a := make([]family.Sample, 64)
	b := make([]family.Sample, 64)
	family.SimulateBatch(f, opt, 0, a)
	family.SimulateBatch(f, opt, 0, b)
	for i := range a {
		if !slices.Equal(a[i].X, b[i].X) || !slices.Equal(a[i].Mask, b[i].Mask) {
			t.Fatalf("sample %d differs between runs", i)
		}
		if noise := family.ActiveCount(a[i].Mask[f.k:]); noise != 1 {
			t.Fatalf("sample %d has %d noise models", i, noise)
		}
		if lp := f.MaskPrior().LogProb(a[i].Mask, 0.5); math.IsInf(lp, 0) || math.IsNaN(lp) {
			t.Fatalf("sample %d: log p(M|λ) = %g", i, lp)
		}
	}
	// Regenerate sample 7 by hand: the RNG order is mask, θ, design, noise.
	r := family.SampleRNG(42, 7)
	mask := make([]bool, len(f.ids))
	f.MaskPrior().Sample(r, 0.5, mask)
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	ds, _ := f.Designs("")
	d := ds.SampleDesign(r)
	x := make([]float64, d.N)
	f.Simulate(r, d, theta, mask, x)
	if !slices.Equal(x, a[7].X) {
		t.Error("sample 7 not reproduced from SampleRNG")
	}
}
