package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Forward results against naive float64 implementations written from the
// definitions. float32 storage with float64 references: for sums of up to a
// few dozen O(1) terms the float32 result is within ~1e-6 relative, so 1e-4
// absolute (values are O(1)) leaves ample room while catching any indexing
// error, which shows up as O(1) differences.
const fwdTol = 1e-4

func randData(r *rand.Rand, n int) []float32 {
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return d
}

func assertClose(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: element %d = %.7g, want %.7g", name, i, got[i], want[i])
		}
	}
}

func TestMatMulForward(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	const nb, m, k, n = 3, 4, 5, 2
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			a, b := randData(r, nb*m*k), randData(r, nb*k*n)
			sa, sb := []int{nb, m, k}, []int{nb, k, n}
			at := func(x, i, j int) float64 { return float64(a[(x*m+i)*k+j]) }
			if ta {
				sa = []int{nb, k, m}
				at = func(x, i, j int) float64 { return float64(a[(x*k+j)*m+i]) }
			}
			bt := func(x, i, j int) float64 { return float64(b[(x*k+i)*n+j]) }
			if tb {
				sb = []int{nb, n, k}
				bt = func(x, i, j int) float64 { return float64(b[(x*n+j)*k+i]) }
			}
			g := NewGraph()
			c := g.MatMul(g.Input(a, sa...), g.Input(b, sb...), ta, tb)
			want := make([]float64, nb*m*n)
			for x := range nb {
				for i := range m {
					for j := range n {
						for l := range k {
							want[(x*m+i)*n+j] += at(x, i, l) * bt(x, l, j)
						}
					}
				}
			}
			assertClose(t, "MatMul", c.Data, want, fwdTol)
		}
	}
}

