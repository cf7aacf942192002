package dmri

import (
	"math"
	"testing"
)

// besselQuad evaluates e^{−x}I₀(x) = (1/π)∫₀^π e^{x(cos t − 1)} dt and
// e^{−x}I₁(x) = (1/π)∫₀^π e^{x(cos t − 1)} cos t dt by the trapezoidal rule.
// The integrands are smooth, even and 2π-periodic, so the rule converges
// geometrically; with n = 40,000 intervals the discretisation error is far
// below double precision for every x ≤ 1e5 tested (the peak at t = 0 has
// width 1/√x ≥ 3e−3, i.e. > 40 nodes). The sums are compensated (Kahan),
// so what remains is the ~1-ulp error of each exp/cos, averaging to a few
// 1e−16 relative.
func besselQuad(x float64) (i0e, i1e float64) {
	const n = 40000
	h := math.Pi / n
	var s0, s1 kahan
	for i := 0; i <= n; i++ {
		t := float64(i) * h
		w := 1.0
		if i == 0 || i == n {
			w = 0.5
		}
		// cos t − 1 = −2 sin²(t/2) without cancellation near t = 0.
		st := math.Sin(t / 2)
		e := w * math.Exp(-2*x*st*st)
		s0.add(e)
		s1.add(e * math.Cos(t))
	}
	return s0.sum * h / math.Pi, s1.sum * h / math.Pi
}

// kahan is compensated summation.
type kahan struct{ sum, c float64 }

func (k *kahan) add(v float64) {
	y := v - k.c
	t := k.sum + y
	k.c = (t - k.sum) - y
	k.sum = t
}

func TestLogI0AgainstQuadrature(t *testing.T) {
	xs := []float64{0, 1e-8, 0.01, 0.5, 1, 2.5, 5, 10, 15, 19.999, 20, 20.001, 25, 40, 100, 713, 1000, 5e3, 1e5}
	for _, x := range xs {
		q0, q1 := besselQuad(x)
		// The error of log I₀ is the relative error of I₀ plus the rounding
		// of a number of size |log I₀| (≈ x for large x). The target is
		// 1e−12 relative in I₀; the quadrature is good to ~1e−15, so 1e−13
		// leaves room only for the implementation's own error.
		want0 := x + math.Log(q0)
		if d := math.Abs(LogI0(x) - want0); d > 1e-13+2e-16*math.Abs(want0) {
			t.Errorf("LogI0(%v) = %.17g, quadrature %.17g (difference %.3g)", x, LogI0(x), want0, d)
		}
		if e := math.Exp(logI0e(x)) / q0; math.Abs(e-1) > 1e-13 {
			t.Errorf("logI0e(%v): relative error = %.3g", x, e-1)
		}
		if math.Abs(LogI0(-x)-LogI0(x)) != 0 {
			t.Errorf("LogI0 is not even at %v", x)
		}
		// I₁/I₀: the I₁ quadrature has an oscillating integrand, so its
		// absolute error is ~1e−16 against an I₁e of order min(x/2, 1/√x);
		// require 1e−12 relative where that is meaningful, 1e−14 absolute
		// below.
		r := BesselRatio(x)
		want := q1 / q0
		if math.Abs(r-want) > 1e-12*math.Abs(want)+1e-14 {
			t.Errorf("BesselRatio(%v) = %.17g, quadrature %.17g", x, r, want)
		}
	}
	if !math.IsInf(LogI0(math.Inf(1)), 1) && !math.IsNaN(LogI0(math.Inf(1))) {
		t.Errorf("LogI0(Inf) = %v", LogI0(math.Inf(1)))
	}
	if v := LogI0(1e300); math.IsInf(v, 0) || math.IsNaN(v) || math.Abs(v/1e300-1) > 1e-15 {
		t.Errorf("LogI0(1e300) = %v, want ≈ 1e300 without overflow", v)
	}
}

// TestBesselRatioIsDerivative checks I₁/I₀ = d log I₀/dx by central
// differences (h = 1e−5·max(1,x): truncation ~h²·|f”'| ≲ 1e−10, rounding
// ~ε·|log I₀|/h ≲ 1e−10 relative), and the continuity of both branches at
// the switch point.
func TestBesselRatioIsDerivative(t *testing.T) {
	for _, x := range []float64{0.3, 3, 12, 19.99, 20.01, 35, 300} {
		h := 1e-5 * math.Max(1, x)
		fd := (LogI0(x+h) - LogI0(x-h)) / (2 * h)
		if r := BesselRatio(x); math.Abs(r-fd) > 1e-8*math.Abs(r) {
			t.Errorf("BesselRatio(%v) = %.15g, finite difference %.15g", x, r, fd)
		}
	}
	lo, hi := math.Nextafter(besselSwitch, 0), math.Nextafter(besselSwitch, 100)
	if d := LogI0(hi) - LogI0(lo); math.Abs(d) > 1e-14 {
		t.Errorf("LogI0 jumps by %.3g at the branch switch", d)
	}
	if d := BesselRatio(hi) - BesselRatio(lo); math.Abs(d) > 1e-14 {
		t.Errorf("BesselRatio jumps by %.3g at the branch switch", d)
	}
}
