package dmri

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
)

// glIntegrate is composite 20-point Gauss–Legendre quadrature over
// [a, b] split into pieces equal parts. For integrands analytic on each
// piece its error is negligible next to double rounding.
func glIntegrate(f func(float64) float64, a, b float64, pieces int) float64 {
	var s kahan
	h := (b - a) / float64(pieces)
	for i := 0; i < pieces; i++ {
		s.add(quad.Fixed(f, a+float64(i)*h, a+float64(i+1)*h, 20, quad.Legendre{}, 0))
	}
	return s.sum
}

// glGraded integrates f over [0, b] when f has an algebraic singularity
// (like v^{k−1}) at 0: the pieces [b/2^{j+1}, b/2^j], j < 80, each span a
// factor 2, so the singularity stays a piece-length away and 20-point
// Gauss–Legendre converges geometrically on every piece. The rest
// [0, b/2^80] is left to the caller.
func glGraded(f func(float64) float64, b float64) float64 {
	var s kahan
	for j := 0; j < 80; j++ {
		hi := math.Ldexp(b, -j)
		s.add(quad.Fixed(f, hi/2, hi, 20, quad.Legendre{}, 0))
	}
	return s.sum
}

func unit(theta, phi float64) [3]float64 {
	return [3]float64{math.Sin(theta) * math.Cos(phi), math.Sin(theta) * math.Sin(phi), math.Cos(theta)}
}

// TestCompartmentClosedForms evaluates each compartment at hand-picked
// geometries whose signal is known in closed form. Tolerance 1e−15
// relative: both sides are one exp of the same product up to rounding.
func TestCompartmentClosedForms(t *testing.T) {
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-15*want {
			t.Errorf("%s = %.17g, want %.17g", name, got, want)
		}
	}
	check("Ball(b=1000, d=3e-3)", BallSignal(1000, 3e-3), math.Exp(-3))
	check("Ball(b=0)", BallSignal(0, 5e-3), 1)
	// Stick along (cos60°, sin60°, 0), gradient along x: g·n = 1/2.
	n := [3]float64{0.5, math.Sqrt(3) / 2, 0}
	check("Stick 60°", StickSignal(2000, [3]float64{1, 0, 0}, n, 2e-3), math.Exp(-2000*2e-3*0.25))
	check("Stick ⊥", StickSignal(3000, [3]float64{0, 0, 1}, n, 2e-3), 1)
	check("Stick ∥", StickSignal(3000, [3]float64{0, 0, 1}, [3]float64{0, 0, 1}, 2e-3), math.Exp(-6))
	// Zeppelin along z, gradient at 30° from z: (g·n)² = 3/4, 1 − (g·n)² = 1/4.
	g := [3]float64{0, 0.5, math.Sqrt(3) / 2}
	check("Zeppelin 30°", ZeppelinSignal(1000, g, [3]float64{0, 0, 1}, 2e-3, 0.4e-3), math.Exp(-1000*(2e-3*0.75+0.4e-3*0.25)))
	// Tensor built as R diag(λ) Rᵀ from an explicit rotation about z by 40°:
	// gᵀDg = Σ λ_i (r_i·g)² with r_i the columns of R.
	c, s := math.Cos(0.7), math.Sin(0.7)
	r := [3][3]float64{{c, s, 0}, {-s, c, 0}, {0, 0, 1}} // rows = eigenvectors
	lam := [3]float64{1.7e-3, 0.3e-3, 0.2e-3}
	var D [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 3; k++ {
				D[i][j] += lam[k] * r[k][i] * r[k][j]
			}
		}
	}
	g2 := unit(1.1, -0.4)
	want := 0.0
	for k := 0; k < 3; k++ {
		p := r[k][0]*g2[0] + r[k][1]*g2[1] + r[k][2]*g2[2]
		want += lam[k] * p * p
	}
	if got := TensorSignal(2500, g2, D); math.Abs(got-math.Exp(-2500*want)) > 1e-14 {
		t.Errorf("Tensor = %.17g, want %.17g", got, math.Exp(-2500*want))
	}
	// A zeppelin is the tensor d⊥I + (d∥−d⊥)nnᵀ.
	nz := unit(0.9, 2.2)
	var Dz [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			Dz[i][j] = (1.5e-3 - 0.5e-3) * nz[i] * nz[j]
		}
		Dz[i][i] += 0.5e-3
	}
	if a, b := ZeppelinSignal(3000, g2, nz, 1.5e-3, 0.5e-3), TensorSignal(3000, g2, Dz); math.Abs(a-b) > 1e-14 {
		t.Errorf("Zeppelin %.17g ≠ equivalent tensor %.17g", a, b)
	}
}

