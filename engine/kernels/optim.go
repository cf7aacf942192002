package kernels

import "math"

// RAdamScalars are the float32 constants of one rectified RAdam step
// (engine/optim): the moment decays β1, 1−β1, β2, 1−β2, the step
// A = lr·r_t/(1−β1^t), C2 = 1/(1−β2^t), ε, and the EMA decay and its
// complement.
type RAdamScalars struct {
	B1, OmB1, B2, OmB2 float32
	A, C2, Eps         float32
	Dec, OmDec         float32
}

// RAdamRect applies the rectified RAdam step to the n = len(grad) elements
// of one tensor range whose unit index starts at u0 and cycles through
// len(scale) units (scale: the per-unit AGC factor):
//
//	g = grad·scale[u];  m = β1 m + (1−β1) g;  v = β2 v + (1−β2) g²
//	val −= A·m / (√(C2·v) + ε);  ema = dec·ema + (1−dec)·val
//
// in float32 (the gradient scaling in float64). Subnormal results are
// flushed to zero like every C kernel's.
func RAdamRect(scale []float64, u0 int, grad, val, m, v, ema []float32, k *RAdamScalars) {
	n := len(grad)
	radamRectImpl(scale, u0, grad, val[:n], m[:n], v[:n], ema[:n], k)
}

func radamRectRef(scale []float64, u0 int, grad, val, m, v, ema []float32, k *RAdamScalars) {
	u := u0
	for i, gi := range grad {
		g := float32(float64(gi) * scale[u])
		if u++; u == len(scale) {
			u = 0
		}
		mi := k.B1*m[i] + k.OmB1*g
		vi := k.B2*v[i] + k.OmB2*g*g
		m[i], v[i] = mi, vi
		w := val[i] - k.A*mi/(float32(math.Sqrt(float64(vi*k.C2)))+k.Eps)
		val[i] = w
		ema[i] = k.Dec*ema[i] + k.OmDec*w
	}
}

// SumSquares2 adds g[i]² to gacc[u] and w[i]² to wacc[u] in float64, with
// u = (u0 + i) mod len(gacc) (the unit-wise norms of AGC).
func SumSquares2(g, w []float32, gacc, wacc []float64, u0 int) {
	sumSquares2Impl(g, w[:len(g)], gacc, wacc[:len(gacc)], u0)
}

func sumSquares2Ref(g, w []float32, gacc, wacc []float64, u0 int) {
	u := u0
	for i, x := range g {
		gacc[u] += float64(x) * float64(x)
		wacc[u] += float64(w[i]) * float64(w[i])
		if u++; u == len(gacc) {
			u = 0
		}
	}
}
