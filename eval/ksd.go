package eval

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// DefaultBandwidths are the RBF bandwidths of the multi-scale Stein kernel
// (paper App. A.1).
var DefaultBandwidths = []float64{0.1, 0.5, 1, 10}

// whitenJitter is added to the diagonal of the sample covariance before the
// Cholesky factorisation (the reference implementation's value).
const whitenJitter = 1e-3

// KSD returns the preconditioned multi-scale kernel Stein discrepancy of
// samples x[i] (each of dimension d, already restricted to the active
// coordinates) against a target whose score ∇ log p at x[i] is score[i]
// (paper App. A.1):
//
//   - whitening: C = Cov(x) + 10⁻³ I, C = L Lᵀ, z = L⁻¹x, s_z = Lᵀ s;
//   - for each bandwidth h, with k = exp(−‖z_i − z_j‖²/(2h²)), the Stein
//     kernel u_h = k s_iᵀs_j + (k/h²)(s_i − s_j)ᵀ(z_i − z_j)
//   - k(d/h² − ‖z_i − z_j‖²/h⁴), averaged uniformly over bandwidths;
//   - KSD² = Σ_{i≠j} u_ij /(n(n−1)) (U-statistic), KSD = √max(KSD², 0).
//
// The U-statistic is unbiased for the squared population KSD, which is 0
// exactly when the samples come from the target. It also returns KSD²
// (possibly negative). The reference code multiplies the kernel by a
// constant 0.1, which rescales KSD but not rKSD; it is omitted here.
func KSD(x, score [][]float64, bandwidths []float64) (ksd, ksd2 float64, err error) {
	n := len(x)
	if n < 2 || len(score) != n {
		return 0, 0, fmt.Errorf("eval: KSD of %d samples with %d scores", n, len(score))
	}
	if len(bandwidths) == 0 {
		bandwidths = DefaultBandwidths
	}
	d := len(x[0])
	if d == 0 {
		return 0, 0, nil
	}
	// covariance
	mu := make([]float64, d)
	for _, xi := range x {
		if len(xi) != d {
			return 0, 0, fmt.Errorf("eval: KSD samples of different dimensions")
		}
		for a := range mu {
			mu[a] += xi[a] / float64(n)
		}
	}
	cov := mat.NewSymDense(d, nil)
	for a := 0; a < d; a++ {
		for b := a; b < d; b++ {
			s := 0.0
			for _, xi := range x {
				s += (xi[a] - mu[a]) * (xi[b] - mu[b])
			}
			s /= float64(n - 1)
			if a == b {
				s += whitenJitter
			}
			cov.SetSym(a, b, s)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(cov) {
		return 0, 0, fmt.Errorf("eval: KSD: sample covariance not positive definite")
	}
	var L mat.TriDense
	ch.LTo(&L)
	z := make([][]float64, n)
	sz := make([][]float64, n)
	for i := range x {
		zi := mat.NewVecDense(d, nil)
		if err := zi.SolveVec(&L, mat.NewVecDense(d, append([]float64(nil), x[i]...))); err != nil {
			return 0, 0, fmt.Errorf("eval: KSD whitening: %w", err)
		}
		z[i] = zi.RawVector().Data
		if len(score[i]) != d {
			return 0, 0, fmt.Errorf("eval: KSD score of dimension %d for samples of dimension %d", len(score[i]), d)
		}
		si := make([]float64, d)
		for a := 0; a < d; a++ { // (Lᵀ s)_a = Σ_b L_ba s_b
			v := 0.0
			for b := a; b < d; b++ {
				v += L.At(b, a) * score[i][b]
			}
			si[a] = v
		}
		sz[i] = si
	}
	dd := float64(d)
	sum := 0.0
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			r2, ss, sdz := 0.0, 0.0, 0.0
			for a := 0; a < d; a++ {
				dz := z[i][a] - z[j][a]
				r2 += dz * dz
				ss += sz[i][a] * sz[j][a]
				sdz += (sz[i][a] - sz[j][a]) * dz
			}
			u := 0.0
			for _, h := range bandwidths {
				h2 := h * h
				k := math.Exp(-r2 / (2 * h2))
				u += k * (ss + sdz/h2 + dd/h2 - r2/(h2*h2))
			}
			sum += 2 * u / float64(len(bandwidths)) // u_ij = u_ji
		}
	}
	ksd2 = sum / float64(n*(n-1))
	return math.Sqrt(math.Max(ksd2, 0)), ksd2, nil
}
