package family

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// ksStat returns the one-sample Kolmogorov–Smirnov statistic of xs against
// the continuous CDF cdf. xs is sorted in place.
func ksStat(xs []float64, cdf func(float64) float64) float64 {
	slices.Sort(xs)
	n := float64(len(xs))
	d := 0.0
	for i, x := range xs {
		f := cdf(x)
		d = math.Max(d, math.Max(f-float64(i)/n, float64(i+1)/n-f))
	}
	return d
}

// ksCrit is the asymptotic critical value of the KS statistic at level
// 0.001 (Kolmogorov distribution quantile 1.949): a correct pushforward
// fails a fixed-seed test with probability 1/1000.
func ksCrit(n int) float64 { return 1.949 / math.Sqrt(float64(n)) }

func TestPhiKnownValues(t *testing.T) {
	// Reference values of the standard normal CDF (Abramowitz & Stegun 26.2,
	// extended-precision tables); relative tolerance of a few ulps because
	// Phi is one Erfc call.
	cases := []struct{ z, p float64 }{
		{0, 0.5},
		{1.959963984540054, 0.975},
		{-1, 0.15865525393145705},
		{-5, 2.866515718791939e-07},
		{-10, 7.619853024160527e-24},
	}
	for _, c := range cases {
		if got := Phi(c.z); math.Abs(got-c.p) > 1e-14*c.p {
			t.Errorf("Phi(%g) = %.17g, want %.17g", c.z, got, c.p)
		}
	}
	if got := NormPDF(1); math.Abs(got-0.24197072451914337) > 1e-16 {
		t.Errorf("NormPDF(1) = %.17g", got)
	}
}

func TestPhiInvRoundTrip(t *testing.T) {
	// Φ⁻¹(Φ(z)) must return z up to the conditioning of the round trip: a
	// relative error δ ≈ 1e-16 in Φ(z) moves z by δ·Φ(z)/φ(z), which is
	// ≈ δ/|z| in the lower tail and grows like 1/φ(z) in the upper tail,
	// where Φ(z) rounds towards 1. The tolerance is 4× that plus 1e-13.
	for z := -37.0; z <= 7; z += 0.173 {
		got := PhiInv(Phi(z))
		if math.Abs(got-z) > 1e-13*math.Max(1, math.Abs(z))+4.4e-16*Phi(z)/NormPDF(z) {
			t.Errorf("PhiInv(Phi(%g)) = %.17g", z, got)
		}
	}
	if !math.IsInf(PhiInv(0), -1) || !math.IsInf(PhiInv(1), 1) {
		t.Error("PhiInv must map 0 and 1 to ∓Inf")
	}
}

func TestIntervalPushforwardUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	a, b := -0.5, 2.5
	xs := make([]float64, n)
	for i := range xs {
		xs[i], _ = Interval(r.NormFloat64(), a, b)
	}
	d := ksStat(xs, func(v float64) float64 { return (v - a) / (b - a) })
	if d > ksCrit(n) {
		t.Errorf("Interval pushforward KS D = %g > %g", d, ksCrit(n))
	}
	for _, z := range []float64{-3, -0.4, 0, 1.7, 5} {
		v, dv := Interval(z, a, b)
		if zz := IntervalInv(v, a, b); math.Abs(zz-z) > 1e-9 {
			t.Errorf("IntervalInv(Interval(%g)) = %g", z, zz)
		}
		// Central differences, h = 1e-5: truncation h²·|v'''|/6 ≈ 1e-10.
		h := 1e-5
		vp, _ := Interval(z+h, a, b)
		vm, _ := Interval(z-h, a, b)
		if fd := (vp - vm) / (2 * h); math.Abs(fd-dv) > 1e-8 {
			t.Errorf("Interval'(%g) = %g, FD %g", z, dv, fd)
		}
	}
}

func TestHemisphereUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 20000
	cosT := make([]float64, n)
	phis := make([]float64, n)
	for i := range cosT {
		th, ph, _, _ := Hemisphere(r.NormFloat64(), r.NormFloat64())
		if th < 0 || th > math.Pi/2 || ph < -math.Pi || ph > math.Pi {
			t.Fatalf("Hemisphere out of range: θ=%g φ=%g", th, ph)
		}
		v := Direction(th, ph)
		if nrm := math.Hypot(math.Hypot(v[0], v[1]), v[2]); math.Abs(nrm-1) > 1e-15 || v[2] < 0 {
			t.Fatalf("Direction(%g,%g) = %v not a unit vector on the upper hemisphere", th, ph, v)
		}
		cosT[i] = math.Cos(th)
		phis[i] = ph
	}
	// Uniform on the upper hemisphere ⇔ cos θ ~ U(0,1) and φ ~ U(−π,π), independent.
	if d := ksStat(cosT, func(c float64) float64 { return c }); d > ksCrit(n) {
		t.Errorf("cos θ KS D = %g > %g", d, ksCrit(n))
	}
	if d := ksStat(phis, func(p float64) float64 { return (p + math.Pi) / (2 * math.Pi) }); d > ksCrit(n) {
		t.Errorf("φ KS D = %g > %g", d, ksCrit(n))
	}
}

func TestHemisphereInverseAndDerivatives(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 400; i++ {
		// z1 covers the pole region (z1 ≪ 0) where θ → 0; z2 stays in
		// [−5, 5] because φ = 2πΦ(z2) − π is stored with absolute rounding
		// 4e-16, which limits how well z2 can be recovered to 4e-16/φ_N(z2).
		z1, z2 := -9+14*r.Float64(), -5+10*r.Float64()
		th, ph, dth, dph := Hemisphere(z1, z2)
		w1, w2 := HemisphereInv(th, ph)
		// Round trips are limited by the absolute rounding of θ near π/2
		// (z1 = 5: cos θ ~ 3e-7 known to 1e-16 absolute ⇒ ~1e-10 in z1) and
		// of φ (≤ 4e-16/φ_N(5) ≈ 3e-10 in z2).
		if math.Abs(w1-z1) > 1e-8 || math.Abs(w2-z2) > 1e-8 {
			t.Errorf("HemisphereInv(Hemisphere(%g,%g)) = (%g,%g)", z1, z2, w1, w2)
		}
		h := 1e-6
		tp, pp, _, _ := Hemisphere(z1+h, z2+h)
		tm, pm, _, _ := Hemisphere(z1-h, z2-h)
		// Central differences with h = 1e-6: truncation ~1e-12·|f'''|,
		// rounding ~1e-16/1e-6 = 1e-10, so 1e-6 relative is safe.
		if fd := (tp - tm) / (2 * h); math.Abs(fd-dth) > 1e-6*math.Max(1e-3, math.Abs(dth)) {
			t.Errorf("dθ/dz1 at %g: %g, FD %g", z1, dth, fd)
		}
		if fd := (pp - pm) / (2 * h); math.Abs(fd-dph) > 1e-6*math.Max(1e-3, math.Abs(dph)) {
			t.Errorf("dφ/dz2 at %g: %g, FD %g", z2, dph, fd)
		}
	}
	if v := Direction(math.Pi/2, math.Pi/2); math.Abs(v[0]) > 1e-16 || math.Abs(v[1]-1) > 1e-16 || math.Abs(v[2]) > 1e-16 {
		t.Errorf("Direction(π/2, π/2) = %v, want e_y", v)
	}
}

// dirichletCase is an α vector with a mask of active components.
type dirichletCase struct {
	alpha []float64
	on    []bool
}

