package engine

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine/kernels"
)

// ---------------------------------------------------------------------------
// Gaussian Fourier features (as the authors' reference implementation):
//
//	z = (2π/in)·u·Pᵀ,  features = [cos z, sin z] truncated to out dims,
//
// u [..., in], P [m, in] with m = ⌈out/2⌉ (learnable, initialised N(0, 1)).
// Result [..., out]: columns [0, m) are cos z, columns [m, out) are sin z of
// the first out − m frequencies.

// FourierFeatures embeds u [..., in] with the learnable projection P [m, in]
// into out = 2m or 2m − 1 features.
func (g *Graph) FourierFeatures(u, p *Tensor, out int) *Tensor {
	in, m := u.Cols(), (out+1)/2
	if p.Rank() != 2 || p.Shape[0] != m || p.Shape[1] != in || u.Rank() == 0 {
		panic(fmt.Sprintf("engine: FourierFeatures of u %v to %d features needs P [%d, %d], got %v", u.Shape, out, m, in, p.Shape))
	}
	n := u.Rows()
	res := g.newLike(g.anyGrad(u, p), u.Shape, out)
	z := g.buf(n * m)
	c := float32(2 * math.Pi / float64(in))
	kernels.Sgemm(false, true, n, m, in, c, u.Data, in, p.Data, in, 0, z, m)
	for r := range n {
		zr, fr := z[r*m:(r+1)*m], res.Data[r*out:(r+1)*out]
		for j, v := range zr {
			s, co := math.Sincos(float64(v))
			fr[j] = float32(co)
			if m+j < out {
				fr[m+j] = float32(s)
			}
		}
	}
	if res.requiresGrad {
		nd := g.record(res, fourierBackward)
		nd.fourier = fourierRec{u: u, p: p, z: z, dz: g.buf(n * m), n: n, in: in, m: m, outW: out}
	}
	return res
}

// dz = −sin z·dcos + cos z·dsin;  du += (2π/in)·dz·P;  dP += (2π/in)·dzᵀ·u.
func fourierBackward(g *Graph, nd *node) {
	r := &nd.fourier
	u, p, z, dz, dy := r.u, r.p, r.z, r.dz, nd.out.Grad
	n, in, m, out := r.n, r.in, r.m, r.outW
	for r := range n {
		zr, dzr, dyr := z[r*m:(r+1)*m], dz[r*m:(r+1)*m], dy[r*out:(r+1)*out]
		for j, v := range zr {
			s, co := math.Sincos(float64(v))
			d := -float32(s) * dyr[j]
			if m+j < out {
				d += float32(co) * dyr[m+j]
			}
			dzr[j] = d
		}
	}
	c := float32(2 * math.Pi / float64(in))
	if u.needsGrad() {
		kernels.Sgemm(false, false, n, in, m, c, dz, m, p.Data, in, 1, u.Grad, in)
	}
	if p.needsGrad() {
		kernels.Sgemm(true, false, m, in, n, c, dz, m, u.Data, in, 1, p.Grad, in)
	}
}
