package kernels

import "testing"

// The tests in this file check every hand-derived backward of the reference
// (float64) implementations against central finite differences of the loss
// L = Σ w·y with a random cotangent w. Gradients are accumulated on top of
// random initial values to check the += convention.

func TestLayerNormGradFD(t *testing.T) {
	r := newRNG(1)
	const rows, dim = 4, 7
	for _, affine := range []bool{true, false} {
		x := randn64(r, rows*dim, 1.5)
		var gamma, beta []float64
		if affine {
			gamma, beta = randn64(r, dim, 1), randn64(r, dim, 1)
		}
		w := randn64(r, rows*dim, 1)
		y := make([]float64, rows*dim)
		mean, rstd := make([]float64, rows), make([]float64, rows)
		loss := func() float64 {
			layerNormFwdRef(x, 0, rows, dim, gamma, beta, 1e-3, y, mean, rstd)
			return dot64(w, y)
		}
		loss()
		dx0 := randn64(r, rows*dim, 1)
		dx := clone64(dx0)
		var dg0, db0, dg, db []float64
		if affine {
			dg0, db0 = randn64(r, dim, 1), randn64(r, dim, 1)
			dg, db = clone64(dg0), clone64(db0)
		}
		layerNormBwdRef(w, x, mean, rstd, gamma, 0, rows, dim, dx, dg, db)
		checkFD(t, "dx", x, loss, dx0, dx)
		if affine {
			checkFD(t, "dgamma", gamma, loss, dg0, dg)
			checkFD(t, "dbeta", beta, loss, db0, db)
		}
	}
}

func TestModulateGradFD(t *testing.T) {
	r := newRNG(2)
	const b, tt, d = 2, 3, 5
	h, s, c := randn64(r, b*tt*d, 1), randn64(r, b*d, 1), randn64(r, b*d, 1)
	w := randn64(r, b*tt*d, 1)
	y := make([]float64, b*tt*d)
	loss := func() float64 {
		modulateFwdRef(h, s, c, 0, b, tt, d, y)
		return dot64(w, y)
	}
	dh0, ds0, dc0 := randn64(r, b*tt*d, 1), randn64(r, b*d, 1), randn64(r, b*d, 1)
	dh, ds, dc := clone64(dh0), clone64(ds0), clone64(dc0)
	modulateBwdRef(w, h, s, 0, b, tt, d, dh, ds, dc)
	checkFD(t, "dh", h, loss, dh0, dh)
	checkFD(t, "ds", s, loss, ds0, ds)
	checkFD(t, "dc", c, loss, dc0, dc)
}

func TestLayerNormModulateGradFD(t *testing.T) {
	r := newRNG(3)
	const b, tt, d = 2, 3, 6
	x := randn64(r, b*tt*d, 2)
	gamma, beta := randn64(r, d, 1), randn64(r, d, 1)
	s, c := randn64(r, b*d, 1), randn64(r, b*d, 1)
	w := randn64(r, b*tt*d, 1)
	y := make([]float64, b*tt*d)
	mean, rstd := make([]float64, b*tt), make([]float64, b*tt)
	loss := func() float64 {
		layerNormModFwdRef(x, 0, b, tt, d, gamma, beta, s, c, 1e-3, y, mean, rstd)
		return dot64(w, y)
	}
	loss()
	dx0, dg0, db0 := randn64(r, b*tt*d, 1), randn64(r, d, 1), randn64(r, d, 1)
	ds0, dc0 := randn64(r, b*d, 1), randn64(r, b*d, 1)
	dx, dg, db, ds, dc := clone64(dx0), clone64(dg0), clone64(db0), clone64(ds0), clone64(dc0)
	layerNormModBwdRef(w, x, mean, rstd, gamma, beta, s, 0, b, tt, d, dx, dg, db, ds, dc, make([]float64, 2*d))
	checkFD(t, "dx", x, loss, dx0, dx)
	checkFD(t, "dgamma", gamma, loss, dg0, dg)
	checkFD(t, "dbeta", beta, loss, db0, db)
	checkFD(t, "ds", s, loss, ds0, ds)
	checkFD(t, "dc", c, loss, dc0, dc)
}

func TestGELUGradFD(t *testing.T) {
	r := newRNG(4)
	const rows, n = 3, 11
	z := randn64(r, rows*n, 2.5)
	bias := randn64(r, n, 1)
	w := randn64(r, rows*n, 1)
	y, zz := make([]float64, rows*n), make([]float64, rows*n)
	loss := func() float64 {
		copy(zz, z)
		biasGELUFwdRef(zz, 0, rows, n, bias, y)
		return dot64(w, y)
	}
	loss()
	dz0, db0 := randn64(r, rows*n, 1), randn64(r, n, 1)
	dz, db := clone64(dz0), clone64(db0)
	biasGELUBwdRef(w, zz, 0, rows, n, dz, db)
	checkFD(t, "dz", z, loss, dz0, dz)
	checkFD(t, "dbias", bias, loss, db0, db)

	// Plain GELU backward agrees with the fused one without bias.
	dx0 := randn64(r, rows*n, 1)
	dx := clone64(dx0)
	geluBwdRef(w, z, dx)
	lossPlain := func() float64 {
		geluFwdRef(z, y)
		return dot64(w, y)
	}
	checkFD(t, "dx", z, lossPlain, dx0, dx)
}

func TestBiasGradFD(t *testing.T) {
	r := newRNG(5)
	const rows, n = 4, 5
	y0, bias, w := randn64(r, rows*n, 1), randn64(r, n, 1), randn64(r, rows*n, 1)
	y := make([]float64, rows*n)
	loss := func() float64 {
		copy(y, y0)
		addBiasRef(y, 0, rows, n, bias)
		return dot64(w, y)
	}
	db0 := randn64(r, n, 1)
	db := clone64(db0)
	biasGradRef(w, 0, rows, n, db)
	checkFD(t, "dbias", bias, loss, db0, db)
}