func TestLinearForward(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	x, w, b := randData(r, 6*5), randData(r, 5*3), randData(r, 3)
	g := NewGraph()
	y := g.Linear(g.Input(x, 2, 3, 5), g.Input(w, 5, 3), g.Input(b, 3))
	want := make([]float64, 6*3)
	for i := range 6 {
		for j := range 3 {
			want[i*3+j] = float64(b[j])
			for l := range 5 {
				want[i*3+j] += float64(x[i*5+l]) * float64(w[l*3+j])
			}
		}
	}
	if !sameShape(y.Shape, []int{2, 3, 3}) {
		t.Fatalf("Linear shape %v", y.Shape)
	}
	assertClose(t, "Linear", y.Data, want, fwdTol)
	// The fused LinearGELU equals GELU(Linear).
	z := g.LinearGELU(g.Input(x, 2, 3, 5), g.Input(w, 5, 3), g.Input(b, 3))
	for i := range want {
		v := want[i]
		want[i] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	assertClose(t, "LinearGELU", z.Data, want, fwdTol)
	// Without gradients LinearGELU computes GELU in place (no
	// pre-activation kept); with them it keeps z for the backward. The
	// values agree bit for bit.
	gt := NewGraph()
	zt := gt.LinearGELU(gt.Input(x, 2, 3, 5), gt.Variable(w, 5, 3), gt.Input(b, 3))
	for i := range z.Data {
		if zt.Data[i] != z.Data[i] {
			t.Fatalf("LinearGELU without gradients %v, with %v at %d", z.Data[i], zt.Data[i], i)
		}
	}
}

// TestLinearResidualForward checks LinearResidual against r + x·W + b
// from the definition, on an inference graph (fused epilogue, a shape large
// enough for the own AVX-512 kernel) and on a training graph (recorded as
// Linear and Add), and that the two graphs agree bit for bit.
func TestLinearResidualForward(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	const m, k, n = 600, 64, 64
	x, w, b, res := randData(r, m*k), randData(r, k*n), randData(r, n), randData(r, m*n)
	want := make([]float64, m*n)
	for i := range m {
		for j := range n {
			v := float64(b[j])
			for l := range k {
				v += float64(x[i*k+l]) * float64(w[l*n+j])
			}
			want[i*n+j] = v + float64(res[i*n+j])
		}
	}
	gi := NewInferenceGraph()
	yi := gi.LinearResidual(gi.Input(res, 2, m/2, n), gi.Input(x, 2, m/2, k), gi.Input(w, k, n), gi.Input(b, n))
	if !sameShape(yi.Shape, []int{2, m / 2, n}) {
		t.Fatalf("LinearResidual shape %v", yi.Shape)
	}
	// k = 64 products of N(0, 1) terms: sums of size ~8, so the float32
	// error is ~1e-6·8; fwdTol (relative to 1 + |want|) bounds it amply.
	assertClose(t, "LinearResidual (inference)", yi.Data, want, fwdTol)
	gt := NewGraph()
	wt := gt.Variable(w, k, n)
	yt := gt.LinearResidual(gt.Input(res, 2, m/2, n), gt.Input(x, 2, m/2, k), wt, gt.Input(b, n))
	for i := range yt.Data {
		if yt.Data[i] != yi.Data[i] {
			t.Fatalf("training graph %v, inference graph %v at %d", yt.Data[i], yi.Data[i], i)
		}
	}
}

// naiveBroadcast computes op elementwise with NumPy broadcasting of b
// (left-padded with 1s) against a.
func naiveBroadcast(a []float32, as []int, b []float32, bs []int, op func(x, y float64) float64) []float64 {
	out := make([]float64, len(a))
	pad := len(as) - len(bs)
	idx := make([]int, len(as))
	for p := range a {
		rem := p
		for ax := len(as) - 1; ax >= 0; ax-- {
			idx[ax] = rem % as[ax]
			rem /= as[ax]
		}
		q := 0
		for ax := pad; ax < len(as); ax++ {
			i := idx[ax]
			if bs[ax-pad] == 1 {
				i = 0
			}
			q = q*bs[ax-pad] + i
		}
		out[p] = op(float64(a[p]), float64(b[q]))
	}
	return out
}

func TestBroadcastForward(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	as := []int{2, 3, 4}
	for _, bs := range [][]int{{2, 3, 4}, {2, 1, 4}, {4}, {3, 4}, {2, 3, 1}, {}, {1, 1, 1}} {
		a, b := randData(r, numel(as)), randData(r, numel(bs))
		g := NewGraph()
		ta, tb := g.Input(a, as...), g.Input(b, bs...)
		assertClose(t, "Add", g.Add(ta, tb).Data, naiveBroadcast(a, as, b, bs, func(x, y float64) float64 { return x + y }), fwdTol)
		assertClose(t, "Add/swapped", g.Add(tb, ta).Data, naiveBroadcast(a, as, b, bs, func(x, y float64) float64 { return x + y }), fwdTol)
		assertClose(t, "Mul", g.Mul(ta, tb).Data, naiveBroadcast(a, as, b, bs, func(x, y float64) float64 { return x * y }), fwdTol)
	}
	defer func() {
		if recover() == nil {
			t.Error("Add of [2,3,4] and [3,1] did not panic")
		}
	}()
	g := NewGraph()
	g.Add(g.Zeros(2, 3, 4), g.Zeros(2, 1, 1, 4))
}

func TestNormForward(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	const b, tt, d = 2, 3, 8
	x, gam, bet := randData(r, b*tt*d), randData(r, d), randData(r, d)
	s, c := randData(r, b*d), randData(r, b*d)
	ln := make([]float64, b*tt*d)
	for row := range b * tt {
		var m, v float64
		for j := range d {
			m += float64(x[row*d+j]) / d
		}
		for j := range d {
			v += (float64(x[row*d+j]) - m) * (float64(x[row*d+j]) - m) / d
		}
		for j := range d {
			ln[row*d+j] = (float64(x[row*d+j])-m)/math.Sqrt(v+LayerNormEps)*float64(gam[j]) + float64(bet[j])
		}
	}
	mod := make([]float64, len(ln))
	for i := range ln {
		bi, j := i/(tt*d), i%d
		mod[i] = ln[i]*(1+float64(s[bi*d+j])) + float64(c[bi*d+j])
	}
	g := NewGraph()
	tx, tg, tb := g.Input(x, b, tt, d), g.Input(gam, d), g.Input(bet, d)
	ts, tc := g.Input(s, b, d), g.Input(c, b, 1, d)
	assertClose(t, "LayerNorm", g.LayerNorm(tx, tg, tb).Data, ln, fwdTol)
	assertClose(t, "Modulate∘LayerNorm", g.Modulate(g.LayerNorm(tx, tg, tb), ts, tc).Data, mod, fwdTol)
	assertClose(t, "LayerNormModulate", g.LayerNormModulate(tx, tg, tb, ts, tc).Data, mod, fwdTol)
}

// naiveAttention is single-precision-free multi-head attention from the
// definition; q [B,Tq,W], k, v [B,Tk,W] given by accessor functions.
func naiveAttention(b, tq, tk, heads, w int, q, k, v func(b, t, c int) float64, allow func(b, i, j int) bool) []float64 {
	dh := w / heads
	out := make([]float64, b*tq*w)
	for s := range b {
		for h := range heads {
			for i := range tq {
				logits := make([]float64, tk)
				mx := math.Inf(-1)
				for j := range tk {
					if !allow(s, i, j) {
						continue
					}
					for c := h * dh; c < (h+1)*dh; c++ {
						logits[j] += q(s, i, c) * k(s, j, c)
					}
					logits[j] /= math.Sqrt(float64(dh))
					mx = max(mx, logits[j])
				}
				var z float64
				for j := range tk {
					if allow(s, i, j) {
						logits[j] = math.Exp(logits[j] - mx)
						z += logits[j]
					} else {
						logits[j] = 0
					}
				}
				for j := range tk {
					if z == 0 {
						break
					}
					for c := h * dh; c < (h+1)*dh; c++ {
						out[(s*tq+i)*w+c] += logits[j] / z * v(s, j, c)
					}
				}
			}
		}
	}
	return out
}

func TestAttentionForward(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	const b, tt, heads, w = 3, 6, 2, 8
	qkv := randData(r, b*tt*3*w)
	acc := func(off int) func(s, i, c int) float64 {
		return func(s, i, c int) float64 { return float64(qkv[(s*tt+i)*3*w+off+c]) }
	}
	mask := randomBlockMask(r, b, tt)
	want := naiveAttention(b, tt, tt, heads, w, acc(0), acc(w), acc(2*w), func(s, i, j int) bool { return mask.Allow[s*tt*tt+i*tt+j] })
	g := NewGraph()
	x := g.Input(qkv, b, tt, 3*w)
	assertClose(t, "SelfAttention", g.SelfAttention(x, heads, mask).Data, want, fwdTol)
	q, k, v := g.Slice(x, -1, 0, w), g.Slice(x, -1, w, 2*w), g.Slice(x, -1, 2*w, 3*w)
	assertClose(t, "Attention", g.Attention(q, k, v, heads, mask).Data, want, fwdTol)
	assertClose(t, "CrossAttention", g.CrossAttention(q, g.Slice(x, -1, w, 3*w), heads, mask).Data, want, fwdTol)
}

// TestKVCacheMatchesCausal decodes token by token with a KV cache and
// compares every step with full causal self-attention over the prefix.
func TestKVCacheMatchesCausal(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 1))
	const b, tt, heads, w = 2, 7, 2, 8
	qkv := randData(r, b*tt*3*w)
	full := NewGraph()
	want := full.SelfAttention(full.Input(qkv, b, tt, 3*w), heads, CausalMask(tt)).Data
	cache := NewKVCache(b, tt+2, heads, w)
	g := NewInferenceGraph()
	step := make([]float32, b*3*w)
	// First a two-token prefix in one call, then one token at a time.
	prefix := make([]float32, b*2*3*w)
	for s := range b {
		copy(prefix[s*2*3*w:(s+1)*2*3*w], qkv[s*tt*3*w:(s*tt+2)*3*w])
	}
	p := g.Input(prefix, b, 2, 3*w)
	cache.Append(p, w, p, 2*w)
	got := g.Attend(cache, p, 0)
	for s := range b {
		for i := range 2 {
			row := want[(s*tt+i)*w : (s*tt+i+1)*w]
			assertClose(t, "KV prefix", got.Data[(s*2+i)*w:(s*2+i+1)*w], f64(row), fwdTol)
		}
	}
	for i := 2; i < tt; i++ {
		g.Reset()
		for s := range b {
			copy(step[s*3*w:(s+1)*3*w], qkv[(s*tt+i)*3*w:(s*tt+i+1)*3*w])
		}
		x := g.Input(step, b, 1, 3*w)
		cache.Append(x, w, x, 2*w)
		out := g.Attend(cache, x, 0)
		for s := range b {
			assertClose(t, "KV step", out.Data[s*w:(s+1)*w], f64(want[(s*tt+i)*w:(s*tt+i+1)*w]), fwdTol)
		}
	}
	if g.NumNodes() != 0 {
		t.Errorf("inference graph recorded %d nodes", g.NumNodes())
	}
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func TestShapeOpsForward(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 1))
	g := NewGraph()
	table := randData(r, 5*3)
	idx := []int32{4, 0, 4}
	e := g.Embedding(g.Input(table, 5, 3), idx, 3)
	for i, id := range idx {
		assertClose(t, "Embedding", e.Data[i*3:(i+1)*3], f64(table[id*3:(id+1)*3]), 0)
	}
	a, b := randData(r, 2*3*2), randData(r, 2*1*2)
	ta, tb := g.Input(a, 2, 3, 2), g.Input(b, 2, 1, 2)
	c := g.Concat(1, tb, ta) // [2, 4, 2]: token 0 from b, tokens 1..3 from a
	if !sameShape(c.Shape, []int{2, 4, 2}) {
		t.Fatalf("Concat shape %v", c.Shape)
	}
	for s := range 2 {
		assertClose(t, "Concat/tokens b", c.Data[s*8:s*8+2], f64(b[s*2:s*2+2]), 0)
		assertClose(t, "Concat/tokens a", c.Data[s*8+2:s*8+8], f64(a[s*6:s*6+6]), 0)
	}
	back := g.Slice(c, 1, 1, 4)
	assertClose(t, "Slice/tokens", back.Data, f64(a), 0)
	cl := g.Concat(-1, ta, ta) // [2, 3, 4]
	for row := range 6 {
		assertClose(t, "Concat/last", cl.Data[row*4:row*4+4], f64(append(append([]float32(nil), a[row*2:row*2+2]...), a[row*2:row*2+2]...)), 0)
	}
	assertClose(t, "Slice/last", g.Slice(cl, -1, 2, 4).Data, f64(a), 0)
}

