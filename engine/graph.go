package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// Graph records operations for reverse-mode differentiation and owns every
// intermediate tensor and buffer of one forward pass.
//
// Memory: all float32 buffers and Tensor headers come from an arena that
// Reset rewinds without freeing. Because a network runs the same sequence of
// operations every step, the i-th request after Reset gets the i-th buffer of
// the previous pass back (grown if it is now too small), so a training step
// allocates nothing after the first one except for the goroutine hand-offs
// of the parallel elementwise ops.
//
// Tape: an operation whose output requires a gradient appends a node holding
// its inputs, saved activations and a pointer to its backward function (a
// plain top-level function, so recording does not allocate). Backward walks
// the nodes in reverse. Gradients of intermediates and of Variable inputs are
// arena buffers, zeroed at the start of every backward pass, so
// BackwardFrom can be called many times on one recorded graph (e.g. one
// vector–Jacobian product per output dimension). Parameter gradients
// accumulate across calls; zero them with ParamStore.ZeroGrad.
//
// A Graph is not safe for concurrent use.
type Graph struct {
	noGrad bool // inference mode: nothing requires a gradient, nothing is saved

	nodes []node

	bufs  [][]float32 // float32 arena, handed out in order
	nbuf  int
	tens  []*Tensor // Tensor header arena
	ntens int
	owned []*Tensor    // graph tensors with a gradient buffer, zeroed before backward
	sinks [3][]float32 // scratch gradient sinks for unused kernel outputs
}

// node is one recorded operation: its backward function, its output, and
// what the backward needs, in the named record of its operation's kind
// (the records of other kinds stay zero).
type node struct {
	back func(g *Graph, n *node)
	out  *Tensor
	ins  []*Tensor // variable-arity inputs (Concat); storage kept across Reset

	binary    binaryRec    // Add, Mul
	unary     unaryRec     // Scale, GELU, Reshape, SumAll, SumLast, Slice
	linear    linearRec    // Linear, LinearGELU
	matmul    matMulRec    // MatMul
	norm      normRec      // LayerNorm, Modulate, LayerNormModulate
	loss      lossRec      // BCEWithLogits, SoftmaxCE, MaskedMSE
	fourier   fourierRec   // FourierFeatures
	embedding embeddingRec // Embedding
	concat    concatRec    // Concat
	attention attentionRec // Attention
}

// binaryRec: out = a ∘ b with b broadcast over the middle axis of a's
// [O, M, I] view.
type binaryRec struct {
	a, b *Tensor
	bc   bcast
}

// unaryRec: one input x, a scalar and the row shape where the op needs
// them (Scale: alpha; SumAll, SumLast: the factor c; SumLast: rows × d;
// Slice: the [outer, in] view, column offset and width).
type unaryRec struct {
	x                 *Tensor
	alpha             float32
	rows, d           int
	outer, in, off, w int
}

// linearRec: out = x·w + bias for x [m, k], w [k, n]; LinearGELU also
// keeps the pre-activation z and a buffer for its gradient.
type linearRec struct {
	x, w, bias *Tensor
	m, k, n    int
	z, dz      []float32
}

// matMulRec: out = op(a)·op(b) per batch item ([m, k]·[k, n]); shared
// means one b for every batch item.
type matMulRec struct {
	a, b                   *Tensor
	batch, m, n, k         int
	transA, transB, shared bool
}

// normRec: LayerNorm (x, gamma, beta; rows × d), Modulate (x·(1+scale) +
// shift over [b, t, d]) and their fusion; mean and rstd are the saved row
// statistics.
type normRec struct {
	x, gamma, beta, scale, shift *Tensor
	mean, rstd                   []float32
	rows, d, b, t                int
}

// lossRec: the scalar losses. input holds logits or predictions, target
// the targets (BCE, MSE), weights the per-row weights or MSE mask, bias
// SoftmaxCE's logit bias, classes its target indices and probs its saved
// softmax.
type lossRec struct {
	input, target, weights, bias *Tensor
	classes                      []int32
	probs                        []float32
}

// fourierRec: Gaussian Fourier features of u [n, in] with projection p
// [m, in] to width out; z keeps 2π·u·pᵀ, dz a buffer for its gradient.
type fourierRec struct {
	u, p           *Tensor
	z, dz          []float32
	n, in, m, outW int
}

