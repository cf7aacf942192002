package dmri

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"gonum.org/v1/gonum/integrate/quad"
)

// gradedToZero integrates f over [0, b] with 20-point Gauss–Legendre on the
// pieces [b/2^{j+1}, b/2^j], j < 60, plus [0, b/2^60]: every piece spans a
// factor 2, so a peak of any width ≥ b·2^{−60} at 0 is resolved.
func gradedToZero(f func(float64) float64, b float64) float64 {
	var s kahan
	for j := 0; j < 60; j++ {
		hi := math.Ldexp(b, -j)
		s.add(quad.Fixed(f, hi/2, hi, 20, quad.Legendre{}, 0))
	}
	s.add(quad.Fixed(f, 0, math.Ldexp(b, -60), 20, quad.Legendre{}, 0))
	return s.sum
}

// TestWatsonNormaliser compares ₁F₁(½; 3/2; κ) = ∫₀¹ e^{κt²} dt (scaled by
// e^{−κ}: ∫₀¹ e^{−κ s(2−s)} ds with s = 1 − t) and E[(μ·n)²] = M'/M with
// graded Gauss–Legendre quadrature, across the series/asymptotic switch at
// κ = 40 and up to κ = 10⁹. The quadrature is converged to ~1e−16; the
// tolerance 2e−14 relative allows for the rounding of ~100 series terms.
func TestWatsonNormaliser(t *testing.T) {
	for _, k := range []float64{0, 1e-10, 1e-3, 0.5, 1, 3, 10, 25, 39.999, 40, 40.001, 60, 200, 1e3, 1e4, 1e6, 1e9} {
		m := gradedToZero(func(s float64) float64 { return math.Exp(-k * s * (2 - s)) }, 1)
		m2 := gradedToZero(func(s float64) float64 { return (1 - s) * (1 - s) * math.Exp(-k*s*(2-s)) }, 1)
		got, dlog := hyp1F1Half(k)
		if r := math.Abs(got-m) / m; r > 2e-14 {
			t.Errorf("κ=%g: e^{−κ}₁F₁ = %.17g, quadrature %.17g (rel %.2g)", k, got, m, r)
		}
		if r := math.Abs(dlog-m2/m) / (m2 / m); r > 2e-14 {
			t.Errorf("κ=%g: E[(μ·n)²] = %.17g, quadrature %.17g (rel %.2g)", k, dlog, m2/m, r)
		}
		// Dawson-function identity at moderate κ: ₁F₁ = √π erfi(√κ)/(2√κ)
		// = e^κ F(√κ)/√κ; check the κ → 0 and κ → ∞ limits 1 and e^κ/(2κ).
		if k == 0 && got != 1 {
			t.Errorf("₁F₁(½; 3/2; 0) = %v, want 1", got)
		}
		if k == 1e9 && math.Abs(got*2*k-1) > 1e-9 {
			t.Errorf("κ=1e9: 2κe^{−κ}₁F₁ = %v, want 1 + 1/(2κ) + …", got*2*k)
		}
		if lz := WatsonLogNormaliser(k); math.Abs(lz-(k+math.Log(4*math.Pi*m))) > 2e-14*math.Max(1, math.Abs(lz)) {
			t.Errorf("κ=%g: WatsonLogNormaliser %.17g", k, lz)
		}
	}
}