func TestFourierForward(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	const n, in, out = 4, 2, 7
	m := (out + 1) / 2
	u, p := randData(r, n*in), randData(r, m*in)
	g := NewGraph()
	f := g.FourierFeatures(g.Input(u, n, in), g.Input(p, m, in), out)
	want := make([]float64, n*out)
	for i := range n {
		for j := range m {
			var z float64
			for l := range in {
				z += float64(p[j*in+l]) * float64(u[i*in+l])
			}
			z *= 2 * math.Pi / in
			want[i*out+j] = math.Cos(z)
			if m+j < out {
				want[i*out+m+j] = math.Sin(z)
			}
		}
	}
	assertClose(t, "Fourier", f.Data, want, fwdTol)
}

func TestLossesForward(t *testing.T) {
	logits := []float32{-30, -1, 0, 2, 40}
	targets := []float32{0, 1, 1, 0, 1}
	g := NewGraph()
	bce := g.BCEWithLogits(g.Input(logits, 5), g.Input(targets, 5), nil).Item()
	var want float64
	for i, x := range logits {
		sig := 1 / (1 + math.Exp(-float64(x)))
		if targets[i] == 1 {
			want -= math.Log(sig)
		} else {
			want -= math.Log1p(-sig)
		}
	}
	if math.Abs(float64(bce)-want) > 1e-5*want {
		t.Errorf("BCEWithLogits = %v, want %v", bce, want)
	}
	// Softmax cross-entropy against log-sum-exp in float64, with logits
	// large enough that an unshifted exp would overflow float32.
	ceLogits := []float32{-30, -1, 0, 2, 95, 90, 88, -5}
	ceBias := []float32{0, 1, -1, 0.5, 0, 3, 0, -2}
	ceTargets := []int32{3, 0}
	ceWeights := []float32{2, 0.5}
	ce := g.SoftmaxCrossEntropy(g.Input(ceLogits, 2, 4), g.Input(ceBias, 2, 4), ceTargets, g.Input(ceWeights, 2)).Item()
	wantCE := 0.0
	for r := range 2 {
		sum := 0.0
		for j := range 4 {
			sum += math.Exp(float64(ceLogits[r*4+j]+ceBias[r*4+j]) - 93)
		}
		t := int(ceTargets[r])
		wantCE += float64(ceWeights[r]) * (93 + math.Log(sum) - float64(ceLogits[r*4+t]+ceBias[r*4+t]))
	}
	// float32 output of a sum of O(10): relative 1e-6.
	if math.Abs(float64(ce)-wantCE) > 1e-6*wantCE {
		t.Errorf("SoftmaxCrossEntropy = %v, want %v", ce, wantCE)
	}
	mask := []float32{1, 0, 1, 1, 0}
	mse := g.MaskedSquaredError(g.Input(logits, 5), g.Input(targets, 5), g.Input(mask, 5)).Item()
	if want := float32(30*30 + 1 + 4); mse != want {
		t.Errorf("MaskedSquaredError = %v, want %v", mse, want)
	}
	x := []float32{1, 2, 3, 4, 5, 6}
	if s := g.Sum(g.Input(x, 2, 3)).Item(); s != 21 {
		t.Errorf("Sum = %v", s)
	}
	if s := g.Mean(g.Input(x, 2, 3)).Item(); s != 3.5 {
		t.Errorf("Mean = %v", s)
	}
	assertClose(t, "SumLast", g.SumLast(g.Input(x, 2, 3)).Data, []float64{6, 15}, 0)
	assertClose(t, "MeanLast", g.MeanLast(g.Input(x, 2, 3)).Data, []float64{2, 5}, 0)
}

