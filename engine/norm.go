package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// LayerNormEps is the ε added to the variance by LayerNorm (the Haiku and
// PyTorch default).
const LayerNormEps = 1e-5

// ---------------------------------------------------------------------------
// LayerNorm over the last axis: y = (x − mean)·rstd·γ + β, rstd = 1/√(var+ε).
// x [..., D], γ, β [D] or nil (no affine).

// LayerNorm normalises x over its last axis; gamma and beta may be nil for a
// LayerNorm without learnable scale or shift.
func (g *Graph) LayerNorm(x, gamma, beta *Tensor) *Tensor {
	rows, d := x.Rows(), x.Cols()
	if (gamma != nil && gamma.Size() != d) || (beta != nil && beta.Size() != d) {
		panic(fmt.Sprintf("engine: LayerNorm of %v with γ %v, β %v", x.Shape, shapeOf(gamma), shapeOf(beta)))
	}
	out := g.newTensor(g.anyGrad(x, gamma, beta), x.Shape...)
	var mean, rstd []float32 // row statistics, saved only for the backward
	if out.requiresGrad {
		mean, rstd = g.buf(rows), g.buf(rows)
	}
	kernels.LayerNormForward(x.Data, rows, d, dataOf(gamma), dataOf(beta), LayerNormEps, out.Data, mean, rstd)
	if out.requiresGrad {
		nd := g.record(out, layerNormBackward)
		nd.norm = normRec{x: x, gamma: gamma, beta: beta, mean: mean, rstd: rstd, rows: rows, d: d}
	}
	return out
}

// dx += rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)), ĝ = dy·γ;  dγ += Σ dy·x̂;  dβ += Σ dy.
func layerNormBackward(g *Graph, nd *node) {
	r := &nd.norm
	x, gamma, beta := r.x, r.gamma, r.beta
	kernels.LayerNormBackward(nd.out.Grad, x.Data, r.mean, r.rstd, dataOf(gamma), r.rows, r.d, gradOf(x), gradOf(gamma), gradOf(beta))
}

// ---------------------------------------------------------------------------
// Modulate (AdaLN): y[b,t,:] = h[b,t,:]·(1 + s[b,:]) + c[b,:].
// h [B, T, D]; s, c [B, D] or [B, 1, D].

// Modulate applies adaptive layer-norm modulation h·(1+s) + c, with s and c
// per batch element, broadcast over the token axis.
func (g *Graph) Modulate(h, s, c *Tensor) *Tensor {
	if h.Rank() != 3 {
		panic(fmt.Sprintf("engine: Modulate needs h [B,T,D], got %v", h.Shape))
	}
	b, t, d := h.Shape[0], h.Shape[1], h.Shape[2]
	if s.Size() != b*d || c.Size() != b*d || s.Cols() != d || c.Cols() != d {
		panic(fmt.Sprintf("engine: Modulate of h %v with s %v, c %v: want [%d, %d]", h.Shape, s.Shape, c.Shape, b, d))
	}
	out := g.newTensor(g.anyGrad(h, s, c), h.Shape...)
	kernels.ModulateForward(h.Data, s.Data, c.Data, b, t, d, out.Data)
	if out.requiresGrad {
		nd := g.record(out, modulateBackward)
		nd.norm = normRec{x: h, scale: s, shift: c, b: b, t: t, d: d}
	}
	return out
}

// dh += dy·(1+s);  ds += Σ_t dy·h;  dc += Σ_t dy.
func modulateBackward(g *Graph, nd *node) {
	r := &nd.norm
	h, s, c := r.x, r.scale, r.shift
	kernels.ModulateBackward(nd.out.Grad, h.Data, s.Data, r.b, r.t, r.d, gradOf(h), gradOf(s), gradOf(c))
}

// ---------------------------------------------------------------------------
// LayerNormModulate (fused pre-norm AdaLN): y = LayerNorm(x; γ, β)·(1 + s) + c.
// x [B, T, D]; γ, β [D] or nil; s, c [B, D] or [B, 1, D].

// LayerNormModulate is LayerNorm followed by Modulate in one pass (no
// intermediate tensor); it equals g.Modulate(g.LayerNorm(x, gamma, beta), s, c).
func (g *Graph) LayerNormModulate(x, gamma, beta, s, c *Tensor) *Tensor {
	if x.Rank() != 3 {
		panic(fmt.Sprintf("engine: LayerNormModulate needs x [B,T,D], got %v", x.Shape))
	}
	b, t, d := x.Shape[0], x.Shape[1], x.Shape[2]
	if (gamma != nil && gamma.Size() != d) || (beta != nil && beta.Size() != d) ||
		s.Size() != b*d || c.Size() != b*d || s.Cols() != d || c.Cols() != d {
		panic(fmt.Sprintf("engine: LayerNormModulate of x %v with γ %v, β %v, s %v, c %v", x.Shape, shapeOf(gamma), shapeOf(beta), s.Shape, c.Shape))
	}
	out := g.newTensor(g.anyGrad(x, gamma, beta, s, c), x.Shape...)
	var mean, rstd []float32
	if out.requiresGrad {
		mean, rstd = g.buf(b*t), g.buf(b*t)
	}
	kernels.LayerNormModulateForward(x.Data, b, t, d, dataOf(gamma), dataOf(beta), s.Data, c.Data, LayerNormEps, out.Data, mean, rstd)
	if out.requiresGrad {
		nd := g.record(out, layerNormModulateBackward)
		nd.norm = normRec{x: x, gamma: gamma, beta: beta, scale: s, shift: c, mean: mean, rstd: rstd, b: b, t: t, d: d}
	}
	return out
}

// With n = LN(x): dn = dy·(1+s), ds += Σ_t dy·n, dc += Σ_t dy, then the
// LayerNorm backward of dn.
func layerNormModulateBackward(g *Graph, nd *node) {
	r := &nd.norm
	x, gamma, beta, s, c := r.x, r.gamma, r.beta, r.scale, r.shift
	kernels.LayerNormModulateBackward(nd.out.Grad, x.Data, r.mean, r.rstd, dataOf(gamma), dataOf(beta), s.Data, r.b, r.t, r.d,
		gradOf(x), gradOf(gamma), gradOf(beta), gradOf(s), gradOf(c))
}

// ---------------------------------------------------------------------------
// helpers for optional tensors

func dataOf(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Data
}

// gradOf returns t's gradient buffer if backward must fill it, else nil.
func gradOf(t *Tensor) []float32 {
	if !t.needsGrad() {
		return nil
	}
	return t.Grad
}

// gradOrSink returns t's gradient buffer, or a scratch buffer of the same
// size for kernels that always write an input gradient.
func gradOrSink(g *Graph, i int, t *Tensor) []float32 {
	if t.needsGrad() {
		return t.Grad
	}
	return g.sinkBuf(i, t.Size())
}

func shapeOf(t *Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}
