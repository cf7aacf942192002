package dmri

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/cputime"
)

// TestLogLikelihoodGradient compares the analytic latent gradient with
// Richardson-extrapolated central differences, for random masks of both
// families (both noise models for BSZT), on the 14-volume reference scheme
// and the UKB-like table. The data are simulated at a nearby θ so that the
// gradient is of order 1–100.
//
// Error budget of the finite difference with h = 1e−3: truncation O(h⁴)
// ≈ 1e−12·|f⁽⁵⁾|; rounding ≈ ε·|log p|/h ≈ 1e−16·1e3/1e−3 = 1e−10. The
// analytic gradient must therefore match to 1e−6 relative, with an absolute
// floor of 1e−6 for components that are nearly zero.
func TestLogLikelihoodGradient(t *testing.T) {
	worst := 0.0
	for _, f := range []*Model{B3S(), B3SBrain(), BSZT(), BSZTConv()} {
		r := rand.New(rand.NewPCG(5, 6))
		dmax := f.layout.DMax
		m := make([]bool, len(f.comps))
		active := make([]bool, dmax)
		// bszt-conv: fewer trials (each full-model trial costs ~10⁵ kernel
		// integrals per finite difference); TestConvGradient covers every
		// dispersed compartment separately.
		trials := 40
		if f.nc > 10 {
			trials = 8
		}
		for trial := 0; trial < trials; trial++ {
			des := refDesign()
			if trial%2 == 1 {
				des = UKBDesign()
			}
			f.MaskPrior().Sample(r, 0.3+0.7*r.Float64(), m)
			if trial < 4 {
				// Make sure the full model and every noise model are covered.
				for k := range m {
					m[k] = k < f.nc
				}
				m[f.nc+trial%len(f.spec.Noise)] = true
			}
			f.layout.Active(m, active)
			truth := make([]float64, dmax)
			theta := make([]float64, dmax)
			for i := range theta {
				truth[i] = r.NormFloat64()
				theta[i] = truth[i] + 0.3*r.NormFloat64()
			}
			x := make([]float64, des.N)
			f.Simulate(r, des, truth, m, x)
			grad := make([]float64, dmax)
			ll := f.LogLikelihood(des, x, theta, m, grad)
			if ll0 := f.LogLikelihood(des, x, theta, m, nil); math.Abs(ll-ll0) > 1e-12*math.Abs(ll) {
				t.Errorf("%s: log-likelihood with gradient %.16g, without %.16g", f.Name(), ll, ll0)
			}
			eval := func(i int, h float64) float64 {
				th := append([]float64(nil), theta...)
				th[i] += h
				return f.LogLikelihood(des, x, th, m, nil)
			}
			for i := 0; i < dmax; i++ {
				if !active[i] {
					if grad[i] != 0 {
						t.Errorf("%s: gradient %v on inactive dimension %d", f.Name(), grad[i], i)
					}
					continue
				}
				const h = 1e-3
				d1 := (eval(i, h) - eval(i, -h)) / (2 * h)
				d2 := (eval(i, h/2) - eval(i, -h/2)) / h
				fd := (4*d2 - d1) / 3
				rel := math.Abs(grad[i]-fd) / math.Max(math.Abs(fd), 1)
				worst = math.Max(worst, rel)
				if rel > 1e-6 {
					t.Errorf("%s %s noise=%s: ∂/∂θ[%d] analytic %.10g, finite difference %.10g", f.Name(),
						family.MaskString(m), f.spec.Noise[noiseIndex(f, m)], i, grad[i], fd)
				}
			}
		}
	}
	t.Logf("largest relative gradient error: %.3g", worst)
}

func noiseIndex(f *Model, m []bool) int {
	for i := range f.spec.Noise {
		if m[f.nc+i] {
			return i
		}
	}
	return -1
}

func ricianLogDensity(y, s, sg float64) float64 { return noiseLogLik(y, s, sg, true) }

