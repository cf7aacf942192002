package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// testBlock is one pre-norm transformer block of the reference network
// (the authors' reference implementation): LN → AdaLN → masked self-attention → residual →
// LN → cross-attention → residual → LN → AdaLN → MLP(GELU) → residual.
type testBlock struct {
	heads, d int
	p        map[string]*Tensor
}

// newTestBlock creates the block's parameters under sc. Every weight is
// random (the real network zero-initialises the AdaLN output layers, which
// would hide their gradients from the check).
func newTestBlock(sc Scope, d, ctxDim, heads int) *testBlock {
	b := &testBlock{heads: heads, d: d, p: map[string]*Tensor{}}
	hc := max(ctxDim, 2*d)
	w, small := VarianceScaling(1), Normal(0.3)
	add := func(name string, init Init, shape ...int) { b.p[name] = sc.New(name, init, shape...) }
	for _, ln := range []string{"ln1", "ln2", "ln3"} {
		add(ln+".scale", func(r *rand.Rand, _ []int, x []float32) {
			for i := range x {
				x[i] = 1 + 0.2*float32(r.NormFloat64())
			}
		}, d)
		add(ln+".bias", small, d)
	}
	for _, c := range []string{"cond1", "cond3"} {
		add(c+".w1", w, ctxDim, hc)
		add(c+".b1", small, hc)
		add(c+".w2", Normal(0.1), hc, 2*d)
		add(c+".b2", small, 2*d)
	}
	add("attn.wqkv", w, d, 3*d)
	add("attn.bqkv", small, 3*d)
	add("attn.wo", w, d, d)
	add("attn.bo", small, d)
	add("cross.wq", w, d, d)
	add("cross.wkv", w, d, 2*d)
	add("cross.wo", w, d, d)
	add("cross.bo", small, d)
	add("mlp.w1", w, d, 4*d)
	add("mlp.b1", small, 4*d)
	add("mlp.w2", w, 4*d, d)
	add("mlp.b2", small, d)
	return b
}

// adaLN returns the modulation (s, c), each [B, D], from the context [B, C].
func (b *testBlock) adaLN(g *Graph, name string, ctx *Tensor) (s, c *Tensor) {
	h := g.LinearGELU(ctx, b.p[name+".w1"], b.p[name+".b1"])
	sc := g.Linear(h, b.p[name+".w2"], b.p[name+".b2"])
	return g.Slice(sc, -1, 0, b.d), g.Slice(sc, -1, b.d, 2*b.d)
}

// forward maps x [B, T, D] with encoder tokens y [B, Tk, D] and context
// ctx [B, C] to [B, T, D].
func (b *testBlock) forward(g *Graph, x, y, ctx *Tensor, self, cross Mask) *Tensor {
	p := b.p
	s, c := b.adaLN(g, "cond1", ctx)
	h := g.LayerNormModulate(x, p["ln1.scale"], p["ln1.bias"], s, c)
	a := g.SelfAttention(g.Linear(h, p["attn.wqkv"], p["attn.bqkv"]), b.heads, self)
	x = g.Add(x, g.Linear(a, p["attn.wo"], p["attn.bo"]))

	h = g.LayerNorm(x, p["ln2.scale"], p["ln2.bias"])
	a = g.CrossAttention(g.Linear(h, p["cross.wq"], nil), g.Linear(y, p["cross.wkv"], nil), b.heads, cross)
	x = g.Add(x, g.Linear(a, p["cross.wo"], p["cross.bo"]))

	s, c = b.adaLN(g, "cond3", ctx)
	h = g.Modulate(g.LayerNorm(x, p["ln3.scale"], p["ln3.bias"]), s, c)
	m := g.Linear(g.LinearGELU(h, p["mlp.w1"], p["mlp.b1"]), p["mlp.w2"], p["mlp.b2"])
	return g.Add(x, m)
}