// sphereLogZ is an independent brute-force Bingham integral: pole along the
// eigenvector of the *largest* eigenvalue (the implementation puts it on the
// smallest), s = 1 − t graded towards the peak, and the trapezoidal rule
// with 512 points in φ (spectrally accurate for the periodic integrand,
// whose φ-bandwidth (1−t²)|λ₁−λ₂| stays below ~100 wherever the integrand
// is not negligible). Returns log Z and the moments E[n_i²].
func sphereLogZ(l [3]float64) (float64, [3]float64) {
	// Index of the largest eigenvalue is the pole.
	p := 0
	for i := 1; i < 3; i++ {
		if l[i] > l[p] {
			p = i
		}
	}
	a, b := (p+1)%3, (p+2)%3
	const nphi = 512
	// integrand returns e^{−λ_p}·(∫dφ of the density, and of it times n_p²,
	// n_a², n_b²) at s = 1 − t.
	integrand := func(s float64) [4]float64 {
		t := 1 - s
		r := s * (2 - s) // 1 − t²
		var sum [4]kahan
		for i := 0; i < nphi; i++ {
			ph := 2 * math.Pi * float64(i) / nphi
			c, sn := math.Cos(ph), math.Sin(ph)
			e := math.Exp(l[p]*(t*t-1) + r*(l[a]*c*c+l[b]*sn*sn))
			sum[0].add(e)
			sum[1].add(e * t * t)
			sum[2].add(e * r * c * c)
			sum[3].add(e * r * sn * sn)
		}
		var out [4]float64
		for k := range out {
			out[k] = sum[k].sum * 2 * math.Pi / nphi
		}
		return out
	}
	// Graded Gauss–Legendre in s on [2^{−j−1}, 2^{−j}], j < 48, and
	// [0, 2^{−48}] (peak widths here are ≥ 1e−7 ≫ 2^{−48}).
	var x, w [20]float64
	var tot [4]kahan
	for j := 0; j <= 48; j++ {
		hi := math.Ldexp(1, -j)
		lo := hi / 2
		if j == 48 {
			lo = 0
		}
		quad.Legendre{}.FixedLocations(x[:], w[:], lo, hi)
		for q := range x {
			v := integrand(x[q])
			for k := range v {
				tot[k].add(2 * w[q] * v[k])
			}
		}
	}
	z := tot[0].sum
	var m [3]float64
	m[p], m[a], m[b] = tot[1].sum/z, tot[2].sum/z, tot[3].sum/z
	return l[p] + math.Log(z), m
}

// TestBinghamIntegral checks binghamLogZ (40-node 1-D quadrature) against
// the 2-D brute force above for eigenvalue triples covering Watson
// (κ, 0, 0), girdles (0, 0, −κ), Bingham (κ, βκ, 0) and the matrices that
// the dispersed kernels produce (mixed signs), up to spreads of 10⁶.
// Tolerances: 1e−12 absolute in log Z (= relative in Z; plus the rounding
// of log Z ≈ λmax itself) and 1e−11 in the
// moments; both computations are converged far below that, the margin is
// for rounding in sums of ~10⁵ terms.
func TestBinghamIntegral(t *testing.T) {
	cases := [][3]float64{
		{0, 0, 0}, {1, 0, 0}, {0, 0, -1}, {0.3, -0.2, 0.1}, {5, -3, 2}, {16, 0, 0}, {64, 0, 0},
		{40, 20, 0}, {100, 99, 0}, {100, 0, -50}, {0, -40, -40}, {0, 0, -400}, {300, 150, 0},
		{2000, 1000, 0}, {1e4, 0, 0}, {1e4, 9.9e3, 0}, {1e5, 3e4, -20}, {1e6, 0, 0}, {1e6, 5e5, 0},
		{0, -1e6, -1e6 - 40}, {0.5, -1e6, -2e6},
	}
	for _, l := range cases {
		want, wm := sphereLogZ(l)
		got, m := binghamLogZ(l, true)
		// log Z ≈ λmax is up to 1e6: allow its rounding (4e−16·|log Z|) too.
		if math.Abs(got-want) > 1e-12+4e-16*math.Abs(want) {
			t.Errorf("λ=%v: log Z = %.16g, brute force %.16g (diff %.2g)", l, got, want, got-want)
		}
		for i := range m {
			if math.Abs(m[i]-wm[i]) > 1e-11 {
				t.Errorf("λ=%v: E[n_%d²] = %.15g, brute force %.15g", l, i, m[i], wm[i])
			}
		}
		if s := m[0] + m[1] + m[2]; math.Abs(s-1) > 1e-14 {
			t.Errorf("λ=%v: moments sum to %v", l, s)
		}
	}
	// Watson: the 1-D Bingham integral and the ₁F₁ normaliser agree.
	for _, k := range []float64{0.1, 3, 39, 41, 500, 1e6} {
		if d := BinghamLogNormaliser([3]float64{k, 0, 0}) - WatsonLogNormaliser(k); math.Abs(d) > 1e-13*math.Max(1, k) {
			t.Errorf("κ=%g: Bingham and Watson normalisers differ by %.3g", k, d)
		}
	}
}

