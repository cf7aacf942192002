package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// ---------------------------------------------------------------------------
// Linear: y[..., N] = x[..., K] · W[K, N] + b[N]   (b may be nil)

// Linear applies an affine map over the last axis of x. W is stored
// [in, out] (x·W, not W·x); bias may be nil.
func (g *Graph) Linear(x, w, bias *Tensor) *Tensor {
	k, n := x.Cols(), 0
	if w.Rank() != 2 || w.Shape[0] != k {
		panic(fmt.Sprintf("engine: Linear of x %v with W %v: W must be [%d, N]", x.Shape, w.Shape, k))
	}
	n = w.Shape[1]
	if bias != nil && (bias.Size() != n) {
		panic(fmt.Sprintf("engine: Linear bias %v, want [%d]", bias.Shape, n))
	}
	m := x.Rows()
	if x.Rank() == 0 {
		panic("engine: Linear of a scalar")
	}
	out := g.newLike(g.anyGrad(x, w, bias), x.Shape, n)
	kernels.LinearForward(m, n, k, x.Data, k, w.Data, n, dataOf(bias), out.Data, nil)
	if out.requiresGrad {
		nd := g.record(out, linearBackward)
		nd.linear = linearRec{x: x, w: w, bias: bias, m: m, k: k, n: n}
	}
	return out
}

// dx[M,K] += dy[M,N]·Wᵀ;  dW[K,N] += xᵀ·dy;  db[N] += Σ_rows dy.
func linearBackward(g *Graph, nd *node) {
	r := &nd.linear
	x, w, bias, dy := r.x, r.w, r.bias, nd.out.Grad
	m, k, n := r.m, r.k, r.n
	if x.needsGrad() {
		kernels.Sgemm(false, true, m, k, n, 1, dy, n, w.Data, n, 1, x.Grad, k)
	}
	if w.needsGrad() {
		kernels.Sgemm(true, false, k, n, m, 1, x.Data, k, dy, n, 1, w.Grad, n)
	}
	if bias.needsGrad() {
		kernels.BiasGrad(dy, m, n, bias.Grad)
	}
}

// ---------------------------------------------------------------------------
// LinearGELU (fused MLP hidden layer): y = GELU(x·W + b).

// LinearGELU is GELU(Linear(x, w, bias)) with the bias add and activation
// fused; it equals g.GELU(g.Linear(x, w, bias)).
func (g *Graph) LinearGELU(x, w, bias *Tensor) *Tensor {
	k := x.Cols()
	if x.Rank() == 0 || w.Rank() != 2 || w.Shape[0] != k || (bias != nil && bias.Size() != w.Shape[1]) {
		panic(fmt.Sprintf("engine: LinearGELU of x %v with W %v, b %v", x.Shape, w.Shape, shapeOf(bias)))
	}
	m, n := x.Rows(), w.Shape[1]
	out := g.newLike(g.anyGrad(x, w, bias), x.Shape, n)
	if !out.requiresGrad { // no backward: GELU in place, no pre-activation kept
		kernels.LinearForward(m, n, k, x.Data, k, w.Data, n, dataOf(bias), out.Data, out.Data)
		return out
	}
	z := g.buf(m * n)
	kernels.LinearForward(m, n, k, x.Data, k, w.Data, n, dataOf(bias), z, out.Data)
	nd := g.record(out, linearGELUBackward)
	nd.linear = linearRec{x: x, w: w, bias: bias, m: m, k: k, n: n, z: z, dz: g.buf(m * n)}
	return out
}

// dz = dy·gelu'(z);  db += Σ_rows dz;  then the Linear backward of dz.
func linearGELUBackward(g *Graph, nd *node) {
	r := &nd.linear
	x, w, bias, dz := r.x, r.w, r.bias, r.dz
	m, k, n := r.m, r.k, r.n
	clear(dz)
	kernels.BiasGELUBackward(nd.out.Grad, r.z, m, n, dz, gradOf(bias))
	if x.needsGrad() {
		kernels.Sgemm(false, true, m, k, n, 1, dz, n, w.Data, n, 1, x.Grad, k)
	}
	if w.needsGrad() {
		kernels.Sgemm(true, false, k, n, m, 1, x.Data, k, dz, n, 1, w.Grad, n)
	}
}

// ---------------------------------------------------------------------------
// LinearResidual (a transformer block's residual branch): r + x·W + b.