// TestRicianLogDensityDirect compares the implemented Rician log density
// with the textbook form y/σ² exp(−(y²+S²)/(2σ²)) I₀(yS/σ²), where I₀ comes
// from trapezoidal quadrature (besselQuad) instead of LogI0. Arguments keep
// yS/σ² ≤ 700 so that the direct form does not overflow. Tolerance 1e−12
// relative on the density: the quadrature is good to ~1e−15 and the
// exponent −(y²+S²)/(2σ²) + x of size ≤ 1e3 loses up to ~1e−13 to rounding.
func TestRicianLogDensityDirect(t *testing.T) {
	for _, c := range [][3]float64{{0.31, 0.3, 0.25}, {1.02, 1, 1.0 / 25}, {0.05, 0.2, 0.1}, {0.6, 0.01, 1.0 / 3}, {0.9, 0.7, 1.0 / 30}} {
		y, s, sg := c[0], c[1], c[2]
		x := y * s / (sg * sg)
		i0e, _ := besselQuad(x)
		want := y / (sg * sg) * math.Exp(-(y*y+s*s)/(2*sg*sg)+x) * i0e
		got := math.Exp(ricianLogDensity(y, s, sg))
		if math.Abs(got-want) > 1e-12*want {
			t.Errorf("Rician density at y=%v S=%v σ=%v: %.15g, direct %.15g", y, s, sg, got, want)
		}
	}
}

// TestRicianDensity integrates the Rician likelihood over y ∈ [0, ∞) and
// checks that it is a normalised density with E[y²] = S² + 2σ² (a closed
// form of the Rice distribution). The integrand is smooth and decays like a
// Gaussian beyond S + 40σ; composite Gauss–Legendre there is accurate to
// ~1e−14, hence the tolerance 1e−11.
func TestRicianDensity(t *testing.T) {
	for _, c := range [][2]float64{{0.5, 1.0 / 3}, {1, 1.0 / 80}, {0, 0.1}, {0.05, 1.0 / 80}, {0.9, 1.0 / 3}, {0.002, 1.0 / 20}} {
		s, sg := c[0], c[1]
		hi := s + 40*sg
		lo := math.Max(0, s-40*sg)
		p := func(y float64) float64 { return math.Exp(ricianLogDensity(y, s, sg)) }
		// For s < 40σ the density starts at y = 0 like y/σ², which is smooth.
		z := glIntegrate(p, lo, hi, 400)
		m2 := glIntegrate(func(y float64) float64 { return y * y * p(y) }, lo, hi, 400)
		if math.Abs(z-1) > 1e-11 {
			t.Errorf("S=%v σ=%v: ∫p = %.15g", s, sg, z)
		}
		if want := s*s + 2*sg*sg; math.Abs(m2-want) > 1e-11*want {
			t.Errorf("S=%v σ=%v: E[y²] = %.15g, want %.15g", s, sg, m2, want)
		}
	}
}

// TestRicianSimulationMatchesDensity draws Rician observations with the
// family's simulator and compares the fraction below several thresholds
// with the CDF obtained by integrating the likelihood. The tolerance is 5
// binomial standard errors √(p(1−p)/n). Drawing the real and imaginary
// noise from the same normal (a historic reference bug) shifts these
// probabilities by many standard errors.
func TestRicianSimulationMatchesDensity(t *testing.T) {
	f := BSZT()
	m := mask("100000000001")
	sNat, sg := 0.3, 0.25
	theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{
		0: {"d": 1e-3}, 11: {"snr": 1 / sg}}}, m)
	if err != nil {
		t.Fatal(err)
	}
	// b = 1203.97… gives exp(−b·1e−3) = 0.3 at every measurement.
	const n = 100
	cov := make([]float64, 4*n)
	for j := 0; j < n; j++ {
		cov[4*j], cov[4*j+3] = -math.Log(sNat)/1e-3, 1
	}
	des := family.Design{N: n, CovDim: 4, Cov: cov}
	r := rand.New(rand.NewPCG(7, 8))
	var ys []float64
	x := make([]float64, n)
	for rep := 0; rep < 400; rep++ {
		f.Simulate(r, des, theta, m, x)
		ys = append(ys, x...)
	}
	sort.Float64s(ys)
	N := float64(len(ys))
	for _, q := range []float64{0.1, 0.2, 0.3, 0.4, 0.6, 0.8} {
		p := glIntegrate(func(y float64) float64 { return math.Exp(ricianLogDensity(y, sNat, sg)) }, 0, q, 200)
		emp := float64(sort.SearchFloat64s(ys, q)) / N
		if se := math.Sqrt(p * (1 - p) / N); math.Abs(emp-p) > 5*se {
			t.Errorf("P(y < %v): simulated %.4f, density %.4f (5 SE = %.4f)", q, emp, p, 5*se)
		}
	}
}