// TestGradBlock checks the gradient of a whole block with respect to its
// inputs (tokens, encoder tokens, context) and every parameter, with a causal
// and with a random block self-attention mask and a key-padding cross mask.
func TestGradBlock(t *testing.T) {
	const bsz, tt, tk, d, ctxDim, heads = 2, 5, 4, 8, 3, 2
	r := rand.New(rand.NewPCG(20, 1))
	keys := make([]bool, bsz*tk)
	for i := range keys {
		keys[i] = i != 2 && i != 7
	}
	cross := KeyMask(nil, keys, bsz, tt, tk)
	for name, self := range map[string]Mask{"causal": CausalMask(tt), "block": randomBlockMask(r, bsz, tt)} {
		store := NewParamStore(rand.New(rand.NewPCG(21, 1)))
		blk := newTestBlock(store.Scope("dec").Subf("layer%d", 0), d, ctxDim, heads)
		leaves := []leaf{randLeaf(r, 1, bsz, tt, d), randLeaf(r, 1, bsz, tk, d), randLeaf(r, 1, bsz, ctxDim)}
		for _, p := range store.All() {
			leaves = append(leaves, leaf{shape: p.Shape, data: p.Data, param: true})
		}
		gradCheck(t, "Block/"+name, 22, leaves, func(g *Graph, x []*Tensor) *Tensor {
			// Rebind the block to the checker's parameter tensors.
			for i, p := range store.All() {
				blk.p[p.Name[len("dec.layer0."):]] = x[3+i]
			}
			return blk.forward(g, x[0], x[1], x[2], self, cross)
		})
	}
}

// blockGraph builds a block's forward pass for the VJP and allocation tests.
func blockSetup(seed uint64) (store *ParamStore, blk *testBlock, x, y, ctx []float32, self, cross Mask) {
	const bsz, tt, tk, d, ctxDim, heads = 2, 5, 4, 8, 3, 2
	r := rand.New(rand.NewPCG(seed, 1))
	store = NewParamStore(r)
	blk = newTestBlock(store.Scope("blk"), d, ctxDim, heads)
	x, y, ctx = randData(r, bsz*tt*d), randData(r, bsz*tk*d), randData(r, bsz*ctxDim)
	return store, blk, x, y, ctx, randomBlockMask(r, bsz, tt), Mask{}
}

// TestRepeatedVJP takes one-hot vector–Jacobian products on one recorded
// graph, as the exact-trace density needs, and compares each with a fresh
// graph's: graph gradients must be re-zeroed between calls, parameter
// gradients must not move when parameters are frozen.
func TestRepeatedVJP(t *testing.T) {
	store, blk, x, y, ctx, self, cross := blockSetup(30)
	store.SetRequiresGrad(false)
	g := NewGraph()
	xv := g.Variable(x, 2, 5, 8)
	out := blk.forward(g, xv, g.Input(y, 2, 4, 8), g.Input(ctx, 2, 3), self, cross)
	seed := make([]float32, out.Size())
	var trace float64
	for _, i := range []int{0, 7, 41, 79} {
		clear(seed)
		seed[i] = 1
		g.BackwardFrom(out, seed)
		got := append([]float32(nil), xv.Grad...)
		trace += float64(got[i])

		fresh := NewGraph()
		fx := fresh.Variable(x, 2, 5, 8)
		fo := blk.forward(fresh, fx, fresh.Input(y, 2, 4, 8), fresh.Input(ctx, 2, 3), self, cross)
		fresh.BackwardFrom(fo, seed)
		for j := range got {
			if got[j] != fx.Grad[j] {
				t.Fatalf("VJP %d: repeated gradient[%d] = %v, fresh graph %v", i, j, got[j], fx.Grad[j])
			}
		}
	}
	if trace == 0 || math.IsNaN(trace) {
		t.Errorf("diagonal Jacobian entries sum to %v", trace)
	}
	for _, p := range store.All() {
		for _, v := range p.Grad {
			if v != 0 {
				t.Fatalf("frozen parameter %s received gradient %v", p.Name, v)
			}
		}
	}
	if p := store.Get("blk.mlp.w1"); p == nil || p.RequiresGrad() {
		t.Fatalf("parameter lookup/freeze failed: %v", p)
	}
}

// TestParamGradAccumulates checks that parameter gradients add up over two
// backward passes (the documented contract) while graph gradients do not.
func TestParamGradAccumulates(t *testing.T) {
	store, blk, x, y, ctx, self, cross := blockSetup(31)
	g := NewGraph()
	out := g.Sum(blk.forward(g, g.Input(x, 2, 5, 8), g.Input(y, 2, 4, 8), g.Input(ctx, 2, 3), self, cross))
	g.Backward(out)
	w := store.Get("blk.attn.wqkv")
	once := append([]float32(nil), w.Grad...)
	g.Backward(out)
	for i := range once {
		if math.Abs(float64(w.Grad[i]-2*once[i])) > 1e-6*(1+math.Abs(float64(once[i]))) {
			t.Fatalf("grad[%d] after two passes %v, want 2×%v", i, w.Grad[i], once[i])
		}
	}
}

