package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Gradient checks of every op (see gradcheck_test.go for the method and the
// tolerance).

func TestGradLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	gradCheck(t, "Linear", 1, []leaf{randLeaf(r, 1, 2, 3, 5), paramLeaf(r, 0.5, 5, 4), paramLeaf(r, 1, 4)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Linear(x[0], x[1], x[2]) })
	gradCheck(t, "Linear/nobias", 2, []leaf{randLeaf(r, 1, 7, 3), paramLeaf(r, 0.5, 3, 6)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Linear(x[0], x[1], nil) })
	gradCheck(t, "LinearGELU", 3, []leaf{randLeaf(r, 1, 2, 3, 5), paramLeaf(r, 0.5, 5, 8), paramLeaf(r, 1, 8)},
		func(g *Graph, x []*Tensor) *Tensor { return g.LinearGELU(x[0], x[1], x[2]) })
}

func TestGradMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			sa, sb := []int{2, 3, 4}, []int{2, 4, 5} // op(a) [2,3,4], op(b) [2,4,5]
			if ta {
				sa = []int{2, 4, 3}
			}
			if tb {
				sb = []int{2, 5, 4}
			}
			gradCheck(t, fmt.Sprintf("MatMul/%v%v", ta, tb), 4, []leaf{randLeaf(r, 1, sa...), randLeaf(r, 1, sb...)},
				func(g *Graph, x []*Tensor) *Tensor { return g.MatMul(x[0], x[1], ta, tb) })
			gradCheck(t, fmt.Sprintf("MatMul/shared/%v%v", ta, tb), 5, []leaf{randLeaf(r, 1, sa...), paramLeaf(r, 1, sb[1:]...)},
				func(g *Graph, x []*Tensor) *Tensor { return g.MatMul(x[0], x[1], ta, tb) })
		}
	}
}

func TestGradBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	cases := []struct {
		name string
		a, b []int
	}{
		{"equal", []int{2, 3, 4}, []int{2, 3, 4}},
		{"[B,1,D]", []int{2, 3, 4}, []int{2, 1, 4}},
		{"[D]", []int{2, 3, 4}, []int{4}},
		{"[B,T,1]", []int{2, 3, 4}, []int{2, 3, 1}},
		{"scalar", []int{2, 3, 4}, []int{}},
		{"scalar[1]", []int{2, 3, 4}, []int{1}},
	}
	for _, c := range cases {
		for _, swap := range []bool{false, true} {
			la, lb := randLeaf(r, 1, c.a...), randLeaf(r, 1, c.b...)
			name := c.name
			if swap {
				la, lb = lb, la
				name += "/swapped"
			}
			gradCheck(t, "Add/"+name, 6, []leaf{la, lb}, func(g *Graph, x []*Tensor) *Tensor { return g.Add(x[0], x[1]) })
			gradCheck(t, "Mul/"+name, 7, []leaf{la, lb}, func(g *Graph, x []*Tensor) *Tensor { return g.Mul(x[0], x[1]) })
		}
	}
	// Same tensor on both sides: gradients of both uses must add up.
	gradCheck(t, "Mul/self", 8, []leaf{randLeaf(r, 1, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor { return g.Mul(x[0], x[0]) })
}

func TestGradElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	gradCheck(t, "Scale", 9, []leaf{randLeaf(r, 1, 3, 5)}, func(g *Graph, x []*Tensor) *Tensor { return g.Scale(x[0], -1.7) })
	gradCheck(t, "GELU", 10, []leaf{randLeaf(r, 2, 4, 9)}, func(g *Graph, x []*Tensor) *Tensor { return g.GELU(x[0]) })
}

func TestGradLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	gradCheck(t, "LayerNorm/affine", 11, []leaf{randLeaf(r, 1, 2, 3, 8), paramLeaf(r, 1, 8), paramLeaf(r, 1, 8)},
		func(g *Graph, x []*Tensor) *Tensor { return g.LayerNorm(x[0], x[1], x[2]) })
	gradCheck(t, "LayerNorm/plain", 12, []leaf{randLeaf(r, 1, 5, 8)},
		func(g *Graph, x []*Tensor) *Tensor { return g.LayerNorm(x[0], nil, nil) })
	gradCheck(t, "Modulate", 13, []leaf{randLeaf(r, 1, 2, 3, 4), randLeaf(r, 0.5, 2, 4), randLeaf(r, 1, 2, 1, 4)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Modulate(x[0], x[1], x[2]) })
	gradCheck(t, "LayerNormModulate", 14, []leaf{randLeaf(r, 1, 2, 3, 8), paramLeaf(r, 1, 8), paramLeaf(r, 1, 8), randLeaf(r, 0.5, 2, 8), randLeaf(r, 1, 2, 8)},
		func(g *Graph, x []*Tensor) *Tensor { return g.LayerNormModulate(x[0], x[1], x[2], x[3], x[4]) })
	gradCheck(t, "LayerNormModulate/plain", 15, []leaf{randLeaf(r, 1, 2, 3, 8), randLeaf(r, 0.5, 2, 8), randLeaf(r, 1, 2, 8)},
		func(g *Graph, x []*Tensor) *Tensor { return g.LayerNormModulate(x[0], nil, nil, x[1], x[2]) })
}

// randomBlockMask draws per-sample token activity with probability ½ and
// returns the parameter decoder's activity mask.
func randomBlockMask(r *rand.Rand, b, t int) Mask {
	act := make([]bool, b*t)
	for i := range act {
		act[i] = r.IntN(2) == 0
	}
	return ActivityMask(nil, act, b, t)
}

func TestGradAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	const b, tq, tk, heads, w = 2, 5, 4, 2, 6
	keys := make([]bool, b*tk)
	for i := range keys {
		keys[i] = i%3 != 1
	}
	masks := map[string]Mask{
		"none":   {},
		"causal": CausalMask(tq),
		"block":  randomBlockMask(r, b, tq),
	}
	for name, m := range masks {
		gradCheck(t, "Attention/"+name, 16, []leaf{randLeaf(r, 1, b, tq, w), randLeaf(r, 1, b, tq, w), randLeaf(r, 1, b, tq, w)},
			func(g *Graph, x []*Tensor) *Tensor { return g.Attention(x[0], x[1], x[2], heads, m) })
		gradCheck(t, "SelfAttention/"+name, 17, []leaf{randLeaf(r, 1, b, tq, 3*w)},
			func(g *Graph, x []*Tensor) *Tensor { return g.SelfAttention(x[0], heads, m) })
	}
	km := KeyMask(nil, keys, b, tq, tk)
	gradCheck(t, "CrossAttention/keymask", 18, []leaf{randLeaf(r, 1, b, tq, w), randLeaf(r, 1, b, tk, 2*w)},
		func(g *Graph, x []*Tensor) *Tensor { return g.CrossAttention(x[0], x[1], heads, km) })
	gradCheck(t, "Attention/cross", 19, []leaf{randLeaf(r, 1, b, tq, w), randLeaf(r, 1, b, tk, w), randLeaf(r, 1, b, tk, w)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Attention(x[0], x[1], x[2], heads, Mask{}) })
}

func TestGradShapeOps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	idx := []int32{2, 0, 2, 4, 1, 2}
	gradCheck(t, "Embedding", 20, []leaf{paramLeaf(r, 1, 5, 3)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Embedding(x[0], idx, 2, 3) })
	gradCheck(t, "Concat/last", 21, []leaf{randLeaf(r, 1, 2, 3, 2), randLeaf(r, 1, 2, 3, 4), randLeaf(r, 1, 2, 3, 1)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Concat(-1, x[0], x[1], x[2]) })
	gradCheck(t, "Concat/tokens", 22, []leaf{randLeaf(r, 1, 2, 1, 4), randLeaf(r, 1, 2, 3, 4)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Concat(1, x[0], x[1]) })
	gradCheck(t, "Slice/last", 23, []leaf{randLeaf(r, 1, 2, 3, 6)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Slice(x[0], -1, 1, 4) })
	gradCheck(t, "Slice/tokens", 24, []leaf{randLeaf(r, 1, 2, 5, 3)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Slice(x[0], 1, 1, 3) })
	gradCheck(t, "Reshape", 25, []leaf{randLeaf(r, 1, 2, 6)},
		func(g *Graph, x []*Tensor) *Tensor { return g.GELU(g.Reshape(x[0], 3, 4)) })
}

