package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// grain is the number of elements below which elementwise loops run on the
// calling goroutine: handing work to the second core costs about a
// microsecond, and these loops are memory bound (well under a nanosecond per
// element), so a piece should hold tens of thousands of elements.
const grain = 1 << 15

// ---------------------------------------------------------------------------
// Broadcasting. Add and Mul accept two tensors a (the larger) and b whose
// shapes, after left-padding b with 1s, agree except on one contiguous run
// of axes where b has size 1. Viewing a as [O, M, I] (M = the broadcast run)
// and b as [O, 1, I] covers every case the network needs:
//
//	equal shapes          M = 1
//	[B,T,D] ⊕ [B,1,D]     O = B, M = T, I = D
//	[B,T,D] ⊕ [D]         O = 1, M = B·T, I = D
//	[B,T,D] ⊕ [B,T,1]     O = B·T, M = D, I = 1
//	anything ⊕ scalar     O = 1, M = size, I = 1

// bcast is the [O, M, I] view of a broadcast pair.
type bcast struct{ o, m, i int }

// broadcastShape classifies b against a; ok is false if b does not
// broadcast to a in the supported way.
func broadcastShape(a, b []int) (bc bcast, ok bool) {
	if len(b) > len(a) {
		return bc, false
	}
	pad := len(a) - len(b)
	dim := func(i int) int {
		if i < pad {
			return 1
		}
		return b[i-pad]
	}
	lo, hi := -1, -1 // the run [lo, hi) where b is 1 and a is not
	for i := range a {
		bi := dim(i)
		switch {
		case bi == a[i]:
		case bi == 1:
			if lo < 0 {
				lo = i
			} else if hi != i {
				return bc, false
			}
			hi = i + 1
		default:
			return bc, false
		}
	}
	if lo < 0 {
		return bcast{o: numel(a), m: 1, i: 1}, true
	}
	return bcast{o: numel(a[:lo]), m: numel(a[lo:hi]), i: numel(a[hi:])}, true
}

// broadcastPair orders (x, y) so that the first is the full-size tensor and
// returns the broadcast view; it panics naming op if the shapes do not fit.
func broadcastPair(op string, x, y *Tensor) (a, b *Tensor, bc bcast) {
	if bc, ok := broadcastShape(x.Shape, y.Shape); ok {
		return x, y, bc
	}
	if bc, ok := broadcastShape(y.Shape, x.Shape); ok {
		return y, x, bc
	}
	panic(fmt.Sprintf("engine: %s of shapes %v and %v: not broadcastable", op, x.Shape, y.Shape))
}

// ---------------------------------------------------------------------------
// Add: out = a + b (broadcast).

// Add returns x + y with broadcasting (see the comment on bcast).
func (g *Graph) Add(x, y *Tensor) *Tensor {
	a, b, bc := broadcastPair("Add", x, y)
	out := g.newTensor(g.anyGrad(a, b), a.Shape...)
	if bc.m == 1 {
		kernels.Add(out.Data, a.Data, b.Data)
	} else {
		if rows := bc.o * bc.m; serial(rows * bc.i) {
			addRows(a.Data, b.Data, out.Data, bc, 0, rows)
		} else {
			kernels.ParallelForGrain(rows, rowsGrain(bc.i), func(lo, hi int) { addRows(a.Data, b.Data, out.Data, bc, lo, hi) })
		}
	}
	if out.requiresGrad {
		nd := g.record(out, addBackward)
		nd.binary = binaryRec{a: a, b: b, bc: bc}
	}
	return out
}

// addRows computes rows [lo, hi) of the [O·M, I] view: out = a + b[o].
func addRows(a, b, out []float32, bc bcast, lo, hi int) {
	for r := lo; r < hi; r++ {
		o := r / bc.m
		ar, br, or := a[r*bc.i:(r+1)*bc.i], b[o*bc.i:(o+1)*bc.i], out[r*bc.i:(r+1)*bc.i]
		for j := range or {
			or[j] = ar[j] + br[j]
		}
	}
}

// da += dout;  db[o, i] += Σ_m dout[o, m, i].
func addBackward(g *Graph, nd *node) {
	a, b, bc, dy := nd.binary.a, nd.binary.b, nd.binary.bc, nd.out.Grad
	if a.needsGrad() {
		kernels.Axpy(1, dy, a.Grad)
	}
	if b.needsGrad() {
		if bc.m == 1 {
			kernels.Axpy(1, dy, b.Grad)
		} else {
			reduceBroadcast(dy, nil, b.Grad, bc)
		}
	}
}

// reduceBroadcast accumulates db[o, i] += Σ_m dy[o, m, i]·(x[o, m, i] if x
// != nil else 1), in parallel over O·I.
func reduceBroadcast(dy, x, db []float32, bc bcast) {
	n := bc.o * bc.i
	if serial(n*bc.m) || n < 2 {
		reduceRange(dy, x, db, bc, 0, n)
		return
	}
	kernels.ParallelFor(n, func(lo, hi int) { reduceRange(dy, x, db, bc, lo, hi) })
}