// attnCase is one attention configuration for the tests.
type attnCase struct {
	name string
	s    AttnShape
	mask func(r interface{ Float64() float64 }, s AttnShape) Mask
}

func blockMask(r interface{ Float64() float64 }, s AttnShape) Mask {
	a := make([]bool, s.B*s.Tq*s.Tk)
	for i := range a {
		a[i] = r.Float64() < 0.5
	}
	// Query row 1 of batch 0 sees no key at all.
	for j := 0; j < s.Tk; j++ {
		a[1*s.Tk+j] = false
	}
	return Mask{Allow: a, BatchStride: s.Tq * s.Tk}
}

func causal(_ interface{ Float64() float64 }, s AttnShape) Mask { return CausalMask(s.Tq) }

func noMask(interface{ Float64() float64 }, AttnShape) Mask { return Mask{} }

var attnCases = []attnCase{
	{"self-causal", AttnShape{B: 2, Tq: 5, Tk: 5, H: 2, Dh: 3}, causal},
	{"fused-qkv-block", AttnShape{B: 2, Tq: 4, Tk: 4, H: 2, Dh: 4, LdQ: 24, LdK: 24, LdV: 24, LdO: 8}, blockMask},
	{"cross-strided", AttnShape{B: 2, Tq: 3, Tk: 6, H: 3, Dh: 2, LdQ: 7, LdK: 9, LdV: 6, LdO: 8}, noMask},
}

// attnBuffers allocates q, k, v, out for s (all entries random, including
// the gaps between strided rows, which the kernels must not touch).
func attnBuffers(r interface{ NormFloat64() float64 }, s AttnShape, n func(int) []float64) (q, k, v []float64) {
	s = s.norm()
	return n(s.span(s.B*s.Tq, s.LdQ)), n(s.span(s.B*s.Tk, s.LdK)), n(s.span(s.B*s.Tk, s.LdV))
}

func TestAttentionGradFD(t *testing.T) {
	for ci, tc := range attnCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRNG(uint64(10 + ci))
			s := tc.s.norm()
			m := tc.mask(r, s)
			rn := func(n int) []float64 { return randn64(r, n, 1) }
			q, k, v := attnBuffers(r, s, rn)
			nout := s.span(s.B*s.Tq, s.LdO)
			w := rn(nout)
			out := make([]float64, nout)
			probs := make([]float64, s.B*s.H*s.Tq*s.Tk)
			loss := func() float64 {
				attnFwdRef(s, q, k, v, m, out, probs, 0, s.B*s.H, nil)
				return dot64(w, out)
			}
			loss()
			dq0, dk0, dv0 := rn(len(q)), rn(len(k)), rn(len(v))
			dq, dk, dv := clone64(dq0), clone64(dk0), clone64(dv0)
			attnBwdRef(s, q, k, v, probs, out, w, 0, s.B*s.H, dq, dk, dv)
			checkFD(t, "dq", q, loss, dq0, dq)
			checkFD(t, "dk", k, loss, dk0, dk)
			checkFD(t, "dv", v, loss, dv0, dv)
		})
	}
}

func TestLossGradFD(t *testing.T) {
	r := newRNG(6)
	const n = 9
	x64 := randn64(r, n, 3)
	tgt := make([]float32, n)
	wts := make([]float32, n)
	for i := range tgt {
		tgt[i] = float32(r.Float64())
		wts[i] = float32(r.IntN(3)) / 2
	}
	// The loss kernels take float32 inputs (and sum in float64): the central
	// difference uses step h = 1e-2 and divides by the float32-rounded
	// perturbation actually applied, so only truncation error remains.
	bce := func(x []float64) float64 { return BCEWithLogits(to32(x), tgt, wts, n) }
	mse := func(x []float64) float64 { return MaskedSquaredError(to32(x), tgt, wts, n) }
	for _, c := range []struct {
		name string
		f    func([]float64) float64
		grad func(g []float32)
	}{
		{"bce", bce, func(g []float32) { BCEWithLogitsBackward(to32(x64), tgt, wts, n, 0.5, g) }},
		{"mse", mse, func(g []float32) { MaskedSquaredErrorBackward(to32(x64), tgt, wts, n, 0.5, g, nil) }},
	} {
		g := make([]float32, n)
		c.grad(g)
		for i := range x64 {
			const h = 1e-2
			xp, xm := clone64(x64), clone64(x64)
			xp[i] += h
			xm[i] -= h
			num := 0.5 * (c.f(xp) - c.f(xm)) / (float64(float32(xp[i])) - float64(float32(xm[i])))
			// Truncation error h²/6·|f'''| ≤ 1e-4/6·0.1 for the BCE (|σ''| ≤
			// 0.1) and 0 for the quadratic; float32 gradient rounding ~1e-7.
			if d := num - float64(g[i]); d > 1e-5 || d < -1e-5 {
				t.Errorf("%s grad[%d] = %g, finite difference %g", c.name, i, g[i], num)
			}
		}
	}
	// dtarget is the negative of dpred for the squared error.
	dp, dt := make([]float32, n), make([]float32, n)
	MaskedSquaredErrorBackward(to32(x64), tgt, wts, n, 1, dp, dt)
	for i := range dp {
		if dp[i] != -dt[i] {
			t.Errorf("dtarget[%d] = %g, want %g", i, dt[i], -dp[i])
		}
	}
}