func TestGradFourier(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	for _, c := range []struct{ in, out int }{{1, 8}, {1, 7}, {3, 5}} {
		gradCheck(t, fmt.Sprintf("Fourier/%d→%d", c.in, c.out), 26, []leaf{randLeaf(r, 0.5, 2, 3, c.in), paramLeaf(r, 1, (c.out+1)/2, c.in)},
			func(g *Graph, x []*Tensor) *Tensor { return g.FourierFeatures(x[0], x[1], c.out) })
	}
}

func TestGradReductionsAndLosses(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	gradCheck(t, "Sum", 27, []leaf{randLeaf(r, 1, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor { return g.Sum(g.GELU(x[0])) })
	gradCheck(t, "Mean", 28, []leaf{randLeaf(r, 1, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor { return g.Mean(g.GELU(x[0])) })
	gradCheck(t, "SumLast", 29, []leaf{randLeaf(r, 1, 2, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor { return g.SumLast(x[0]) })
	gradCheck(t, "MeanLast", 30, []leaf{randLeaf(r, 1, 2, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor { return g.MeanLast(x[0]) })
	targets, weights := make([]float32, 12), make([]float32, 12)
	for i := range targets {
		targets[i] = float32(i % 2)
		weights[i] = float32(i % 3 % 2)
	}
	gradCheck(t, "BCEWithLogits", 31, []leaf{randLeaf(r, 2, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor {
		return g.BCEWithLogits(x[0], g.Input(targets, 3, 4), g.Input(weights, 3, 4))
	})
	ceBias := make([]float32, 12)
	for i := range ceBias {
		ceBias[i] = float32(i%5) - 2
	}
	gradCheck(t, "SoftmaxCrossEntropy", 34, []leaf{randLeaf(r, 2, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor {
		return g.SoftmaxCrossEntropy(x[0], g.Input(ceBias, 3, 4), []int32{3, 0, 2}, g.Input([]float32{1, 0.5, 2}, 3))
	})
	gradCheck(t, "MaskedSquaredError", 32, []leaf{randLeaf(r, 1, 3, 4), randLeaf(r, 1, 3, 4)}, func(g *Graph, x []*Tensor) *Tensor {
		return g.MaskedSquaredError(x[0], x[1], g.Input(weights, 3, 4))
	})
}

func TestGradSub(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	gradCheck(t, "Sub", 33, []leaf{randLeaf(r, 1, 2, 3, 4), randLeaf(r, 1, 2, 1, 4)},
		func(g *Graph, x []*Tensor) *Tensor { return g.Sub(x[0], x[1]) })
}

// TestGradAttentionFullyMasked covers a sample whose queries may attend no
// key at all: its output is zero and no gradient flows to its keys/values.
func TestGradAttentionFullyMasked(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	const b, tq, tk, heads, w = 2, 3, 4, 2, 4
	keys := []bool{false, false, false, false, true, false, true, true}
	m := KeyMask(nil, keys, b, tq, tk)
	gradCheck(t, "CrossAttention/fullymasked", 34, []leaf{randLeaf(r, 1, b, tq, w), randLeaf(r, 1, b, tk, 2*w)},
		func(g *Graph, x []*Tensor) *Tensor { return g.CrossAttention(x[0], x[1], heads, m) })
	g := NewGraph()
	q, kv := g.Variable(randData(r, b*tq*w), b, tq, w), g.Variable(randData(r, b*tk*2*w), b, tk, 2*w)
	out := g.CrossAttention(q, kv, heads, m)
	g.Backward(g.Sum(out))
	for i, v := range out.Data[:tq*w] {
		if v != 0 {
			t.Fatalf("fully masked sample: output %d = %v, want 0", i, v)
		}
	}
	for i, v := range kv.Grad[:tk*2*w] {
		if v != 0 {
			t.Fatalf("fully masked sample: kv gradient %d = %v, want 0", i, v)
		}
	}
}