// TestJacobi3 reconstructs random symmetric matrices from their eigen-
// decomposition; orthogonality and reconstruction to 1e−14·‖A‖.
func TestJacobi3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var a [3][3]float64
		scale := math.Pow(10, 6*r.Float64())
		for i := 0; i < 3; i++ {
			for j := i; j < 3; j++ {
				a[i][j] = scale * r.NormFloat64()
				a[j][i] = a[i][j]
			}
		}
		w, v := jacobi3(a)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				s, o := 0.0, 0.0
				for k := 0; k < 3; k++ {
					s += v[i][k] * w[k] * v[j][k]
					o += v[k][i] * v[k][j]
				}
				if math.Abs(s-a[i][j]) > 1e-14*scale*4 {
					t.Fatalf("reconstruction error %g at (%d,%d)", s-a[i][j], i, j)
				}
				if want := b2f(i == j); math.Abs(o-want) > 1e-14 {
					t.Fatalf("VᵀV[%d][%d] = %v", i, j, o)
				}
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// bruteConvolution is ∫ K(n) f(n) dn / ∫ f(n) dn on a fine sphere grid in
// the ODF frame (pole μ; s = 1 − μ·n by 20-point Gauss–Legendre on the
// pieces [2^{−j−1}, 2^{−j}], j < 48, and [0, 2^{−48}], graded towards the
// peak; 512-point trapezoid in the azimuth about μ from μ_β), with
// K(n) = e^{−b[d∥(g·n)² + d⊥(1−(g·n)²)]} and f(n) = exp(κ(μ·n)² +
// β(μ_β·n)²) unnormalised. Both are even in n, so the hemisphere μ·n ≥ 0
// gives the same ratio as the whole sphere.
func bruteConvolution(b float64, g, mu, muB [3]float64, dPar, dPerp, kappa, beta float64) float64 {
	nu := cross(mu, muB)
	const nphi = 512
	var x, w [20]float64
	var num, den kahan
	for j := 0; j <= 48; j++ {
		hi := math.Ldexp(1, -j)
		lo := hi / 2
		if j == 48 {
			lo = 0
		}
		quad.Legendre{}.FixedLocations(x[:], w[:], lo, hi)
		for q, s := range x {
			t := 1 - s
			r := math.Sqrt(s * (2 - s))
			for i := 0; i < nphi; i++ {
				ph := 2 * math.Pi * float64(i) / nphi
				c, sn := math.Cos(ph), math.Sin(ph)
				var n [3]float64
				for k := range n {
					n[k] = t*mu[k] + r*(c*muB[k]+sn*nu[k])
				}
				cb := r * c
				e := w[q] * math.Exp(kappa*(t*t-1)+beta*cb*cb)
				gn := dot(g, n)
				den.add(e)
				num.add(e * math.Exp(-b*(dPar*gn*gn+dPerp*(1-gn*gn))))
			}
		}
	}
	return num.sum / den.sum
}

// TestConvolutionQuadrature: the dispersed-kernel signals (exact Bingham-
// integral evaluation) equal brute-force quadrature of the defining
// spherical convolution on a fine sphere grid, for Watson and Bingham ODFs
// from nearly isotropic (κ = 0.05) to sharp (κ = 2000), b·d up to 40 and
// zeppelins with d⊥ > d∥. Tolerance 1e−11 relative: the brute force is
// converged to ~1e−14 and the 40-node 1-D rule to ~1e−13.
func TestConvolutionQuadrature(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	worst := 0.0
	for _, k := range []float64{0.05, 1, 8, 64, 2000} {
		for trial := 0; trial < 4; trial++ {
			mu := randUnit(r)
			muB := anyPerpendicular(mu)
			beta := 0.0
			if trial%2 == 1 {
				beta = r.Float64() * k
				th := r.Float64() * math.Pi
				nu := cross(mu, muB)
				for i := range muB {
					muB[i] = math.Cos(th)*muB[i] + math.Sin(th)*nu[i]
				}
			}
			g := randUnit(r)
			b := []float64{0, 1000, 3000, 4000}[trial]
			dPar := 0.01 * r.Float64()
			dPerp := 0.0
			if trial >= 2 {
				dPerp = 0.01 * r.Float64()
			}
			want := bruteConvolution(b, g, mu, muB, dPar, dPerp, k, beta)
			got := dispersedSignal(b, g, mu, muB, dPar, dPerp, k, beta)
			rel := math.Abs(got-want) / want
			worst = math.Max(worst, rel)
			if rel > 1e-11 {
				t.Errorf("κ=%g β=%g b=%g d∥=%g d⊥=%g: signal %.15g, brute force %.15g (rel %.2g)", k, beta, b, dPar, dPerp, got, want, rel)
			}
		}
	}
	t.Logf("largest relative deviation from sphere quadrature: %.3g", worst)
}