// TestBroadcastLarge exercises the two-core paths of Add and Mul (tensors
// above the parallel grain) forward and backward against naive loops.
// Reductions over M = 64 float32 terms of O(1) values stay within ~1e-5
// relative, hence the 1e-4 tolerance.
func TestBroadcastLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 1))
	as := []int{4, 64, 256}
	for _, bs := range [][]int{{4, 1, 256}, {256}, {4, 64, 1}} {
		a, b, seed := randData(r, numel(as)), randData(r, numel(bs)), randData(r, numel(as))
		g := NewGraph()
		ta, tb := g.Variable(a, as...), g.Variable(b, bs...)
		out := g.Mul(ta, tb)
		assertClose(t, "Mul/large", out.Data, naiveBroadcast(a, as, b, bs, func(x, y float64) float64 { return x * y }), fwdTol)
		g.BackwardFrom(out, seed)
		// da = seed·b (broadcast); db = Σ over broadcast axes of seed·a.
		assertClose(t, "Mul/large da", ta.Grad, naiveBroadcast(seed, as, b, bs, func(x, y float64) float64 { return x * y }), fwdTol)
		prod := naiveBroadcast(seed, as, a, as, func(x, y float64) float64 { return x * y })
		db := make([]float64, len(b))
		for p, v := range naiveIndex(as, bs) {
			db[v] += prod[p]
		}
		assertClose(t, "Mul/large db", tb.Grad, db, fwdTol)
		sum := g.Add(ta, tb)
		assertClose(t, "Add/large", sum.Data, naiveBroadcast(a, as, b, bs, func(x, y float64) float64 { return x + y }), fwdTol)
	}
}