// TestStepAllocations runs forward + backward + Reset of a block repeatedly
// and requires that, after warm-up, a step allocates nothing: every buffer
// and header comes back from the arena, tape nodes are reused, and at these
// sizes no op hands work to the second core.
func TestStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	store, blk, x, y, ctx, self, cross := blockSetup(32)
	g := NewGraph()
	step := func() {
		g.Reset()
		store.ZeroGrad()
		out := g.Mean(blk.forward(g, g.Variable(x, 2, 5, 8), g.Input(y, 2, 4, 8), g.Input(ctx, 2, 3), self, cross))
		g.Backward(out)
	}
	step()
	if a := testing.AllocsPerRun(20, step); a != 0 {
		t.Errorf("training step allocates %v times after warm-up, want 0", a)
	}
	inf := NewInferenceGraph()
	fwd := func() {
		inf.Reset()
		blk.forward(inf, inf.Input(x, 2, 5, 8), inf.Input(y, 2, 4, 8), inf.Input(ctx, 2, 3), self, cross)
	}
	fwd()
	if a := testing.AllocsPerRun(20, fwd); a != 0 {
		t.Errorf("inference pass allocates %v times after warm-up, want 0", a)
	}
	if inf.NumNodes() != 0 {
		t.Errorf("inference graph recorded %d nodes", inf.NumNodes())
	}
}

// TestResetWithNewShapes reuses one graph across batch sizes (growing and
// shrinking buffers) and compares outputs and input gradients with fresh
// graphs, bit for bit.
func TestResetWithNewShapes(t *testing.T) {
	_, blk, _, _, _, _, _ := blockSetup(33)
	r := rand.New(rand.NewPCG(34, 1))
	g := NewGraph()
	for _, b := range []int{2, 5, 1, 5} {
		x, y, ctx := randData(r, b*5*8), randData(r, b*4*8), randData(r, b*3)
		run := func(g *Graph) ([]float32, []float32) {
			xv := g.Variable(x, b, 5, 8)
			out := blk.forward(g, xv, g.Input(y, b, 4, 8), g.Input(ctx, b, 3), CausalMask(5), Mask{})
			g.Backward(g.Sum(out))
			return append([]float32(nil), out.Data...), append([]float32(nil), xv.Grad...)
		}
		g.Reset()
		o1, d1 := run(g)
		o2, d2 := run(NewGraph())
		for i := range o1 {
			if o1[i] != o2[i] {
				t.Fatalf("B=%d: output %d differs after Reset: %v vs %v", b, i, o1[i], o2[i])
			}
		}
		for i := range d1 {
			if d1[i] != d2[i] {
				t.Fatalf("B=%d: gradient %d differs after Reset: %v vs %v", b, i, d1[i], d2[i])
			}
		}
	}
	if g.ArenaBytes() == 0 {
		t.Error("arena is empty")
	}
}

// TestInferenceMatchesTraining requires the tape-free forward pass to give
// the training graph's outputs exactly (same kernels, same order).
func TestInferenceMatchesTraining(t *testing.T) {
	_, blk, x, y, ctx, self, cross := blockSetup(35)
	tr, inf := NewGraph(), NewInferenceGraph()
	a := blk.forward(tr, tr.Variable(x, 2, 5, 8), tr.Input(y, 2, 4, 8), tr.Input(ctx, 2, 3), self, cross)
	b := blk.forward(inf, inf.Variable(x, 2, 5, 8), inf.Input(y, 2, 4, 8), inf.Input(ctx, 2, 3), self, cross)
	if !a.RequiresGrad() || b.RequiresGrad() || inf.NumNodes() != 0 {
		t.Fatalf("requiresGrad train %v, inference %v, inference nodes %d", a.RequiresGrad(), b.RequiresGrad(), inf.NumNodes())
	}
	for i := range a.Data {
		if a.Data[i] != b.Data[i] {
			t.Fatalf("output %d: training %v, inference %v", i, a.Data[i], b.Data[i])
		}
	}
}
