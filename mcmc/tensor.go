package mcmc

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Tensor is a diffusion tensor fit: S0, eigenvalues in decreasing order
// (mm²/s) and the matching unit eigenvectors.
type Tensor struct {
	S0   float64
	Eval [3]float64
	Evec [3][3]float64
}

// FA returns the fractional anisotropy of the tensor.
func (t Tensor) FA() float64 {
	l := t.Eval
	md := (l[0] + l[1] + l[2]) / 3
	num := (l[0]-md)*(l[0]-md) + (l[1]-md)*(l[1]-md) + (l[2]-md)*(l[2]-md)
	den := l[0]*l[0] + l[1]*l[1] + l[2]*l[2]
	if den == 0 {
		return 0
	}
	return math.Sqrt(1.5 * num / den)
}

// FitTensor fits log S = log S0 − b gᵀDg by ordinary least squares to the
// measurements with a positive signal (the quick fit BedpostX starts its
// chains from). b, g and y are the b-values, unit gradient directions and
// signals. It reports false when fewer than seven measurements are positive
// or the gradient table cannot determine a tensor; the returned Tensor is
// then a fallback starting point (S0 = mean positive b≈0 signal or largest signal,
// isotropic 10⁻³ mm²/s, axes x, y, z).
func FitTensor(b []float64, g [][3]float64, y []float64) (Tensor, bool) {
	return fitTensor(b, g, y)
}

func fitTensor(b []float64, g [][3]float64, y []float64) (Tensor, bool) {
	fallback := func() (Tensor, bool) {
		// Not a fit: the starting point for a table or signal that cannot
		// determine a tensor.
		var s0, n, ymax float64
		for j, v := range y {
			if v > 0 && b[j] <= 50 {
				s0 += v
				n++
			}
			ymax = math.Max(ymax, v)
		}
		if n > 0 {
			s0 /= n
		} else {
			s0 = ymax
		}
		t := Tensor{S0: s0, Eval: [3]float64{1e-3, 1e-3, 1e-3},
			Evec: [3][3]float64{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}}}
		return t, false
	}
	rows := 0
	for _, v := range y {
		if v > 0 {
			rows++
		}
	}
	if rows < 7 {
		return fallback()
	}
	A := mat.NewDense(rows, 7, nil)
	rhs := mat.NewVecDense(rows, nil)
	r := 0
	for j, v := range y {
		if !(v > 0) {
			continue
		}
		gx, gy, gz := g[j][0], g[j][1], g[j][2]
		bj := b[j]
		A.SetRow(r, []float64{1, -bj * gx * gx, -bj * gy * gy, -bj * gz * gz, -2 * bj * gx * gy, -2 * bj * gx * gz, -2 * bj * gy * gz})
		rhs.SetVec(r, math.Log(v))
		r++
	}
	// A table that cannot determine a tensor (e.g. too few directions)
	// makes the design rank deficient.
	if c := mat.Cond(A, 2); c > 1e12 {
		return fallback()
	}
	var qr mat.QR
	qr.Factorize(A)
	var sol mat.VecDense
	if err := qr.SolveVecTo(&sol, false, rhs); err != nil {
		return fallback()
	}
	x := sol.RawVector().Data
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fallback()
		}
	}
	D := mat.NewSymDense(3, []float64{
		x[1], x[4], x[5],
		x[4], x[2], x[6],
		x[5], x[6], x[3],
	})
	var eig mat.EigenSym
	if !eig.Factorize(D, true) {
		return fallback()
	}
	vals := eig.Values(nil) // ascending
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	t := Tensor{S0: math.Exp(x[0])}
	for k := 0; k < 3; k++ {
		t.Eval[k] = vals[2-k]
		for a := 0; a < 3; a++ {
			t.Evec[k][a] = vecs.At(a, 2-k)
		}
	}
	return t, true
}