// LinearResidual is g.Add(r, g.Linear(x, w, bias)) for r with the shape of
// the linear layer's output. Without gradients (inference) the bias and the
// residual are added in the product's epilogue (kernels.
// LinearResidualForward), one pass over the output instead of three, with
// the same result bit for bit; when any operand requires a gradient it
// records the unfused Linear and Add.
func (g *Graph) LinearResidual(r, x, w, bias *Tensor) *Tensor {
	if g.anyGrad(r, x, w, bias) {
		return g.Add(r, g.Linear(x, w, bias))
	}
	k := x.Cols()
	if x.Rank() == 0 || w.Rank() != 2 || w.Shape[0] != k || (bias != nil && bias.Size() != w.Shape[1]) {
		panic(fmt.Sprintf("engine: LinearResidual of x %v with W %v, b %v", x.Shape, w.Shape, shapeOf(bias)))
	}
	m, n := x.Rows(), w.Shape[1]
	out := g.newLike(false, x.Shape, n)
	if !sameShape(r.Shape, out.Shape) {
		panic(fmt.Sprintf("engine: LinearResidual of residual %v with a linear output %v", r.Shape, out.Shape))
	}
	kernels.LinearResidualForward(m, n, k, x.Data, k, w.Data, n, dataOf(bias), r.Data, out.Data)
	return out
}

// ---------------------------------------------------------------------------
// MatMul: c[B, M, N] = op(a)[B, M, K] · op(b)[B, K, N], op = identity or
// transpose of the last two axes. a and b have equal leading (batch) axes;
// b may also be a plain matrix shared by every batch element.
// bit2 = b shared.

// MatMul is a batched matrix product over the last two axes. With transA
// (transB) the last two axes of a (b) are swapped before multiplying.
func (g *Graph) MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	if a.Rank() < 2 || b.Rank() < 2 {
		panic(fmt.Sprintf("engine: MatMul needs rank ≥ 2, got %v and %v", a.Shape, b.Shape))
	}
	ar, br := a.Rank(), b.Rank()
	m, k := a.Shape[ar-2], a.Shape[ar-1]
	if transA {
		m, k = k, m
	}
	kb, n := b.Shape[br-2], b.Shape[br-1]
	if transB {
		kb, n = n, kb
	}
	batch := numel(a.Shape[:ar-2])
	shared := br == 2
	if kb != k || (!shared && !sameShape(a.Shape[:ar-2], b.Shape[:br-2])) {
		panic(fmt.Sprintf("engine: MatMul shapes %v (trans %v) and %v (trans %v) do not match", a.Shape, transA, b.Shape, transB))
	}
	t := g.header(a.Shape)
	t.Shape[ar-2], t.Shape[ar-1] = m, n
	out := g.alloc(t, g.anyGrad(a, b))
	lda, ldb := a.Shape[ar-1], b.Shape[br-1]
	sa, sb, sc := m*k, k*n, m*n
	if shared {
		sb = 0
	}
	for i := range batch {
		kernels.Sgemm(transA, transB, m, n, k, 1, a.Data[i*sa:], lda, b.Data[i*sb:], ldb, 0, out.Data[i*sc:], n)
	}
	if out.requiresGrad {
		nd := g.record(out, matMulBackward)
		nd.matmul = matMulRec{a: a, b: b, batch: batch, m: m, n: n, k: k, transA: transA, transB: transB, shared: shared}
	}
	return out
}

// With C = op(A)·op(B):
//
//	dA += dC·op(B)ᵀ      (transA: dA += op(B)·dCᵀ)
//	dB += op(A)ᵀ·dC      (transB: dB += dCᵀ·op(A))
func matMulBackward(g *Graph, nd *node) {
	r := &nd.matmul
	a, b, dc := r.a, r.b, nd.out.Grad
	batch, m, n, k := r.batch, r.m, r.n, r.k
	transA, transB, shared := r.transA, r.transB, r.shared
	lda, ldb := a.Shape[a.Rank()-1], b.Shape[b.Rank()-1]
	sa, sb, sc := m*k, k*n, m*n
	if shared {
		sb = 0
	}
	for i := range batch {
		A, B, dC := a.Data[i*sa:], b.Data[i*sb:], dc[i*sc:]
		if a.needsGrad() {
			dA := a.Grad[i*sa:]
			if !transA { // dA[M,K] += dC[M,N]·op(B)ᵀ[N,K]
				kernels.Sgemm(false, !transB, m, k, n, 1, dC, n, B, ldb, 1, dA, lda)
			} else { // dA[K,M] += op(B)[K,N]·dCᵀ[N,M]
				kernels.Sgemm(transB, true, k, m, n, 1, B, ldb, dC, n, 1, dA, lda)
			}
		}
		if b.needsGrad() {
			dB := b.Grad[i*sb:]
			if !transB { // dB[K,N] += op(A)ᵀ[K,M]·dC[M,N]
				kernels.Sgemm(!transA, false, k, n, m, 1, A, lda, dC, n, 1, dB, ldb)
			} else { // dB[N,K] += dCᵀ[N,M]·op(A)[M,K]
				kernels.Sgemm(true, transA, n, k, m, 1, dC, n, A, lda, 1, dB, ldb)
			}
		}
	}
}