// embeddingRec: rows idx of table, each of width d.
type embeddingRec struct {
	table *Tensor
	idx   []int32
	d     int
}

// concatRec: node.ins joined along axis; outer × row is the output's
// [outer, row] view.
type concatRec struct {
	outer, row, axis int
}

// attentionRec: multi-head attention of q, k, v read from offsets oq, ok,
// ov of their data, with the saved attention probabilities.
type attentionRec struct {
	q, k, v    *Tensor
	oq, ok, ov int
	shape      kernels.AttnShape
	mask       kernels.Mask
	probs      []float32
}

// NewGraph returns an empty training graph that records a tape.
func NewGraph() *Graph { return &Graph{} }

// NewInferenceGraph returns a graph that never records a tape nor saves
// activations: ops run forward only. Use it for sampling and prediction.
func NewInferenceGraph() *Graph { return &Graph{noGrad: true} }

// Inference reports whether g is an inference (tape-free) graph.
func (g *Graph) Inference() bool { return g.noGrad }

// Reset forgets the tape and every tensor made since the last Reset, keeping
// the buffers for reuse. Tensors obtained from g before Reset must not be
// used afterwards.
func (g *Graph) Reset() {
	for i := range g.nodes {
		g.nodes[i] = node{ins: g.nodes[i].ins[:0]}
	}
	g.nodes = g.nodes[:0]
	g.nbuf = 0
	for _, t := range g.tens[:g.ntens] {
		t.Data, t.Grad, t.requiresGrad, t.node, t.Name = nil, nil, false, 0, ""
	}
	g.ntens = 0
	clear(g.owned)
	g.owned = g.owned[:0]
}

// ArenaBytes is the memory held by the graph's buffer arena, in bytes.
func (g *Graph) ArenaBytes() int {
	n := 0
	for _, b := range g.bufs {
		n += 4 * cap(b)
	}
	return n
}

// NumNodes is the number of operations on the tape.
func (g *Graph) NumNodes() int { return len(g.nodes) }

// buf returns an arena buffer of n float32 with unspecified contents.
func (g *Graph) buf(n int) []float32 {
	if g.nbuf < len(g.bufs) {
		b := g.bufs[g.nbuf]
		if cap(b) < n {
			b = make([]float32, n)
			g.bufs[g.nbuf] = b
		}
		g.nbuf++
		return b[:n]
	}
	b := make([]float32, n)
	g.bufs = append(g.bufs, b)
	g.nbuf++
	return b
}

// zbuf returns a zero-filled arena buffer.
func (g *Graph) zbuf(n int) []float32 {
	b := g.buf(n)
	clear(b)
	return b
}

// header returns a recycled Tensor header with the given shape.
func (g *Graph) header(shape []int) *Tensor {
	var t *Tensor
	if g.ntens < len(g.tens) {
		t = g.tens[g.ntens]
	} else {
		t = new(Tensor)
		g.tens = append(g.tens, t)
	}
	g.ntens++
	t.Shape = append(t.Shape[:0], shape...)
	return t
}

// newTensor makes a graph-owned tensor with unspecified contents; if grad is
// true (and the graph is not in inference mode) it gets a gradient buffer.
func (g *Graph) newTensor(grad bool, shape ...int) *Tensor {
	return g.alloc(g.header(shape), grad)
}

// newLike is newTensor with the shape of like, its last axis set to last
// (unless last < 0).
func (g *Graph) newLike(grad bool, like []int, last int) *Tensor {
	t := g.header(like)
	if last >= 0 {
		t.Shape[len(t.Shape)-1] = last
	}
	return g.alloc(t, grad)
}

// alloc gives the header t a data buffer (and a gradient buffer if grad).
func (g *Graph) alloc(t *Tensor, grad bool) *Tensor {
	t.Data = g.buf(numel(t.Shape))
	if grad && !g.noGrad {
		g.attachGrad(t)
	}
	return t
}

func (g *Graph) attachGrad(t *Tensor) {
	t.Grad = g.buf(len(t.Data))
	t.requiresGrad = true
	g.owned = append(g.owned, t)
}