// TestGaussianNoiseStatistics checks that Simulate adds N(0, σ²) noise with
// σ = 1/SNR: the residuals' mean and variance agree with 0 and σ² within 5
// standard errors (σ/√n and σ²√(2/n)).
func TestGaussianNoiseStatistics(t *testing.T) {
	f := B3S()
	r := rand.New(rand.NewPCG(9, 10))
	des := UKBDesign()
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	m := mask("11001")
	sg := 1 / f.Natural(theta, m).Components[4]["snr"]
	clean := make([]float64, des.N)
	f.Forward(des, theta, m, clean)
	x := make([]float64, des.N)
	var sum, sum2 float64
	n := 0
	for rep := 0; rep < 500; rep++ {
		f.Simulate(r, des, theta, m, x)
		for j := range x {
			e := x[j] - clean[j]
			sum += e
			sum2 += e * e
			n++
		}
	}
	mean := sum / float64(n)
	v := sum2 / float64(n)
	if math.Abs(mean) > 5*sg/math.Sqrt(float64(n)) || math.Abs(v-sg*sg) > 5*sg*sg*math.Sqrt(2/float64(n)) {
		t.Errorf("residual mean %.3g, variance %.4g; want 0, %.4g", mean, v, sg*sg)
	}
}

// TestNoAllocations: the forward model, simulation and likelihood with
// gradient must not allocate.
func TestNoAllocations(t *testing.T) {
	for _, f := range []*Model{B3S(), B3SBrain(), BSZT(), BSZTConv()} {
		r := rand.New(rand.NewPCG(11, 12))
		des := UKBDesign()
		theta := make([]float64, f.layout.DMax)
		for i := range theta {
			theta[i] = r.NormFloat64()
		}
		m := make([]bool, len(f.comps))
		for k := range m {
			m[k] = k <= f.nc
		}
		x := make([]float64, des.N)
		grad := make([]float64, f.layout.DMax)
		if a := testing.AllocsPerRun(20, func() { f.Forward(des, theta, m, x) }); a != 0 {
			t.Errorf("%s Forward allocates %v times", f.Name(), a)
		}
		if a := testing.AllocsPerRun(20, func() { f.Simulate(r, des, theta, m, x) }); a != 0 {
			t.Errorf("%s Simulate allocates %v times", f.Name(), a)
		}
		if a := testing.AllocsPerRun(20, func() { f.LogLikelihood(des, x, theta, m, grad) }); a != 0 {
			t.Errorf("%s LogLikelihood allocates %v times", f.Name(), a)
		}
		if a := testing.AllocsPerRun(20, func() { f.LogLikelihood(des, x, theta, m, nil) }); a != 0 {
			t.Errorf("%s LogLikelihood (no gradient) allocates %v times", f.Name(), a)
		}
	}
}

// BenchmarkSimulateB3SUKB measures end-to-end simulation throughput of b3s
// on the UKB-like table (n = 105) with family.SimulateBatch on all cores:
// λ ~ U(0,1), mask from the prior, θ ~ N(0, I), noise. One op = one
// simulation.
func BenchmarkSimulateB3SUKB(b *testing.B) {
	f := B3S()
	opt := family.SimOptions{Seed: 1, Lambda: math.NaN(), Designs: family.FixedDesign(UKBDesign())}
	const batch = 4096
	out := make([]family.Sample, batch)
	family.SimulateBatch(f, opt, 0, out)
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		k := min(batch, b.N-done)
		family.SimulateBatch(f, opt, uint64(done), out[:k])
		done += k
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sims/s")
}

// BenchmarkLogLikelihoodGradBSZTHCP measures one likelihood-and-gradient
// evaluation of the full BSZT model on the HCP-like table (n = 297).
func BenchmarkLogLikelihoodGradBSZTHCP(b *testing.B) {
	f := BSZT()
	r := rand.New(rand.NewPCG(1, 1))
	des := HCPDesign()
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	m := make([]bool, len(f.comps))
	for k := range m {
		m[k] = k <= f.nc
	}
	x := make([]float64, des.N)
	f.Simulate(r, des, theta, m, x)
	grad := make([]float64, f.layout.DMax)
	b.ReportAllocs()
	for b.Loop() {
		f.LogLikelihood(des, x, theta, m, grad)
	}
}

// BenchmarkSimulateB3SMix is BenchmarkSimulateB3SUKB with the default
// training mix ("" = ukb-mix), which draws a new design per simulation.
func BenchmarkSimulateB3SMix(b *testing.B) {
	f := B3S()
	ds, err := f.Designs("")
	if err != nil {
		b.Fatal(err)
	}
	opt := family.SimOptions{Seed: 1, Lambda: math.NaN(), Designs: ds}
	const batch = 4096
	out := make([]family.Sample, batch)
	family.SimulateBatch(f, opt, 0, out)
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		k := min(batch, b.N-done)
		family.SimulateBatch(f, opt, uint64(done), out[:k])
		done += k
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sims/s")
}

