package kernels

import (
	"math"
	"testing"
)

var attnBigCases = []attnCase{
	{"causal-T51-Dh16", AttnShape{B: 8, Tq: 51, Tk: 51, H: 4, Dh: 16}, causal},
	{"block-fusedqkv-Dh16", AttnShape{B: 8, Tq: 50, Tk: 50, H: 4, Dh: 16, LdQ: 192, LdK: 192, LdV: 192}, blockMask},
	{"cross-Dh16", AttnShape{B: 6, Tq: 51, Tk: 10, H: 4, Dh: 16}, noMask},
	{"cross-odd-Dh", AttnShape{B: 5, Tq: 13, Tk: 37, H: 3, Dh: 7, LdQ: 23, LdK: 30, LdV: 21, LdO: 22}, blockMask},
	{"decode-Tq1", AttnShape{B: 16, Tq: 1, Tk: 300, H: 4, Dh: 16}, noMask},
	{"few-queries-masked-Dh32", AttnShape{B: 3, Tq: 2, Tk: 37, H: 2, Dh: 32, LdK: 70}, blockMask},
	// Scratch beyond the C kernels' stack buffer (heap path).
	{"long-T200", AttnShape{B: 2, Tq: 200, Tk: 200, H: 2, Dh: 16}, causal},
	{"long-T200-Dh32", AttnShape{B: 1, Tq: 200, Tk: 150, H: 2, Dh: 32}, blockMask},
	{"Dh64", AttnShape{B: 3, Tq: 21, Tk: 21, H: 2, Dh: 64}, causal},
	{"Dh80-generic", AttnShape{B: 2, Tq: 9, Tk: 11, H: 1, Dh: 80}, noMask},
}

// TestAttentionMatchesReference compares the exported kernels with the
// float64 reference. Scores are dot products of Dh ≤ 16 terms, softmax sums
// ≤ 300 terms and outputs convex combinations of v, so float32 errors are a
// few hundred ulp at most relative to the largest value: tol 1e-5.
func TestAttentionMatchesReference(t *testing.T) {
	for ci, tc := range attnBigCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRNG(uint64(40 + ci))
			s := tc.s.norm()
			m := tc.mask(r, s)
			rn := func(n int) []float64 { return randn64(r, n, 1) }
			q, k, v := attnBuffers(r, s, rn)
			nout := s.span(s.B*s.Tq, s.LdO)
			out, probs := rn(nout), make([]float64, s.B*s.H*s.Tq*s.Tk)
			out32 := to32(out) // gaps between strided rows must survive
			attnFwdRef(s, q, k, v, m, out, probs, 0, s.B*s.H, nil)
			probs32 := make([]float32, len(probs))
			AttentionForward(tc.s, to32(q), to32(k), to32(v), m, out32, probs32)
			checkClose(t, "out", out32, out, 1e-5, maxAbs(out))
			checkClose(t, "probs", probs32, probs, 1e-5, 1)

			// Inference without probs gives the same output.
			outInf := make([]float32, nout)
			copy(outInf, out32)
			AttentionForward(tc.s, to32(q), to32(k), to32(v), m, outInf, nil)
			checkClose(t, "out (no probs)", outInf, out, 1e-5, maxAbs(out))

			dout := rn(nout)
			dq, dk, dv := rn(len(q)), rn(len(k)), rn(len(v))
			dq32, dk32, dv32 := to32(dq), to32(dk), to32(dv)
			attnBwdRef(s, q, k, v, probs, out, dout, 0, s.B*s.H, dq, dk, dv)
			AttentionBackward(tc.s, to32(q), to32(k), to32(v), probs32, out32, to32(dout), m, dq32, dk32, dv32)
			checkClose(t, "dq", dq32, dq, 1e-5, maxAbs(dq))
			checkClose(t, "dk", dk32, dk, 1e-5, maxAbs(dk))
			checkClose(t, "dv", dv32, dv, 1e-5, maxAbs(dv))
		})
	}
}