func randUnit(r *rand.Rand) [3]float64 {
	v := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	l := math.Sqrt(dot(v, v))
	return [3]float64{v[0] / l, v[1] / l, v[2] / l}
}

// convModel returns bszt-conv, a mask with only compartment k and Gaussian
// noise on, and the latent θ for natural parameters v.
func convModel(t *testing.T, k int, v map[string]float64) (*Model, []bool, []float64) {
	t.Helper()
	f := BSZTConv()
	m := make([]bool, len(f.comps))
	m[k] = true
	m[f.nc] = true
	theta, err := f.Latent(family.Params{Components: map[int]map[string]float64{k: v, f.nc: {"snr": 30}}}, m)
	if err != nil {
		t.Fatal(err)
	}
	return f, m, theta
}

func indexOf(c Compartment) int {
	for k, x := range BSZTConvCompartments {
		if x == c {
			return k
		}
	}
	return -1
}

// TestODILimits: through the bszt-conv family, a Watson stick with ODI → 0
// reproduces the plain stick (κ is capped at KappaMax = 10⁶; the deviation
// is O(b·d/κ), so the tolerance is 1e−4·… relative: here checked ≤ 5e−5,
// and it shrinks 100-fold from κ = 10⁴), and ODI = 1 (κ = 0) gives an
// isotropic signal equal to √π erf(√(bd))/(2√(bd)) (tolerance 1e−13).
func TestODILimits(t *testing.T) {
	des := HCPDesign()
	th, ph := 0.7, -2.1
	n := unit(th, ph)
	d := 0.0023
	kWS := indexOf(WatsonStick)
	out := make([]float64, des.N)
	devAt := func(odi float64) float64 {
		f, m, theta := convModel(t, kWS, map[string]float64{"d": d, "theta": th, "phi": ph, "odi": odi})
		f.Forward(des, theta, m, out)
		worst := 0.0
		for j := 0; j < des.N; j++ {
			r := des.Row(j)
			want := StickSignal(r[0], [3]float64{r[1], r[2], r[3]}, n, d)
			worst = math.Max(worst, math.Abs(out[j]-want))
		}
		return worst
	}
	d0 := devAt(1e-9)
	d4 := devAt(2 / math.Pi * math.Atan(1e-4)) // κ = 10⁴
	if d0 > 5e-5 || d4 < 50*d0 {
		t.Errorf("ODI→0: max |S_WS − S_stick| = %.3g at κ=1e6, %.3g at κ=1e4 (want ≤ 5e−5 and O(1/κ))", d0, d4)
	}
	t.Logf("ODI→0: max deviation from the stick %.3g (κ=1e6), %.3g (κ=1e4)", d0, d4)
	// ODI = 1: isotropic.
	for _, c := range []Compartment{WatsonStick, BinghamStick} {
		v := map[string]float64{"d": d, "theta": th, "phi": ph, "odi": 1}
		if c == BinghamStick {
			v["beta_frac"], v["psi"] = 0.7, 1.1
		}
		f, m, theta := convModel(t, indexOf(c), v)
		// Latent clips ODI to 1 − 1e−12 (κ ≈ 1.6e−12); set Φ(z) = 1 exactly.
		theta[f.layout.Blocks[indexOf(c)].Offset+c.kernelLatents()+2] = 40
		f.Forward(des, theta, m, out)
		for j := 0; j < des.N; j++ {
			a := des.Row(j)[0] * d
			want := 1.0
			if a > 0 {
				want = math.Sqrt(math.Pi) * math.Erf(math.Sqrt(a)) / (2 * math.Sqrt(a))
			}
			if math.Abs(out[j]-want) > 1e-13 {
				t.Errorf("%v ODI=1: measurement %d: %.16g, isotropic %.16g", c, j, out[j], want)
			}
		}
	}
	// Bingham with β = 0 is Watson.
	g := [3]float64{0.48, -0.6, 0.64}
	mu := unit(0.4, 0.3)
	for _, k := range []float64{0.2, 5, 300} {
		w := WatsonZeppelinSignal(2500, g, mu, 0.002, 0.0007, k)
		bg := BinghamZeppelinSignal(2500, g, mu, anyPerpendicular(mu), 0.002, 0.0007, k, 0)
		if math.Abs(w-bg) > 1e-13 {
			t.Errorf("κ=%g: Watson %.16g, Bingham(β=0) %.16g", k, w, bg)
		}
	}
}

