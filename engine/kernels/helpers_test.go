package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// randn64 returns n standard normal values (float32-representable, so that
// float32 and float64 runs see identical inputs).
func randn64(r *rand.Rand, n int, sd float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(float32(r.NormFloat64() * sd))
	}
	return x
}

func to32(x []float64) []float32 {
	if x == nil {
		return nil
	}
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func clone64(x []float64) []float64 { return append([]float64(nil), x...) }

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// fdTol is the tolerance for float64 analytic gradients against central
// differences with step h = 1e-6·max(1, |x|): the truncation error is
// O(h²·f”') ≈ 1e-11 and the rounding error O(ε·|f|/h) ≈ 1e-16·100/1e-6 =
// 1e-8 for losses of size ≤ 100, so 1e-6 (relative to max(1, |g|)) leaves
// two orders of margin while any wrong term in a derivative is O(1).
const fdTol = 1e-6

// checkFD compares the accumulated analytic gradient (got − before) with
// central differences of loss with respect to x.
func checkFD(t *testing.T, name string, x []float64, loss func() float64, before, got []float64) {
	t.Helper()
	bad := 0
	for i := range x {
		old := x[i]
		h := 1e-6 * math.Max(1, math.Abs(old))
		x[i] = old + h
		fp := loss()
		x[i] = old - h
		fm := loss()
		x[i] = old
		num := (fp - fm) / (2 * h)
		ana := got[i] - before[i]
		if math.Abs(num-ana) > fdTol*math.Max(1, math.Abs(num)) {
			if bad < 5 {
				t.Errorf("%s[%d]: analytic %.10g, finite difference %.10g", name, i, ana, num)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d gradient entries wrong", name, bad, len(x))
	}
}

// checkClose compares a float32 kernel result with the float64 reference on
// the same (float32-representable) inputs. tol is relative to scale, the
// typical magnitude of the quantity (each test says why its tol holds).
func checkClose(t *testing.T, name string, got []float32, want []float64, tol, scale float64) {
	t.Helper()
	bad := 0
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.Abs(g-want[i]) > tol*(scale+math.Abs(want[i])) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g", name, i, g, want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d entries off", name, bad, len(want))
	}
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