// TestGammaSignalQuadrature integrates exp(−b c D) against the Gamma density
// of D with mean d and standard deviation s numerically and compares with
// GammaSignal's closed form. In the scaled variable v = D/θ (θ = s²/d,
// shape k = d²/s²) the integrand is v^{k−1}e^{−(1+bcθ)v}/Γ(k), integrated
// on a mesh graded towards the algebraic singularity at 0 (glGraded) and
// with equal pieces around the mode. The quadrature is accurate to ~1e−14,
// so the tolerance is 1e−12 relative.
func TestGammaSignalQuadrature(t *testing.T) {
	cases := []struct{ d, s float64 }{
		{2e-3, 1e-3}, {1e-3, 4e-3}, {3e-3, 3e-3}, {2.5e-3, 1e-4}, {9e-3, 4.9e-3}, {4e-4, 2e-4},
	}
	for _, cs := range cases {
		for _, bc := range []struct{ b, c float64 }{{1000, 1}, {3000, 1}, {2000, 0.3}, {4000, 0.01}} {
			k := cs.d * cs.d / (cs.s * cs.s)
			th := cs.s * cs.s / cs.d
			a := 1 + bc.b*bc.c*th
			lg, _ := math.Lgamma(k)
			f := func(v float64) float64 {
				if v <= 0 {
					return 0
				}
				return math.Exp((k-1)*math.Log(v) - a*v - lg)
			}
			// The integrand is negligible (< e^{−700}) beyond hi; around the
			// mode (k−1)/a it has width √k/a.
			hi := (k + 60*math.Sqrt(k) + 750) / a
			split := math.Max((k-1)/a-60*math.Sqrt(k)/a, hi/64)
			num := glGraded(f, split) + glIntegrate(f, split, hi, 400)
			// On [0, ε], ε = split/2^80 ≈ 1e−24·split, e^{−av} = 1 − O(1e−24),
			// so that piece is ∫₀^ε v^{k−1}dv/Γ(k) = ε^k/(kΓ(k)).
			num += math.Exp(k*math.Log(math.Ldexp(split, -80))-lg) / k
			got := GammaSignal(bc.b, bc.c, cs.d, cs.s)
			if math.Abs(got-num) > 1e-12*num {
				t.Errorf("GammaSignal(b=%v, c=%v, d=%v, s=%v) = %.15g, quadrature %.15g", bc.b, bc.c, cs.d, cs.s, got, num)
			}
		}
	}
	// s → 0 recovers the mono-exponential; d = 0 is no attenuation.
	if got, want := GammaSignal(2000, 0.7, 2e-3, 1e-12), math.Exp(-2000*0.7*2e-3); math.Abs(got-want) > 1e-15 {
		t.Errorf("GammaSignal with s→0 = %.17g, want %.17g", got, want)
	}
	if got := GammaSignal(2000, 1, 0, 1e-3); got != 1 {
		t.Errorf("GammaSignal with d=0 = %v, want 1", got)
	}
}

// TestGammaExponentDerivatives compares the analytic partial derivatives of
// the multi-shell exponent with Richardson-extrapolated central differences
// (truncation O(h⁴) ≈ 1e−16 relative at h = 1e−4 of the value; rounding
// error ≈ 4ε·E/h, which dominates when E hardly depends on the parameter),
// across the series/log1p switch at t = 1e−3.
func TestGammaExponentDerivatives(t *testing.T) {
	const eps = 0x1p-52
	for _, p := range [][4]float64{
		{1000, 1, 2e-3, 1e-3}, {3000, 0.4, 1e-3, 4e-3}, {2000, 1, 5e-3, 1e-5}, {1000, 0.9, 1e-3, 3e-5}, {3000, 0.05, 8e-3, 2e-3},
	} {
		e, dd, ds, dc := gammaExponent(p[0], p[1], p[2], p[3])
		fd := func(i int) (float64, float64) {
			f := func(h float64) float64 {
				q := p
				q[i] += h
				v, _, _, _ := gammaExponent(q[0], q[1], q[2], q[3])
				return v
			}
			h := 1e-4 * p[i]
			d1 := (f(h) - f(-h)) / (2 * h)
			d2 := (f(h/2) - f(-h/2)) / h
			return (4*d2 - d1) / 3, h
		}
		for i, an := range map[int]float64{1: dc, 2: dd, 3: ds} {
			num, h := fd(i)
			if math.Abs(an-num) > 1e-8*math.Abs(num)+4*eps*e/h {
				t.Errorf("∂E/∂p[%d] at %v: analytic %.12g, numeric %.12g", i, p, an, num)
			}
		}
	}
}