// zhangWatsonStick is the intra-neurite signal of NODDI as published
// (Zhang et al. 2012, Eqs. 2–3 and the toolbox's SH evaluation): the Watson
// density and the stick kernel e^{−a x²} expanded in Legendre polynomials,
// ODF(x) = Σ c_l P_l(x), K(x) = Σ k_l P_l(x) with c_l, k_l =
// (2l+1)/2 ∫_{−1}^{1} (·) P_l(x) dx, combined by the Funk–Hecke theorem:
// S = Σ_{l even} 4π/(2l+1) c_l k_l P_l(μ·g). The coefficients are computed
// here by 200-point Gauss–Legendre quadrature and the series is summed to
// l = lmax; it shares no code with the implementation.
func zhangWatsonStick(a, kappa, cosMuG float64, lmax int) float64 {
	xs := make([]float64, 200)
	ws := make([]float64, 200)
	quad.Legendre{}.FixedLocations(xs, ws, -1, 1)
	norm := 0.0
	for i, x := range xs {
		norm += ws[i] * math.Exp(kappa*(x*x-1))
	}
	norm *= 2 * math.Pi // ∫_{S²} e^{κ((μ·n)²−1)} dn
	legendre := func(l int, x float64) float64 {
		p0, p1 := 1.0, x
		if l == 0 {
			return 1
		}
		for n := 1; n < l; n++ {
			p0, p1 = p1, ((2*float64(n)+1)*x*p1-float64(n)*p0)/float64(n+1)
		}
		return p1
	}
	s := 0.0
	for l := 0; l <= lmax; l += 2 {
		var cl, kl float64
		for i, x := range xs {
			pl := legendre(l, x)
			cl += ws[i] * math.Exp(kappa*(x*x-1)) / norm * pl
			kl += ws[i] * math.Exp(-a*x*x) * pl
		}
		cl *= float64(2*l+1) / 2
		kl *= float64(2*l+1) / 2
		s += 4 * math.Pi / float64(2*l+1) * cl * kl * legendre(l, cosMuG)
	}
	return s
}

// TestNODDIZhang compares the NODDI-Watson compartment of bszt-conv with
// the published formula evaluated independently (zhangWatsonStick) at a
// few parameter points: S = f·A_ic + (1−f)·A_ec with
// A_ic = Watson-dispersed stick(λ∥) and the extra-neurite zeppelin
// dispersed by the same ODF, A_ec = e^{−bλ⊥}·(Watson-dispersed stick with
// diffusivity λ∥ − λ⊥) — the paper's (and dmipy's) convolved zeppelin.
// Series to l = 60: the product c_l k_l then decays below 1e−15 for
// κ ≤ 16 and b·λ∥ ≤ 10. Tolerance 1e−12 absolute.
func TestNODDIZhang(t *testing.T) {
	des := UKBDesign()
	kN := indexOf(NODDIWatson)
	out := make([]float64, des.N)
	for _, pt := range []struct{ f, dpar, dperp, th, ph, odi float64 }{
		{0.6, 0.0017, 0.0005, 0.5, 1.0, 0.3},
		{0.3, 0.0025, 0.0012, 1.3, -0.4, 0.08},
		{0.9, 0.001, 0.0002, 0.1, 2.8, 0.7},
	} {
		f, m, theta := convModel(t, kN, map[string]float64{"f": pt.f, "d_par": pt.dpar, "d_perp": pt.dperp,
			"theta": pt.th, "phi": pt.ph, "odi": pt.odi})
		f.Forward(des, theta, m, out)
		kappa := 1 / math.Tan(pt.odi*math.Pi/2)
		mu := unit(pt.th, pt.ph)
		for j := 0; j < des.N; j += 7 {
			r := des.Row(j)
			b := r[0]
			c := dot(mu, [3]float64{r[1], r[2], r[3]})
			aic := zhangWatsonStick(b*pt.dpar, kappa, c, 60)
			aec := math.Exp(-b*pt.dperp) * zhangWatsonStick(b*(pt.dpar-pt.dperp), kappa, c, 60)
			want := pt.f*aic + (1-pt.f)*aec
			if math.Abs(out[j]-want) > 1e-12 {
				t.Errorf("NODDI %+v b=%g: %.15g, Zhang formula %.15g", pt, b, out[j], want)
			}
		}
	}
	// SH truncation of the reference implementation (order 14): how far the
	// truncated series is from the exact convolution for a sharp case.
	exact := WatsonStickSignal(3000, [3]float64{0, 0, 1}, unit(0.2, 0), 0.003, 100)
	trunc := zhangWatsonStick(9, 100, math.Cos(0.2), 14)
	t.Logf("κ=100, b·d=9: exact %.6f, Legendre/SH order 14 %.6f (the reference's truncation)", exact, trunc)
}