// TestAttentionEmptyRow checks that a query without any allowed key yields a
// zero output and zero gradients rather than NaN.
func TestAttentionEmptyRow(t *testing.T) {
	s := AttnShape{B: 1, Tq: 2, Tk: 3, H: 1, Dh: 16}
	allow := []bool{false, false, false, true, false, true}
	r := newRNG(50)
	q, k, v := to32(randn64(r, 2*16, 1)), to32(randn64(r, 3*16, 1)), to32(randn64(r, 3*16, 1))
	out, probs := make([]float32, 2*16), make([]float32, 6)
	AttentionForward(s, q, k, v, Mask{Allow: allow}, out, probs)
	dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
	dout := to32(randn64(r, 2*16, 1))
	AttentionBackward(s, q, k, v, probs, out, dout, Mask{Allow: allow}, dq, dk, dv)
	for i := 0; i < 16; i++ {
		if out[i] != 0 || dq[i] != 0 {
			t.Fatalf("masked row: out %g, dq %g at %d", out[i], dq[i], i)
		}
	}
	for _, buf := range [][]float32{out, probs, dq, dk, dv} {
		for _, x := range buf {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("non-finite value in %v", buf)
			}
		}
	}
	if probs[0]+probs[1]+probs[2] != 0 || math.Abs(float64(probs[3]+probs[5]-1)) > 1e-6 || probs[4] != 0 {
		t.Errorf("probs = %v", probs)
	}
}

// TestAttentionKVCache checks that decoding token by token (Tq = 1 over the
// keys seen so far) reproduces causal attention over the whole sequence.
func TestAttentionKVCache(t *testing.T) {
	r := newRNG(51)
	const b, tt, h, dh = 3, 9, 4, 16
	w := h * dh
	q, k, v := to32(randn64(r, b*tt*w, 1)), to32(randn64(r, b*tt*w, 1)), to32(randn64(r, b*tt*w, 1))
	full := make([]float32, b*tt*w)
	AttentionForward(AttnShape{B: b, Tq: tt, Tk: tt, H: h, Dh: dh}, q, k, v, CausalMask(tt), full, nil)
	// Cache layout [B, maxT, w]: batch stride is maxT rows, so decode batch
	// by batch with B = 1 over the first i+1 rows.
	step := make([]float32, w)
	for bi := 0; bi < b; bi++ {
		for i := 0; i < tt; i++ {
			s := AttnShape{B: 1, Tq: 1, Tk: i + 1, H: h, Dh: dh}
			AttentionForward(s, q[(bi*tt+i)*w:], k[bi*tt*w:], v[bi*tt*w:], Mask{}, step, nil)
			// Same arithmetic on the same keys: only summation order of the
			// parallel split may differ, so 1e-6 absolute on O(1) values.
			for j := range step {
				if d := step[j] - full[(bi*tt+i)*w+j]; d > 1e-6 || d < -1e-6 {
					t.Fatalf("b=%d i=%d col %d: cached %g, full %g", bi, i, j, step[j], full[(bi*tt+i)*w+j])
				}
			}
		}
	}
}

// TestKernelsDoNotAllocate checks the hot-path kernels allocate nothing
// after warm-up.
func TestKernelsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const b, tt, h, dh = 8, 51, 4, 16
	d := h * dh
	s := AttnShape{B: b, Tq: tt, Tk: tt, H: h, Dh: dh}
	x := make([]float32, b*tt*d)
	y := make([]float32, b*tt*d)
	big := make([]float32, b*tt*4*d)
	vec := make([]float32, b*d)
	rows := make([]float32, b*tt)
	rows2 := make([]float32, b*tt)
	g := make([]float32, 4*d)
	probs := make([]float32, b*h*tt*tt)
	m := CausalMask(tt)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	fns := map[string]func(){
		"layernorm": func() {
			LayerNormForward(x, b*tt, d, g[:d], g[:d], 1e-5, y, rows, rows2)
			LayerNormBackward(x, x, rows, rows2, g[:d], b*tt, d, y, g[:d], g[d:2*d])
		},
		"lnmod": func() {
			LayerNormModulateForward(x, b, tt, d, g[:d], g[:d], vec, vec, 1e-5, y, rows, rows2)
			LayerNormModulateBackward(x, x, rows, rows2, g[:d], g[:d], vec, b, tt, d, y, g[:d], g[d:2*d], vec, vec)
		},
		"modulate": func() {
			ModulateForward(x, vec, vec, b, tt, d, y)
			ModulateBackward(x, x, vec, b, tt, d, y, vec, vec)
		},
		"gelu": func() {
			BiasGELUForward(big, b*tt, 4*d, g, big)
			BiasGELUBackward(big, big, b*tt, 4*d, big, g)
			GELUForward(big, big)
			GELUBackward(big, big, big)
		},
		"bias": func() {
			AddBias(y, b*tt, d, g[:d])
			BiasGrad(y, b*tt, d, g[:d])
		},
		"elementwise": func() {
			Axpy(0.5, big, big)
			Add(big, big, big)
			Scale(0.5, big)
		},
		"attention": func() {
			AttentionForward(s, x, x, x, m, y, probs)
			AttentionBackward(s, x, x, x, probs, y, y, m, big[:len(x)], big[len(x):2*len(x)], big[2*len(x):3*len(x)])
			AttentionForward(AttnShape{B: b, Tq: 1, Tk: tt, H: h, Dh: dh}, x, x, x, Mask{}, y, nil)
		},
		"sgemm": func() {
			Sgemm(false, true, b*tt, d, d, 1, x, d, x, d, 0, y, d)
			LinearForward(b*tt, d, d, x, d, x, d, g[:d], y, big[:len(y)])
		},
	}
	if Backend == "go" {
		delete(fns, "sgemm") // gonum's Sgemm spawns goroutines per call
	}
	for name, f := range fns {
		f()
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s: %.1f allocations per call", name, a)
		}
	}
}