var dirichletCases = []dirichletCase{
	{[]float64{3.5, 1, 0.3, 0.1}, []bool{true, true, true, true}},   // B3S prior, full model
	{[]float64{3.5, 1, 0.3, 0.1}, []bool{true, false, true, true}},  // gap in the middle
	{[]float64{3.5, 1, 0.3, 0.1}, []bool{false, true, true, false}}, // last component off
	{[]float64{1, 1, 1, 1, 1}, []bool{true, true, false, true, true}},
	{[]float64{2, 0.5, 1.5}, []bool{true, false, true}},
}

func TestStickBreakingDirichletMoments(t *testing.T) {
	const n = 100000
	for ci, c := range dirichletCases {
		K := len(c.alpha)
		sb := StickBreaking{Alpha: c.alpha}
		a0 := 0.0
		for i, on := range c.on {
			if on {
				a0 += c.alpha[i]
			}
		}
		mean := make([]float64, K)
		for i, on := range c.on {
			if on {
				mean[i] = c.alpha[i] / a0
			}
		}
		// Running sums of per-sample statistics whose expectations are the
		// Dirichlet moments: π_i, (π_i−μ_i)(π_j−μ_j).
		s1 := make([]float64, K)
		s2 := make([]float64, K)
		c1 := make([]float64, K*K)
		c2 := make([]float64, K*K)
		r := rand.New(rand.NewPCG(7, uint64(ci)))
		eps := make([]float64, K-1)
		pi := make([]float64, K)
		for s := 0; s < n; s++ {
			for i := range eps {
				eps[i] = r.NormFloat64()
			}
			sb.Fractions(eps, c.on, pi)
			sum := 0.0
			for i := range pi {
				if !c.on[i] && pi[i] != 0 {
					t.Fatalf("case %d: inactive component %d has fraction %g", ci, i, pi[i])
				}
				sum += pi[i]
				s1[i] += pi[i]
				s2[i] += pi[i] * pi[i]
				for j := range pi {
					q := (pi[i] - mean[i]) * (pi[j] - mean[j])
					c1[i*K+j] += q
					c2[i*K+j] += q * q
				}
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Fatalf("case %d: fractions sum to %g", ci, sum)
			}
		}
		// Each estimate is a mean of n i.i.d. terms; its standard error is
		// the sample standard deviation over √n. 5 standard errors leaves a
		// false-alarm rate below 1e-6 per comparison.
		for i := 0; i < K; i++ {
			m := s1[i] / n
			se := math.Sqrt(math.Max(s2[i]/n-m*m, 0) / n)
			if math.Abs(m-mean[i]) > 5*se+1e-15 {
				t.Errorf("case %d: E[π_%d] = %g ± %g, want %g", ci, i, m, se, mean[i])
			}
			for j := 0; j < K; j++ {
				want := 0.0
				if c.on[i] && c.on[j] {
					if i == j {
						want = c.alpha[i] * (a0 - c.alpha[i]) / (a0 * a0 * (a0 + 1))
					} else {
						want = -c.alpha[i] * c.alpha[j] / (a0 * a0 * (a0 + 1))
					}
				}
				m := c1[i*K+j] / n
				se := math.Sqrt(math.Max(c2[i*K+j]/n-m*m, 0) / n)
				if math.Abs(m-want) > 5*se+1e-15 {
					t.Errorf("case %d: Cov[π_%d, π_%d] = %g ± %g, want %g", ci, i, j, m, se, want)
				}
			}
		}
	}
}

func TestStickBreakingEdgeMasks(t *testing.T) {
	sb := StickBreaking{Alpha: []float64{3.5, 1, 0.3, 0.1}}
	eps := []float64{0.3, -1, 2}
	pi := make([]float64, 4)
	sb.Fractions(eps, []bool{false, false, true, false}, pi)
	if !slices.Equal(pi, []float64{0, 0, 1, 0}) {
		t.Errorf("single active component: π = %v", pi)
	}
	sb.Fractions(eps, []bool{false, false, false, false}, pi)
	if !slices.Equal(pi, []float64{0, 0, 0, 0}) {
		t.Errorf("empty mask: π = %v", pi)
	}
	// Two active components: π_0 is the Beta(α_0, α_3) quantile of Φ(ε_0),
	// i.e. I_{π_0}(3.5, 0.1) = Φ(ε_0); check through the incomplete beta
	// identity (independent of the stick-breaking code path).
	sb.Fractions(eps, []bool{true, false, false, true}, pi)
	if pi[1] != 0 || pi[2] != 0 || math.Abs(pi[0]+pi[3]-1) > 1e-15 {
		t.Errorf("two active components: π = %v", pi)
	}
}

func TestStickBreakingInverseRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for ci, c := range dirichletCases {
		sb := StickBreaking{Alpha: c.alpha}
		K := len(c.alpha)
		eps := make([]float64, K-1)
		back := make([]float64, K-1)
		pi := make([]float64, K)
		pi2 := make([]float64, K)
		for s := 0; s < 200; s++ {
			for i := range eps {
				eps[i] = 2 * r.NormFloat64()
			}
			sb.Fractions(eps, c.on, pi)
			sb.Inverse(pi, c.on, back)
			sb.Fractions(back, c.on, pi2)
			// Fractions are recovered to rounding: the inverse and forward
			// incomplete-beta routines agree to ~1e-13 relative.
			for i := range pi {
				if math.Abs(pi[i]-pi2[i]) > 1e-10 {
					t.Errorf("case %d: π %v → ε %v → π %v", ci, pi, back, pi2)
					break
				}
			}
			// Active latents are recovered where the map is well
			// conditioned (fraction not vanishing to underflow).
			for i := 0; i < K-1; i++ {
				if !latentActive(c.on, i) {
					if back[i] != 0 {
						t.Errorf("case %d: inactive latent %d = %g", ci, i, back[i])
					}
					continue
				}
				// The latent is identifiable in floating point only when
				// the stick proportion φ_i = π_i/rest is not within ~1e-8
				// of 0 or 1 (a Beta(0.3, 0.1) quantile rounds to 1 already
				// for Φ(ε) ≈ 0.95).
				tail := 0.0
				for j := i + 1; j < K; j++ {
					tail += pi[j]
				}
				if p := pi[i] / (pi[i] + tail); p > 1e-8 && p < 1-1e-8 && math.Abs(back[i]-eps[i]) > 1e-6 {
					t.Errorf("case %d: latent %d: ε %g → %g", ci, i, eps[i], back[i])
				}
			}
		}
	}
}

// latentActive is the reference implementation's activity rule, written out
// independently of Layout.Active.
func latentActive(on []bool, i int) bool {
	if !on[i] {
		return false
	}
	for j := i + 1; j < len(on); j++ {
		if on[j] {
			return true
		}
	}
	return false
}

func TestStickBreakingVJP(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for ci, c := range dirichletCases {
		sb := StickBreaking{Alpha: c.alpha}
		K := len(c.alpha)
		eps := make([]float64, K-1)
		g := make([]float64, K)
		gEps := make([]float64, K-1)
		pp := make([]float64, K)
		pm := make([]float64, K)
		for s := 0; s < 30; s++ {
			for i := range eps {
				eps[i] = 1.5 * r.NormFloat64()
			}
			for i := range g {
				g[i] = r.NormFloat64()
			}
			for i := range gEps {
				gEps[i] = 0.25 // VJP must accumulate, not overwrite
			}
			sb.VJP(eps, c.on, g, gEps)
			for i := range eps {
				h := 1e-5
				e0 := eps[i]
				eps[i] = e0 + h
				sb.Fractions(eps, c.on, pp)
				eps[i] = e0 - h
				sb.Fractions(eps, c.on, pm)
				eps[i] = e0
				fd := 0.0
				for k := range g {
					fd += g[k] * (pp[k] - pm[k]) / (2 * h)
				}
				got := gEps[i] - 0.25
				// Central differences with h = 1e-5: truncation ~h²|f'''| ≲ 1e-9,
				// rounding of the incomplete-beta inverse (~1e-14) / h ≈ 1e-9.
				if math.Abs(got-fd) > 1e-6*math.Max(1, math.Abs(fd)) {
					t.Errorf("case %d latent %d: VJP %g, FD %g (ε=%v)", ci, i, got, fd, eps)
				}
				if !latentActive(c.on, i) && got != 0 {
					t.Errorf("case %d: inactive latent %d got gradient %g", ci, i, got)
				}
			}
		}
	}
}