// TestSANDIComposition checks the SANDI and NODDI compartments against
// their definitions from the single dispersed kernels (exported functions),
// Bingham case, tolerance 1e−14.
func TestSANDIComposition(t *testing.T) {
	des := refDesign()
	out := make([]float64, des.N)
	th, ph, psi, odi, bf := 0.9, 0.4, 2.0, 0.25, 0.6
	kappa := 1 / math.Tan(odi*math.Pi/2)
	mu := unit(th, ph)
	muB := binghamAxis(th, ph, psi)
	fin, fec, dpi, dpe, dpa := 0.4, 0.3, 0.0021, 0.0006, 0.0018
	f, m, theta := convModel(t, indexOf(SANDIBingham), map[string]float64{"f_in": fin, "f_ec": fec,
		"d_par_in": dpi, "d_perp_ex": dpe, "d_par_ex": dpa, "theta": th, "phi": ph, "odi": odi, "beta_frac": bf, "psi": psi})
	f.Forward(des, theta, m, out)
	for j := 0; j < des.N; j++ {
		r := des.Row(j)
		g := [3]float64{r[1], r[2], r[3]}
		want := (1-fec)*(fin*BinghamStickSignal(r[0], g, mu, muB, dpi, kappa, bf*kappa)+(1-fin)) +
			fec*BinghamZeppelinSignal(r[0], g, mu, muB, dpa, dpe, kappa, bf*kappa)
		if math.Abs(out[j]-want) > 1e-14 {
			t.Errorf("SANDI-Bingham measurement %d: %.16g, from kernels %.16g", j, out[j], want)
		}
	}
}

// TestConvGradient checks the analytic gradient of every dispersed
// compartment alone and together with others (both noise models) against
// Richardson central differences, as TestLogLikelihoodGradient does for the
// whole family; tolerance 1e−6 relative with floor 1 (see there).
func TestConvGradient(t *testing.T) {
	f := BSZTConv()
	r := rand.New(rand.NewPCG(9, 10))
	dmax := f.layout.DMax
	active := make([]bool, dmax)
	worst := 0.0
	for k := 10; k < f.nc; k++ {
		for trial := 0; trial < 2; trial++ {
			des := refDesign()
			m := make([]bool, len(f.comps))
			m[k] = true
			if trial == 1 {
				des = UKBDesign()
				m[0], m[1+r.IntN(9)], m[10+r.IntN(9)] = true, true, true
			}
			m[f.nc+trial] = true
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
			f.LogLikelihood(des, x, theta, m, grad)
			eval := func(i int, h float64) float64 {
				th := append([]float64(nil), theta...)
				th[i] += h
				return f.LogLikelihood(des, x, th, m, nil)
			}
			for i := 0; i < dmax; i++ {
				if !active[i] {
					continue
				}
				const h = 1e-3
				d1 := (eval(i, h) - eval(i, -h)) / (2 * h)
				d2 := (eval(i, h/2) - eval(i, -h/2)) / h
				fd := (4*d2 - d1) / 3
				rel := math.Abs(grad[i]-fd) / math.Max(math.Abs(fd), 1)
				worst = math.Max(worst, rel)
				if rel > 1e-6 {
					t.Errorf("%s %s: ∂/∂θ[%d] analytic %.10g, finite difference %.10g", f.comps[k].Name, family.MaskString(m), i, grad[i], fd)
				}
			}
		}
	}
	t.Logf("largest relative gradient error: %.3g", worst)
}