// tileMask allows each key with probability 1/2 and masks every query row
// whose index is 1 or ≡ 5 (mod 37) entirely, so fully masked rows fall in
// several query tiles of the inference forward and at both ends of its
// four-query groups.
func tileMask(r interface{ Float64() float64 }, s AttnShape) Mask {
	a := make([]bool, s.B*s.Tq*s.Tk)
	for i := range a {
		a[i] = r.Float64() < 0.5
	}
	for b := 0; b < s.B; b++ {
		for i := 0; i < s.Tq; i++ {
			if i == 1 || i%37 == 5 {
				for j := 0; j < s.Tk; j++ {
					a[(b*s.Tq+i)*s.Tk+j] = false
				}
			}
		}
	}
	return Mask{Allow: a, BatchStride: s.Tq * s.Tk}
}

// TestAttentionInferenceMatchesReference checks the inference forward
// (probs == nil), which processes queries in tiles without keeping the
// probability matrix, against the float64 reference on shapes with many
// tiles and a partial last one (Tq ≫ Tk, Tq not a multiple of the tile or
// of four), KV-cache decoding (Tq = 1), masked and fully masked rows (whose
// output must be exactly zero), Dh = 16 and odd Dh, and few keys. Tolerance as in
// TestAttentionMatchesReference: outputs are convex combinations of v with
// weights from ≤ 16-term dot products and ≤ 300-term sums, so float32
// errors are a few hundred ulp of the largest value, 1e-5 relative.
func TestAttentionInferenceMatchesReference(t *testing.T) {
	cases := []attnCase{
		{"cross-Tq2051-Tk105-Dh16", AttnShape{B: 2, Tq: 2051, Tk: 105, H: 4, Dh: 16}, noMask},
		{"cross-masked-Tq1030-Tk105-Dh16", AttnShape{B: 2, Tq: 1030, Tk: 105, H: 2, Dh: 16, LdQ: 40, LdK: 96, LdV: 64, LdO: 36}, tileMask},
		{"cross-masked-Tq517-Tk300-Dh7", AttnShape{B: 1, Tq: 517, Tk: 300, H: 3, Dh: 7, LdQ: 23, LdK: 30, LdV: 21, LdO: 22}, tileMask},
		{"cross-masked-Tq300-Tk9-Dh32", AttnShape{B: 2, Tq: 300, Tk: 9, H: 2, Dh: 32}, tileMask},
		{"decode-Tq1-Tk105-Dh16", AttnShape{B: 7, Tq: 1, Tk: 105, H: 4, Dh: 16}, noMask},
		{"decode-Tq1-masked-Dh7", AttnShape{B: 5, Tq: 1, Tk: 50, H: 2, Dh: 7}, blockMask},
		{"long-keys-Tq9-Tk3000-Dh16", AttnShape{B: 1, Tq: 9, Tk: 3000, H: 2, Dh: 16}, tileMask},
		// Unmasked with at most 16 keys and Dh = 16: the tiny kernel
		// (the denoiser's self-attention over a row's parameter tokens,
		// fused QKV strides), at the extremes Tk = 1 and 16.
		{"self-tiny-T7-fusedqkv-Dh16", AttnShape{B: 50, Tq: 7, Tk: 7, H: 4, Dh: 16, LdQ: 192, LdK: 192, LdV: 192, LdO: 70}, noMask},
		{"tiny-Tq13-Tk16-Dh16", AttnShape{B: 3, Tq: 13, Tk: 16, H: 2, Dh: 16, LdK: 40, LdV: 33}, noMask},
		{"tiny-Tq3-Tk1-Dh16", AttnShape{B: 4, Tq: 3, Tk: 1, H: 2, Dh: 16}, noMask},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRNG(uint64(60 + ci))
			s := tc.s.norm()
			m := tc.mask(r, s)
			rn := func(n int) []float64 { return randn64(r, n, 1) }
			q, k, v := attnBuffers(r, s, rn)
			out := rn(s.span(s.B*s.Tq, s.LdO))
			out32 := to32(out) // gaps between strided rows must survive
			attnFwdRef(s, q, k, v, m, out, make([]float64, s.B*s.H*s.Tq*s.Tk), 0, s.B*s.H, nil)
			AttentionForward(tc.s, to32(q), to32(k), to32(v), m, out32, nil)
			checkClose(t, "out", out32, out, 1e-5, maxAbs(out))
			if m.Allow == nil {
				return
			}
			for b := 0; b < s.B; b++ {
				for i := 0; i < s.Tq; i++ {
					row := m.Allow[b*m.BatchStride+i*s.Tk:][:s.Tk]
					empty := true
					for _, ok := range row {
						empty = empty && !ok
					}
					if !empty {
						continue
					}
					for c, x := range out32[(b*s.Tq+i)*s.LdO:][:s.H*s.Dh] {
						if x != 0 {
							t.Fatalf("fully masked row b=%d i=%d: out[%d] = %g, want 0", b, i, c, x)
						}
					}
				}
			}
		})
	}
}

