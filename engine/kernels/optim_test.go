package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRAdamRectMatchesReference compares the RAdam kernel and the AGC
// norms with the plain Go reference on a range that starts mid-row (u0 =
// 5 of 13 units) and ends mid-row. The kernel may contract a·b + c into a
// fused multiply-add, so each float32 result may differ by a few ulp:
// tolerance 4e-6 relative (plus 1e-30 absolute); the float64 norms to 1e-12.
func TestRAdamRectMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const units, n, u0 = 13, 13*7 + 4, 5
	scale := make([]float64, units)
	for i := range scale {
		scale[i] = 0.2 + r.Float64()
	}
	rnd := func(s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(s * r.NormFloat64())
		}
		return x
	}
	grad, val, m, ema := rnd(1), rnd(1), rnd(0.1), rnd(1)
	v := rnd(0.1)
	for i := range v {
		v[i] *= v[i]
	}
	k := &RAdamScalars{B1: 0.9, OmB1: 0.1, B2: 0.999, OmB2: 0.001, A: 1e-3 * 1.3, C2: 1 / (1 - 0.999*0.999), Eps: 1e-8, Dec: 0.999, OmDec: 0.001}
	wv, wm, wvv, we := slices.Clone(val), slices.Clone(m), slices.Clone(v), slices.Clone(ema)
	radamRectRef(scale, u0, grad, wv, wm, wvv, we, k)
	RAdamRect(scale, u0, grad, val, m, v, ema, k)
	for name, p := range map[string][2][]float32{"val": {val, wv}, "m": {m, wm}, "v": {v, wvv}, "ema": {ema, we}} {
		for i := range p[0] {
			if d := math.Abs(float64(p[0][i] - p[1][i])); d > 4e-6*math.Abs(float64(p[1][i]))+1e-30 {
				t.Fatalf("%s[%d]: kernel %v, reference %v", name, i, p[0][i], p[1][i])
			}
		}
	}
	ga, wa := make([]float64, units), make([]float64, units)
	gr, wr := make([]float64, units), make([]float64, units)
	SumSquares2(grad, val, ga, wa, u0)
	sumSquares2Ref(grad, val, gr, wr, u0)
	for u := range ga {
		if math.Abs(ga[u]-gr[u]) > 1e-12*gr[u] || math.Abs(wa[u]-wr[u]) > 1e-12*wr[u] {
			t.Fatalf("unit %d: norms %v %v, reference %v %v", u, ga[u], wa[u], gr[u], wr[u])
		}
	}
}