// TestI01e compares the scaled Bessel functions used by the Bingham
// integral (Chebyshev pieces below 32, asymptotic series above) with
// trapezoidal quadrature (besselQuad, accurate to a few 1e−16) on a dense
// set of arguments including every piece boundary. Tolerance 1e−14
// relative (I₁: relative to I₀, since I₁ → 0 at x = 0 and only enters the
// Bingham moments next to I₀): the
// Chebyshev coefficients (a 15-point cosine sum) and the Clenshaw
// recurrence each lose a few ulps.
func TestI01e(t *testing.T) {
	worst := 0.0
	for x := 0.0; x < 200; x += 0.1 + x/25 {
		for _, v := range []float64{x, math.Nextafter(x, 0), x + 0.031} {
			q0, q1 := besselQuad(v)
			a, b := i01e(v)
			e0 := math.Abs(a-q0) / q0
			e1 := math.Abs(b-q1) / q0
			worst = math.Max(worst, math.Max(e0, e1))
			if e0 > 1e-14 || e1 > 1e-14 {
				t.Errorf("x=%v: I0e %.17g (quad %.17g), I1e %.17g (quad %.17g)", v, a, q0, b, q1)
			}
		}
	}
	t.Logf("largest relative error: %.3g", worst)
}

// TestBSZTConvLayout pins the bszt-conv layout against the paper and
// the reference implementation: C = 21 (19 compartments + 2 noise), d_max = 114 =
// 18 fraction latents + 40 (BSZT) + 0 (Dot) + 4+5+6+7+6+8+8+10 + 2 noise,
// and the dimension-penalised prior's per-compartment dimensions.
func TestBSZTConvLayout(t *testing.T) {
	f := BSZTConv()
	if len(f.comps) != 21 || f.layout.DMax != 114 || f.layout.FractionLatents() != 18 {
		t.Fatalf("C = %d, d_max = %d, fraction latents %d", len(f.comps), f.layout.DMax, f.layout.FractionLatents())
	}
	want := []int{1, 3, 3, 3, 4, 4, 4, 6, 6, 6, 0, 4, 5, 6, 7, 6, 8, 8, 10}
	p := f.MaskPrior().(family.DimPenalisedPrior)
	for k, d := range want {
		if p.Dims[k] != d || f.layout.Blocks[k].Size != d {
			t.Errorf("component %d (%s): prior dim %d, block %d, want %d", k, f.comps[k].Name, p.Dims[k], f.layout.Blocks[k].Size, d)
		}
	}
	if o := f.layout.Blocks[indexOf(SANDIBingham)].Offset; o != 102 {
		t.Errorf("SANDIBingham block at %d, want 102", o)
	}
	// Dot has no parameters: its prior probability is p0 = ½ for every λ.
	if q := p.Prob(indexOf(Dot), 0); q != 0.5 {
		t.Errorf("P(Dot on | λ=0) = %v", q)
	}
}

// TestWatsonEigen compares the closed-form eigenvalues of the Watson kernel
// matrix with Jacobi's, for a of both signs and κ up to 10⁶; tolerance
// 1e−15·(|a| + κ) absolute plus 1e−13 relative on the smallest-magnitude
// root, which the closed form keeps accurate by computing it as det/λ.
func TestWatsonEigen(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	sorted := func(w [3]float64) [3]float64 {
		for i := 0; i < 3; i++ {
			for j := i + 1; j < 3; j++ {
				if w[j] > w[i] {
					w[i], w[j] = w[j], w[i]
				}
			}
		}
		return w
	}
	for trial := 0; trial < 500; trial++ {
		a := 40 * (2*r.Float64() - 0.3)
		kappa := math.Pow(10, 6*r.Float64()-1)
		g := randUnit(r)
		B := [3][3]float64{}
		diag := [3]float64{0, -kappa, -kappa}
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				B[i][j] = -a * g[i] * g[j]
			}
			B[i][i] += diag[i]
		}
		wj, _ := jacobi3(B)
		want := sorted(wj)
		got := sorted(watsonEigen(a, kappa, g[0]))
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-15*(math.Abs(a)+kappa)*4+1e-13*math.Abs(want[i]) {
				t.Fatalf("a=%g κ=%g g0=%g: eigenvalues %v, Jacobi %v", a, kappa, g[0], got, want)
			}
		}
	}
}

