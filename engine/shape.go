package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// ---------------------------------------------------------------------------
// Embedding: out[..., :] = table[idx[...], :].
// table [V, D], idx any shape (as a flat slice with shape idxShape) → [idxShape..., D].

// Embedding gathers rows of table [V, D] by index; the result has shape
// idxShape + [D]. Indices must lie in [0, V).
func (g *Graph) Embedding(table *Tensor, idx []int32, idxShape ...int) *Tensor {
	if table.Rank() != 2 || numel(idxShape) != len(idx) {
		panic(fmt.Sprintf("engine: Embedding of table %v with %d indices of shape %s", table.Shape, len(idx), shapeString(idxShape)))
	}
	v, d := table.Shape[0], table.Shape[1]
	t := g.header(idxShape)
	t.Shape = append(t.Shape, d)
	out := g.alloc(t, g.anyGrad(table))
	for r, i := range idx {
		if i < 0 || int(i) >= v {
			panic(fmt.Sprintf("engine: Embedding index %d out of range [0, %d)", i, v))
		}
		copy(out.Data[r*d:(r+1)*d], table.Data[int(i)*d:(int(i)+1)*d])
	}
	if out.requiresGrad {
		nd := g.record(out, embeddingBackward)
		nd.embedding = embeddingRec{table: table, idx: idx, d: d}
	}
	return out
}

// dtable[idx[r], :] += dout[r, :] (scatter-add; repeated indices add up).
func embeddingBackward(g *Graph, nd *node) {
	table, d, dy := nd.embedding.table, nd.embedding.d, nd.out.Grad
	if !table.needsGrad() {
		return
	}
	for r, i := range nd.embedding.idx {
		kernels.Axpy(1, dy[r*d:(r+1)*d], table.Grad[int(i)*d:(int(i)+1)*d])
	}
}

// ---------------------------------------------------------------------------
// Concat along an axis: all inputs agree on every other axis. Viewing each
// input as [outer, n_k·inner], the output row is the inputs' rows side by side.

// Concat joins tensors along axis (negative counts from the end), e.g.
// axis −1 for features, axis 1 for the token axis of [B, T, D] tensors.
func (g *Graph) Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic("engine: Concat of nothing")
	}
	r := ts[0].Rank()
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		panic(fmt.Sprintf("engine: Concat axis %d for rank %d", axis, r))
	}
	total := 0
	grad := false
	for _, t := range ts {
		if t.Rank() != r {
			panic(fmt.Sprintf("engine: Concat of %v and %v", ts[0].Shape, t.Shape))
		}
		for i := range r {
			if i != axis && t.Shape[i] != ts[0].Shape[i] {
				panic(fmt.Sprintf("engine: Concat along axis %d of %v and %v", axis, ts[0].Shape, t.Shape))
			}
		}
		total += t.Shape[axis]
		grad = grad || t.needsGrad()
	}
	h := g.header(ts[0].Shape)
	h.Shape[axis] = total
	out := g.alloc(h, grad && !g.noGrad)
	outer := numel(h.Shape[:axis])
	inner := numel(h.Shape[axis+1:])
	row := total * inner
	off := 0
	for _, t := range ts {
		w := t.Shape[axis] * inner
		for o := range outer {
			copy(out.Data[o*row+off:o*row+off+w], t.Data[o*w:(o+1)*w])
		}
		off += w
	}
	if out.requiresGrad {
		nd := g.record(out, concatBackward)
		nd.ins = append(nd.ins[:0], ts...)
		nd.concat = concatRec{outer: outer, row: row, axis: axis}
	}
	return out
}

// Each input's gradient is its block of dout's rows.
func concatBackward(g *Graph, nd *node) {
	outer, row, axis, dy := nd.concat.outer, nd.concat.row, nd.concat.axis, nd.out.Grad
	inner := row / nd.out.Shape[axis]
	off := 0
	for _, t := range nd.ins {
		w := t.Shape[axis] * inner
		if t.needsGrad() {
			for o := range outer {
				kernels.Axpy(1, dy[o*row+off:o*row+off+w], t.Grad[o*w:(o+1)*w])
			}
		}
		off += w
	}
}

// ---------------------------------------------------------------------------
// Slice along an axis: out = x[..., lo:hi, ...].

// Slice returns the index range [lo, hi) of x along axis (negative counts
// from the end) as a new tensor (a copy).
func (g *Graph) Slice(x *Tensor, axis, lo, hi int) *Tensor {
	r := x.Rank()
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r || lo < 0 || hi > x.Shape[axis] || lo > hi {
		panic(fmt.Sprintf("engine: Slice [%d, %d) along axis %d of %v", lo, hi, axis, x.Shape))
	}
	h := g.header(x.Shape)
	h.Shape[axis] = hi - lo
	out := g.alloc(h, g.anyGrad(x))
	outer := numel(x.Shape[:axis])
	inner := numel(x.Shape[axis+1:])
	in, off, w := x.Shape[axis]*inner, lo*inner, (hi-lo)*inner
	for o := range outer {
		copy(out.Data[o*w:(o+1)*w], x.Data[o*in+off:o*in+off+w])
	}
	if out.requiresGrad {
		nd := g.record(out, sliceBackward)
		nd.unary = unaryRec{x: x, outer: outer, in: in, off: off, w: w}
	}
	return out
}

// dx[..., lo:hi, ...] += dout.
func sliceBackward(g *Graph, nd *node) {
	x, dy := nd.unary.x, nd.out.Grad
	if !x.needsGrad() {
		return
	}
	outer, in, off, w := nd.unary.outer, nd.unary.in, nd.unary.off, nd.unary.w
	for o := range outer {
		kernels.Axpy(1, dy[o*w:(o+1)*w], x.Grad[o*in+off:o*in+off+w])
	}
}

// ---------------------------------------------------------------------------
// Reshape: same data, new shape (a copy-free view).

// Reshape returns x with a new shape of the same size. The result shares
// x's data (and gradient flows back unchanged).
func (g *Graph) Reshape(x *Tensor, shape ...int) *Tensor {
	if numel(shape) != x.Size() {
		panic(fmt.Sprintf("engine: Reshape of %v to %s", x.Shape, shapeString(shape)))
	}
	out := g.header(shape)
	out.Data = x.Data
	if g.anyGrad(x) {
		// A separate gradient buffer keeps the invariant that every
		// recorded node owns its output gradient.
		g.attachGrad(out)
		nd := g.record(out, reshapeBackward)
		nd.unary = unaryRec{x: x}
	}
	return out
}

// dx += dout.
func reshapeBackward(g *Graph, nd *node) {
	if x := nd.unary.x; x.needsGrad() {
		kernels.Axpy(1, nd.out.Grad, x.Grad)
	}
}