// reduceRange does the work of reduceBroadcast for outputs [lo, hi).
func reduceRange(dy, x, db []float32, bc bcast, lo, hi int) {
	for p := lo; p < hi; p++ {
		o, i := p/bc.i, p%bc.i
		base := o*bc.m*bc.i + i
		var s float32
		if x == nil {
			for m := range bc.m {
				s += dy[base+m*bc.i]
			}
		} else {
			for m := range bc.m {
				s += dy[base+m*bc.i] * x[base+m*bc.i]
			}
		}
		db[p] += s
	}
}

// serial reports whether work on n elements should stay on the calling
// goroutine. Call sites test it before building the closure for
// kernels.ParallelFor, because a closure handed to another goroutine is a
// heap allocation and small steps must not allocate.
func serial(n int) bool { return n < grain }

// rowsGrain is the minimum number of rows of width w per parallel piece.
func rowsGrain(w int) int { return max(1, grain/(2*max(w, 1))) }

// ---------------------------------------------------------------------------
// Mul: out = a · b (broadcast, elementwise).

// Mul returns the elementwise product x ⊙ y with broadcasting.
func (g *Graph) Mul(x, y *Tensor) *Tensor {
	a, b, bc := broadcastPair("Mul", x, y)
	out := g.newTensor(g.anyGrad(a, b), a.Shape...)
	if rows := bc.o * bc.m; serial(rows * bc.i) {
		mulRows(a.Data, b.Data, out.Data, bc, 0, rows)
	} else {
		kernels.ParallelForGrain(rows, rowsGrain(bc.i), func(lo, hi int) { mulRows(a.Data, b.Data, out.Data, bc, lo, hi) })
	}
	if out.requiresGrad {
		nd := g.record(out, mulBackward)
		nd.binary = binaryRec{a: a, b: b, bc: bc}
	}
	return out
}

func mulRows(a, b, out []float32, bc bcast, lo, hi int) {
	for r := lo; r < hi; r++ {
		o := r / bc.m
		ar, br, or := a[r*bc.i:(r+1)*bc.i], b[o*bc.i:(o+1)*bc.i], out[r*bc.i:(r+1)*bc.i]
		for j := range or {
			or[j] = ar[j] * br[j]
		}
	}
}

// da[o,m,i] += dout·b[o,i];  db[o,i] += Σ_m dout·a.
func mulBackward(g *Graph, nd *node) {
	a, b, bc, dy := nd.binary.a, nd.binary.b, nd.binary.bc, nd.out.Grad
	if a.needsGrad() {
		if rows := bc.o * bc.m; serial(rows * bc.i) {
			mulAccRows(dy, b.Data, a.Grad, bc, 0, rows)
		} else {
			kernels.ParallelForGrain(rows, rowsGrain(bc.i), func(lo, hi int) { mulAccRows(dy, b.Data, a.Grad, bc, lo, hi) })
		}
	}
	if b.needsGrad() {
		reduceBroadcast(dy, a.Data, b.Grad, bc)
	}
}

// mulAccRows accumulates rows [lo, hi) of da[o,m,:] += dy[o,m,:]·b[o,:].
func mulAccRows(dy, b, da []float32, bc bcast, lo, hi int) {
	for r := lo; r < hi; r++ {
		o := r / bc.m
		dar, dyr, br := da[r*bc.i:(r+1)*bc.i], dy[r*bc.i:(r+1)*bc.i], b[o*bc.i:(o+1)*bc.i]
		for j := range dar {
			dar[j] += dyr[j] * br[j]
		}
	}
}

// ---------------------------------------------------------------------------
// Scale: out = α·x.

// Scale returns alpha·x.
func (g *Graph) Scale(x *Tensor, alpha float32) *Tensor {
	out := g.newTensor(g.anyGrad(x), x.Shape...)
	copy(out.Data, x.Data)
	kernels.Scale(alpha, out.Data)
	if out.requiresGrad {
		nd := g.record(out, scaleBackward)
		nd.unary = unaryRec{x: x, alpha: alpha}
	}
	return out
}

// dx += α·dout.
func scaleBackward(g *Graph, nd *node) {
	if x := nd.unary.x; x.needsGrad() {
		kernels.Axpy(nd.unary.alpha, nd.out.Grad, x.Grad)
	}
}

// ---------------------------------------------------------------------------
// GELU (tanh approximation): out = ½x(1 + tanh(√(2/π)(x + 0.044715x³))).

// GELU applies the tanh-approximated Gaussian error linear unit.
func (g *Graph) GELU(x *Tensor) *Tensor {
	out := g.newTensor(g.anyGrad(x), x.Shape...)
	kernels.GELUForward(x.Data, out.Data)
	if out.requiresGrad {
		nd := g.record(out, geluBackward)
		nd.unary = unaryRec{x: x}
	}
	return out
}

// dx += dout·gelu'(x).
func geluBackward(g *Graph, nd *node) {
	x, dy := nd.unary.x, nd.out.Grad
	if x.needsGrad() {
		kernels.GELUBackward(dy, x.Data, x.Grad)
	}
}

// Sub returns x − y with the broadcasting of Add (composed as x + (−1)·y).
func (g *Graph) Sub(x, y *Tensor) *Tensor { return g.Add(x, g.Scale(y, -1)) }