// TestConvLatentErrors: out-of-support natural parameters of the dispersed
// compartments are errors that name the parameter.
func TestConvLatentErrors(t *testing.T) {
	f := BSZTConv()
	for _, tc := range []struct {
		c    Compartment
		v    map[string]float64
		want string
	}{
		{WatsonZeppelin, map[string]float64{"d_par": 0.002, "d_perp": 0.0025, "theta": 1, "phi": 0, "odi": 0.5}, "d_perp"},
		{WatsonZeppelin, map[string]float64{"d_par": 0.004, "d_perp": 0.001, "theta": 1, "phi": 0, "odi": 0.5}, "d_par"},
		{WatsonStick, map[string]float64{"d": 0.002, "theta": 1, "phi": 0, "odi": 1.5}, "odi"},
		{BinghamStick, map[string]float64{"d": 0.002, "theta": 1, "phi": 0, "odi": 0.5, "beta_frac": -0.1, "psi": 1}, "beta_frac"},
		{BinghamStick, map[string]float64{"d": 0.002, "theta": 1, "phi": 0, "odi": 0.5, "beta_frac": 0.1, "psi": math.NaN()}, "psi"},
		{NODDIWatson, map[string]float64{"f": 1.2, "d_par": 0.002, "d_perp": 0.001, "theta": 1, "phi": 0, "odi": 0.5}, "f"},
		{SANDIWatson, map[string]float64{"f_in": 0.5, "f_ec": 0.5, "d_par_in": 0.002, "d_perp_ex": 0.001, "theta": 1, "phi": 0, "odi": 0.5}, "d_par_ex"},
	} {
		k := indexOf(tc.c)
		m := make([]bool, len(f.comps))
		m[k], m[f.nc] = true, true
		_, err := f.Latent(family.Params{Components: map[int]map[string]float64{k: tc.v, f.nc: {"snr": 10}}}, m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %q", tc.c, tc.v, err, tc.want)
		}
	}
	// A lower-hemisphere Bingham axis is flipped with ψ adjusted so that
	// the second axis (and so the signal) is unchanged. At the antipode
	// (π−θ, φ+π), e_θ is the same vector and e_φ changes sign, so the same
	// second axis μ_β = cos ψ e_θ + sin ψ e_φ has angle π − ψ there.
	k := indexOf(BinghamStick)
	m := make([]bool, len(f.comps))
	m[k], m[f.nc] = true, true
	up := map[string]float64{"d": 0.002, "theta": 0.8, "phi": 0.5, "odi": 0.2, "beta_frac": 0.7, "psi": 0.9}
	down := map[string]float64{"d": 0.002, "theta": math.Pi - 0.8, "phi": 0.5 + math.Pi, "odi": 0.2, "beta_frac": 0.7, "psi": math.Pi - 0.9}
	des := refDesign()
	x1, x2 := make([]float64, des.N), make([]float64, des.N)
	for i, v := range []map[string]float64{up, down} {
		th, err := f.Latent(family.Params{Components: map[int]map[string]float64{k: v, f.nc: {"snr": 10}}}, m)
		if err != nil {
			t.Fatal(err)
		}
		f.Forward(des, th, m, [][]float64{x1, x2}[i])
	}
	for j := range x1 {
		if math.Abs(x1[j]-x2[j]) > 1e-12 {
			t.Errorf("measurement %d: %v (upper) vs %v (flipped)", j, x1[j], x2[j])
		}
	}
}

// TestConvExtremeLatents: latents far in the tails (ODI → 0 or 1, β_frac
// → 1, zero diffusivities, directions at the pole) give finite signals in
// [0, 1], finite likelihoods and gradients for every dispersed compartment.
func TestConvExtremeLatents(t *testing.T) {
	f := BSZTConv()
	r := rand.New(rand.NewPCG(30, 31))
	des := UKBDesign()
	x := make([]float64, des.N)
	out := make([]float64, des.N)
	grad := make([]float64, f.layout.DMax)
	theta := make([]float64, f.layout.DMax)
	m := make([]bool, len(f.comps))
	for trial := 0; trial < 200; trial++ {
		for i := range theta {
			theta[i] = []float64{-40, -9, 0, 9, 40, r.NormFloat64() * 6}[r.IntN(6)]
		}
		for k := range m {
			m[k] = k >= 10 && k < f.nc && r.IntN(3) == 0
		}
		m[f.nc+trial%2] = true
		f.Forward(des, theta, m, out)
		for j, v := range out {
			if !(v >= -1e-15 && v <= 1+1e-12) {
				t.Fatalf("%s θ=%v: signal %v at %d", family.MaskString(m), theta, v, j)
			}
			x[j] = v + 0.01
		}
		ll := f.LogLikelihood(des, x, theta, m, grad)
		if math.IsNaN(ll) || math.IsInf(ll, 0) {
			t.Fatalf("%s: log-likelihood %v", family.MaskString(m), ll)
		}
		for i, g := range grad {
			if math.IsNaN(g) || math.IsInf(g, 0) {
				t.Fatalf("%s θ=%v: gradient[%d] = %v", family.MaskString(m), theta, i, g)
			}
		}
	}
}
