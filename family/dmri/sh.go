package dmri

import (
	"math"

	"gonum.org/v1/gonum/integrate/quad"
)

// Spherical convolution in the real symmetric SH basis (paper §4.2.2,
// "Parametric spherical convolution"): for an ODF with SH coefficients
// c_lm (RealSH convention) and an axially symmetric kernel K(g·n), the
// Funk–Hecke theorem gives
//
//	∫_{S²} K(g·n) ODF(n) dn = Σ_{l even} λ_l Σ_m c_lm Y_lm(g),
//	λ_l = 2π ∫_{−1}^{1} K(t) P_l(t) dt,
//
// i.e. the per-band multiplication c̃_lm = λ_l c_lm followed by evaluation
// at g. The bszt-conv signals do not use this (they are evaluated exactly,
// see convolved.go); it predicts signals from ODFs given as SH coefficients,
// e.g. the posterior ODFs of Model.PosteriorODFSH. Truncation at order L is
// exact only for band-limited ODFs; TestSHConvolution quantifies it.

// shKernelNodes Gauss–Legendre nodes on [−1, 1] integrate λ_l: the kernels
// e^{−b d⊥} e^{−a t²} with |a| ≤ 100 and P_l with l ≤ 80 are polynomials
// times an entire function whose Taylor terms beyond degree 250 are below
// 1e−17, so 128 nodes (exact to degree 255) leave ~1e−16.
const shKernelNodes = 128

var shKT, shKW [shKernelNodes]float64

func init() {
	quad.Legendre{}.FixedLocations(shKT[:], shKW[:], -1, 1)
}

// ZeppelinRotationalHarmonics returns λ_l, l = 0, 2, …, L, of the zeppelin
// kernel K(t) = exp(−b[d∥t² + d⊥(1−t²)]) (a stick for dPerp = 0).
func ZeppelinRotationalHarmonics(L int, b, dPar, dPerp float64) []float64 {
	lam := make([]float64, L/2+1)
	for i, t := range shKT {
		k := shKW[i] * math.Exp(-b*(dPar*t*t+dPerp*(1-t*t)))
		// Legendre recurrence P_{n+1} = ((2n+1) t P_n − n P_{n−1})/(n+1).
		p0, p1 := 1.0, t
		lam[0] += k
		for n := 1; n < L; n++ {
			p0, p1 = p1, (float64(2*n+1)*t*p1-float64(n)*p0)/float64(n+1)
			if (n+1)%2 == 0 {
				lam[(n+1)/2] += k * p1
			}
		}
	}
	for i := range lam {
		lam[i] *= 2 * math.Pi
	}
	return lam
}

// SHConvolve evaluates the convolution of an ODF with SH coefficients c
// (order L, RealSH layout) and a kernel with rotational harmonics lambda
// (from ZeppelinRotationalHarmonics) at the unit gradient direction g.
// y is scratch space of length NumSH(L).
func SHConvolve(L int, c, lambda []float64, g [3]float64, y []float64) float64 {
	RealSH(L, g, y)
	s := 0.0
	for l := 0; l <= L; l += 2 {
		base := l*(l-1)/2 + l
		band := 0.0
		for m := -l; m <= l; m++ {
			band += c[base+m] * y[base+m]
		}
		s += lambda[l/2] * band
	}
	return s
}