func TestBijectionsDoNotAllocate(t *testing.T) {
	sb := StickBreaking{Alpha: []float64{3.5, 1, 0.3, 0.1}}
	eps := []float64{0.1, -0.2, 0.3}
	on := []bool{true, true, false, true}
	pi := make([]float64, 4)
	g := []float64{1, 2, 3, 4}
	ge := make([]float64, 3)
	allocs := testing.AllocsPerRun(100, func() {
		sb.Fractions(eps, on, pi)
		sb.VJP(eps, on, g, ge)
		sb.Inverse(pi, on, ge)
		Hemisphere(0.3, -0.4)
		HemisphereInv(1, 2)
		Interval(0.5, 0, 1)
	})
	if allocs != 0 {
		t.Errorf("bijections allocate %v times per call", allocs)
	}
}

func BenchmarkStickBreakingB3S(b *testing.B) {
	sb := StickBreaking{Alpha: []float64{3.5, 1, 0.3, 0.1}}
	eps := []float64{0.1, -0.2, 0.3}
	on := []bool{true, true, true, true}
	pi := make([]float64, 4)
	for b.Loop() {
		sb.Fractions(eps, on, pi)
	}
}

// TestInvBetaLower checks the Halley inverse of the regularised incomplete
// beta against its definition (residual of gonum's RegIncBeta) and against
// gonum's InvRegIncBeta over α, b ∈ [0.1, 32] and u across the lower half.
func TestInvBetaLower(t *testing.T) {
	params := []float64{0.1, 0.3, 0.5, 1, 1.3, 3.5, 10, 32}
	fracs := []float64{1e-12, 1e-9, 1e-6, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 1}
	for _, a := range params {
		for _, b := range params {
			lb := mathext.Lbeta(a, b)
			m := mathext.RegIncBeta(a, b, 0.5)
			for _, fr := range fracs {
				u := fr * m
				x := invBetaLower(a, b, u, lb)
				if !(x > 0 && x <= 0.5) {
					t.Fatalf("a=%g b=%g u=%g: x = %g outside (0, 1/2]", a, b, u, x)
				}
				// The residual is limited by RegIncBeta's own accuracy
				// (~1e-15 relative); 1e-13 leaves a margin of 100.
				if r := mathext.RegIncBeta(a, b, x) - u; math.Abs(r) > 1e-13*u {
					t.Errorf("a=%g b=%g u=%g: I(x) − u = %g", a, b, u, r)
				}
				// Against gonum where the quantile is well conditioned: a
				// relative error δ in u moves x by δ·u/(x·I'(x)); the bound
				// allows 1e-13 relative in u times that condition number.
				g := mathext.InvRegIncBeta(a, b, u)
				cond := u / (g * math.Exp((a-1)*math.Log(g)+(b-1)*math.Log1p(-g)-lb))
				if math.Abs(x-g) > 1e-13*cond*g+1e-300 {
					t.Errorf("a=%g b=%g u=%g: x = %.17g, gonum %.17g (cond %g)", a, b, u, x, g, cond)
				}
			}
		}
	}
}

func BenchmarkInvBetaLower(b *testing.B) {
	lb := mathext.Lbeta(0.3, 0.1)
	for b.Loop() {
		invBetaLower(0.3, 0.1, 0.01, lb)
	}
}