// TestSimulateBatchReproducible simulates the default training mix of both
// families twice with family.SimulateBatch (in parallel, split differently)
// and requires identical observations, designs and masks.
func TestSimulateBatchReproducible(t *testing.T) {
	for _, f := range []*Model{B3S(), B3SBrain(), BSZT(), BSZTConv()} {
		opt := family.SimOptions{Seed: 42, Lambda: math.NaN()}
		a := make([]family.Sample, 64)
		b := make([]family.Sample, 64)
		family.SimulateBatch(f, opt, 0, a)
		family.SimulateBatch(f, opt, 0, b[:23])
		family.SimulateBatch(f, opt, 23, b[23:])
		for i := range a {
			if family.MaskString(a[i].Mask) != family.MaskString(b[i].Mask) || a[i].Design.N != b[i].Design.N {
				t.Fatalf("%s sample %d differs", f.Name(), i)
			}
			for j := range a[i].X {
				if a[i].X[j] != b[i].X[j] || a[i].Design.Cov[4*j] != b[i].Design.Cov[4*j] {
					t.Fatalf("%s sample %d measurement %d differs", f.Name(), i, j)
				}
			}
		}
	}
}

// BenchmarkSimulateBSZTConvUKB measures end-to-end simulation throughput of
// bszt-conv on the UKB-like table (n = 105) with family.SimulateBatch on
// all cores: λ ~ U(0,1), mask from the dimension-penalised prior,
// θ ~ N(0, I₁₁₄), noise. One op = one simulation. Besides wall-clock
// sims/s it reports cpu-µs/sim, the process CPU time per simulation, and
// sims/s-2cpu = 2/cpu-time, the throughput both cores would give if no
// other job competed for them (the development machine is shared).
func BenchmarkSimulateBSZTConvUKB(b *testing.B) {
	f := BSZTConv()
	opt := family.SimOptions{Seed: 1, Lambda: math.NaN(), Designs: family.FixedDesign(UKBDesign())}
	const batch = 4096
	out := make([]family.Sample, batch)
	family.SimulateBatch(f, opt, 0, out)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, ok := cputime.Seconds()
	done := 0
	for done < b.N {
		k := min(batch, b.N-done)
		family.SimulateBatch(f, opt, uint64(done), out[:k])
		done += k
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sims/s")
	if cpu, ok2 := cputime.Seconds(); ok && ok2 {
		per := (cpu - cpu0) / float64(b.N)
		b.ReportMetric(per*1e6, "cpu-µs/sim")
		b.ReportMetric(2/per, "sims/s-2cpu")
	}
}

// BenchmarkSimulateBSZTConvFullUKB simulates the worst case: every one of
// the 19 compartments of bszt-conv active (λ = 1 would only turn each on
// with probability ½), UKB-like table, one core.
func BenchmarkSimulateBSZTConvFullUKB(b *testing.B) {
	f := BSZTConv()
	r := rand.New(rand.NewPCG(1, 1))
	des := UKBDesign()
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	m := make([]bool, len(f.comps))
	for k := range m {
		m[k] = k <= f.nc
	}
	x := make([]float64, des.N)
	b.ReportAllocs()
	for b.Loop() {
		f.Simulate(r, des, theta, m, x)
	}
}

// BenchmarkLogLikelihoodGradBSZTConvUKB: one log-likelihood + gradient of
// the full bszt-conv model (all 19 compartments) on the UKB-like table.
func BenchmarkLogLikelihoodGradBSZTConvUKB(b *testing.B) {
	f := BSZTConv()
	r := rand.New(rand.NewPCG(1, 1))
	des := UKBDesign()
	theta := make([]float64, f.layout.DMax)
	for i := range theta {
		theta[i] = r.NormFloat64()
	}
	m := make([]bool, len(f.comps))
	for k := range m {
		m[k] = k <= f.nc
	}
	x := make([]float64, des.N)
	f.Simulate(r, des, theta, m, x)
	grad := make([]float64, f.layout.DMax)
	b.ReportAllocs()
	for b.Loop() {
		f.LogLikelihood(des, x, theta, m, grad)
	}
}