// naiveIndex maps each flat index of shape as to the flat index of the
// broadcast operand of shape bs.
func naiveIndex(as, bs []int) []int {
	n := numel(as)
	out := make([]int, n)
	idx := make([]int, len(as))
	pad := len(as) - len(bs)
	for p := range n {
		rem := p
		for ax := len(as) - 1; ax >= 0; ax-- {
			idx[ax] = rem % as[ax]
			rem /= as[ax]
		}
		q := 0
		for ax := pad; ax < len(as); ax++ {
			i := idx[ax]
			if bs[ax-pad] == 1 {
				i = 0
			}
			q = q*bs[ax-pad] + i
		}
		out[p] = q
	}
	return out
}

func TestSubForward(t *testing.T) {
	g := NewGraph()
	d := g.Sub(g.Input([]float32{5, 7, 9, 11}, 2, 2), g.Input([]float32{1, 2}, 2))
	assertClose(t, "Sub", d.Data, []float64{4, 5, 8, 9}, 0)
}

// TestCrossAttentionSegments checks segmented cross-attention against the
// naive reference: rows of unequal segments attend to their observation's
// keys and values (float32 sums: fwdTol as for the other attention ops).
func TestCrossAttentionSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 1))
	const be, tq, tk, heads, w = 3, 3, 5, 2, 8
	segs := []Segment{{Row: 0, Rows: 2, Obs: 1}, {Row: 2, Rows: 1, Obs: 0}, {Row: 3, Rows: 3, Obs: 1}, {Row: 6, Rows: 1, Obs: 2}}
	const b = 7
	obsOf := []int{1, 1, 0, 1, 1, 1, 2}
	qd := randData(r, b*tq*w)
	kvd := randData(r, be*tk*2*w)
	want := naiveAttention(b, tq, tk, heads, w,
		func(s, i, c int) float64 { return float64(qd[(s*tq+i)*w+c]) },
		func(s, j, c int) float64 { return float64(kvd[(obsOf[s]*tk+j)*2*w+c]) },
		func(s, j, c int) float64 { return float64(kvd[(obsOf[s]*tk+j)*2*w+w+c]) },
		func(int, int, int) bool { return true })
	g := NewInferenceGraph()
	got := g.CrossAttentionSegments(g.Input(qd, b, tq, w), g.Input(kvd, be, tk, 2*w), heads, segs)
	assertClose(t, "CrossAttentionSegments", got.Data, want, fwdTol)
	defer func() {
		if recover() == nil {
			t.Fatal("segments with a gap did not panic")
		}
	}()
	g.CrossAttentionSegments(g.Input(qd, b, tq, w), g.Input(kvd, be, tk, 2*w), heads, segs[1:])
}