// record appends a tape node for out and returns it for the op to fill.
func (g *Graph) record(out *Tensor, back func(*Graph, *node)) *node {
	if len(g.nodes) < cap(g.nodes) {
		g.nodes = g.nodes[:len(g.nodes)+1]
	} else {
		g.nodes = append(g.nodes, node{})
	}
	n := &g.nodes[len(g.nodes)-1]
	n.back = back
	n.out = out
	out.node = len(g.nodes)
	return n
}

// anyGrad reports whether any of the given tensors requires a gradient (and
// g records a tape).
func (g *Graph) anyGrad(ts ...*Tensor) bool {
	if g.noGrad {
		return false
	}
	for _, t := range ts {
		if t.needsGrad() {
			return true
		}
	}
	return false
}

// Input wraps data as a constant graph tensor of the given shape, without
// copying. No gradient flows into it.
func (g *Graph) Input(data []float32, shape ...int) *Tensor {
	if n := numel(shape); n != len(data) {
		panic(fmt.Sprintf("engine: Input of shape %s needs %d values, got %d", shapeString(shape), n, len(data)))
	}
	t := g.header(shape)
	t.Data = data
	return t
}

// Variable wraps data (without copying) as a graph tensor that receives a
// gradient: after Backward, its Grad holds ∂L/∂data. In an inference graph
// it is the same as Input.
func (g *Graph) Variable(data []float32, shape ...int) *Tensor {
	t := g.Input(data, shape...)
	if !g.noGrad {
		g.attachGrad(t)
	}
	return t
}

// Zeros returns a constant zero-filled graph tensor.
func (g *Graph) Zeros(shape ...int) *Tensor {
	t := g.header(shape)
	t.Data = g.zbuf(numel(shape))
	return t
}

// Backward computes ∂loss/∂x for every tensor x that requires a gradient;
// loss must have exactly one element. See BackwardFrom.
func (g *Graph) Backward(loss *Tensor) {
	if loss.Size() != 1 {
		panic(fmt.Sprintf("engine: Backward of non-scalar tensor %v; use BackwardFrom", loss.Shape))
	}
	one := [1]float32{1}
	g.BackwardFrom(loss, one[:])
}

// BackwardFrom runs the vector–Jacobian product seed·∂out/∂x for every
// tensor x that requires a gradient: Variable inputs, intermediates (their
// Grad is overwritten) and parameters (their Grad is accumulated into).
// It may be called repeatedly on the same recorded graph with different
// seeds; gradients of graph-owned tensors are zeroed at the start of each
// call. If out does not depend on anything that requires a gradient, it does
// nothing.
func (g *Graph) BackwardFrom(out *Tensor, seed []float32) {
	if g.noGrad {
		panic("engine: Backward on an inference graph")
	}
	if len(seed) != out.Size() {
		panic(fmt.Sprintf("engine: BackwardFrom seed has %d values, tensor %v has %d", len(seed), out.Shape, out.Size()))
	}
	if !out.requiresGrad {
		return
	}
	g.zeroOwnedGrads()
	copy(out.Grad, seed)
	for i := out.node - 1; i >= 0; i-- {
		n := &g.nodes[i]
		if n.out.requiresGrad {
			n.back(g, n)
		}
	}
}

// zeroOwnedGrads clears the gradients of all graph-owned tensors, on both
// cores when there is much to clear (it is a sizeable share of a step's
// memory traffic).
func (g *Graph) zeroOwnedGrads() {
	total := 0
	for _, t := range g.owned {
		total += len(t.Grad)
	}
	if serial(total) || len(g.owned) < 2 {
		for _, t := range g.owned {
			clear(t.Grad)
		}
		return
	}
	kernels.ParallelFor(len(g.owned), func(lo, hi int) {
		for _, t := range g.owned[lo:hi] {
			clear(t.Grad)
		}
	})
}

// sinkBuf returns scratch buffer i (0 ≤ i < 3) of n floats whose contents
// are discarded; distinct i never alias.
func (g *Graph) sinkBuf(i, n int) []float32 {
	if len(g.sinks[i]) < n {
		g.sinks[i] = make([]float32, n)
	}
	return g.sinks[i][:n]
}