// TestAttentionQueryIndependence: in inference without a mask (probs nil)
// a query's output must not depend on the other queries of its call, bit
// for bit: every window of queries [i0, i1) of a call, run as a call of its
// own, gives the same bits as in the whole call. This lets the network's
// rows be batched, chunked and cut into cross-attention segments freely.
// Tq covers the kernels' query groups (1–3 left over from fours and
// eights) and several tiles (PK_ATT_TILE / Tk queries each); Tk ≤ 16 is the
// AVX-512 path's small-key kernel.
func TestAttentionQueryIndependence(t *testing.T) {
	for _, s := range []AttnShape{
		{B: 1, Tq: 203, Tk: 105, H: 2, Dh: 16},
		{B: 1, Tq: 75, Tk: 300, H: 2, Dh: 16},
		{B: 1, Tq: 23, Tk: 11, H: 2, Dh: 16},
		{B: 1, Tq: 37, Tk: 40, H: 2, Dh: 8},
		{B: 1, Tq: 30, Tk: 33, H: 1, Dh: 32},
		{B: 1, Tq: 13, Tk: 21, H: 1, Dh: 64},
	} {
		r := newRNG(uint64(s.Tq + s.Tk + s.Dh))
		s = s.norm()
		w := s.H * s.Dh
		q := to32(randn64(r, s.Tq*w, 1))
		k := to32(randn64(r, s.Tk*w, 1))
		v := to32(randn64(r, s.Tk*w, 1))
		all := make([]float32, s.Tq*w)
		AttentionForward(s, q, k, v, Mask{}, all, nil)
		for _, n := range []int{1, 2, 3, 5, 6, 7, 9, 17} {
			for i0 := 0; i0 < s.Tq; i0 += n {
				i1 := min(s.Tq, i0+n)
				sub := s
				sub.Tq = i1 - i0
				got := make([]float32, sub.Tq*w)
				AttentionForward(sub, q[i0*w:i1*w], k, v, Mask{}, got, nil)
				for e, g := range got {
					if want := all[i0*w+e]; math.Float32bits(g) != math.Float32bits(want) {
						t.Fatalf("%+v: query %d component %d is %v in a call of %d queries, %v in one of %d", s, i0+e/w, e%w, g, sub.Tq, want, s.Tq)
					}
				}
			}
		}
	}
}
