package engine

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// Gradient checks against central finite differences.
//
// The engine computes in float32, so the finite differences are taken with
// care:
//
//   - The loss is a random projection L = Σ_i r_i·out_i of the op's output
//     (r ~ N(0,1), fixed seed), accumulated in float64, so every output
//     element and every path through the op contributes, and the analytic
//     side is exactly one BackwardFrom(out, r) — the general vector–Jacobian
//     product that later code relies on.
//   - The step is h = 1e-2 times the leaf's scale (inputs are O(1)). The
//     truncation error of the central difference is h²/6·|L'''| ≈ 2e-5·|L'''|;
//     the float32 rounding of the forward pass perturbs L by about
//     2^-24·√N·|r·out| ≈ 1e-6 for N ≲ 10⁴ outputs, i.e. 1e-4 after dividing
//     by 2h. Both are far below 1 % of a typical gradient entry.
//   - Each leaf gets (a) two directional checks along random Gaussian
//     directions v, comparing (L(x+hv) − L(x−hv))/2h with ∇L·v, and (b)
//     element checks on the largest-gradient entry and a few random entries.
//     The tolerance is 4e-3·(|analytic| + gradient scale) + 1e-5, where the
//     scale is ‖∇L‖ for directions and max|∇L| for entries. The largest error
//     observed over all checks is 1.5e-3 of that sum (Fourier features, whose
//     third derivative carries (2π·u)³); a wrong backward (missing term, wrong
//     transpose, wrong mask, even a 1 % scale error) exceeds it.

// leaf describes one differentiable input of a checked function.
type leaf struct {
	shape []int
	data  []float32
	param bool // a persistent parameter tensor (else a graph Variable)
}

// gcFunc builds the checked computation on g from the leaf tensors.
type gcFunc func(g *Graph, xs []*Tensor) *Tensor

func randLeaf(r *rand.Rand, scale float32, shape ...int) leaf {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = scale * float32(r.NormFloat64())
	}
	return leaf{shape: shape, data: d}
}

func paramLeaf(r *rand.Rand, scale float32, shape ...int) leaf {
	l := randLeaf(r, scale, shape...)
	l.param = true
	return l
}

// build runs f on g with the current leaf data and returns the leaf tensors
// and output.
func build(g *Graph, leaves []leaf, params []*Tensor, f gcFunc) ([]*Tensor, *Tensor) {
	xs := make([]*Tensor, len(leaves))
	for i, l := range leaves {
		if l.param {
			xs[i] = params[i]
		} else {
			xs[i] = g.Variable(l.data, l.shape...)
		}
	}
	return xs, f(g, xs)
}

// projLoss is Σ r_i·out_i in float64.
func projLoss(out *Tensor, r []float32) float64 {
	var s float64
	for i, v := range out.Data {
		s += float64(r[i]) * float64(v)
	}
	return s
}

func gradCheck(t *testing.T, name string, seed uint64, leaves []leaf, f gcFunc) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	params := make([]*Tensor, len(leaves))
	for i, l := range leaves {
		if l.param {
			params[i] = &Tensor{Name: "p", Shape: l.shape, Data: l.data}
			params[i].SetRequiresGrad(true)
		}
	}
	g := NewGraph()
	xs, out := build(g, leaves, params, f)
	r := make([]float32, out.Size())
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	g.BackwardFrom(out, r)
	grads := make([][]float32, len(leaves))
	for i, x := range xs {
		if x.Grad == nil {
			t.Fatalf("%s: leaf %d has no gradient", name, i)
		}
		grads[i] = append([]float32(nil), x.Grad...)
	}
	loss := func() float64 {
		g.Reset()
		_, o := build(g, leaves, params, f)
		return projLoss(o, r)
	}
	for li, l := range leaves {
		an := grads[li]
		var scale, gmax, gss float64
		for i, v := range l.data {
			scale += float64(v) * float64(v)
			gmax = max(gmax, math.Abs(float64(an[i])))
			gss += float64(an[i]) * float64(an[i])
		}
		scale = math.Sqrt(scale / float64(len(l.data)))
		h := 1e-2 * max(scale, 0.1)
		check := func(what string, fd, a, gscale float64) {
			if os.Getenv("GC_DEBUG") != "" {
				t.Logf("%s leaf %d %s err/scale %.2g", name, li, what, math.Abs(fd-a)/(math.Abs(a)+gscale))
			}
			if tol := 4e-3*(math.Abs(a)+gscale) + 1e-5; math.Abs(fd-a) > tol {
				t.Errorf("%s: leaf %d %v %s: finite difference %.6g, backward %.6g (tol %.2g)", name, li, l.shape, what, fd, a, tol)
			}
		}
		// (a) directional derivatives.
		orig := append([]float32(nil), l.data...)
		for range 2 {
			v := make([]float64, len(l.data))
			var a float64
			for i := range v {
				v[i] = rng.NormFloat64()
				a += v[i] * float64(an[i])
			}
			for i := range l.data {
				l.data[i] = orig[i] + float32(h*v[i])
			}
			lp := loss()
			for i := range l.data {
				l.data[i] = orig[i] - float32(h*v[i])
			}
			lm := loss()
			copy(l.data, orig)
			check("direction", (lp-lm)/(2*h), a, math.Sqrt(gss))
		}
		// (b) single entries: the largest gradient and a few random ones.
		idx := []int{0}
		for i := range an {
			if math.Abs(float64(an[i])) > math.Abs(float64(an[idx[0]])) {
				idx[0] = i
			}
		}
		for range min(4, len(an)-1) {
			idx = append(idx, rng.IntN(len(an)))
		}
		for _, i := range idx {
			l.data[i] = orig[i] + float32(h)
			lp := loss()
			l.data[i] = orig[i] - float32(h)
			lm := loss()
			l.data[i] = orig[i]
			// The effective step is the float32-rounded perturbation.
			hp := float64(orig[i]+float32(h)) - float64(orig[i]-float32(h))
			check("entry", (lp-lm)/hp, float64(an[i]), gmax)
		}
	}
}
