package lingauss

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"gonum.org/v1/gonum/floats"
)

// Closed-form inference for lingauss-k6 on its grid. For a mask M with
// active base set S (k = |S| functions) and basis matrix Φ_S (N×k):
//
//	y | M ~ N(0, Σ),  Σ = σ²I + Φ_S Φ_Sᵀ,
//	θ_S | y, M ~ N(A⁻¹b, A⁻¹),  A = I + Φ_SᵀΦ_S/σ²,  b = Φ_Sᵀy/σ².
//
// Everything is computed from the k×k matrix A (Woodbury / matrix
// determinant lemma): log det Σ = N log σ² + log det A and
// yᵀΣ⁻¹y = yᵀy/σ² − bᵀA⁻¹b, so no N×N matrix is ever formed.

// system is the Cholesky factorisation of A for one mask plus b.
type system struct {
	k   int
	idx [K]int        // active base components
	l   [K][K]float64 // lower Cholesky factor of A
	b   [K]float64
}

// stats are the data summaries all masks share: yᵀy and Φᵀy.
type stats struct {
	yy  float64
	phy [K]float64
}

func (f *Family) stats(y []float64) stats {
	if len(y) != N {
		panic(fmt.Sprintf("lingauss: observation has %d values, want %d (the grid)", len(y), N))
	}
	var s stats
	s.yy = floats.Dot(y, y)
	for k := 0; k < K; k++ {
		s.phy[k] = floats.Dot(f.phi[k][:], y)
	}
	return s
}

// factor builds and factorises A for the active base components of mask
// (length ≥ K; entries beyond K are ignored).
func (f *Family) factor(s *stats, mask []bool) system {
	var sys system
	for k := 0; k < K; k++ {
		if mask[k] {
			sys.idx[sys.k] = k
			sys.k++
		}
	}
	const s2 = Sigma * Sigma
	for a := 0; a < sys.k; a++ {
		sys.b[a] = s.phy[sys.idx[a]] / s2
		for c := 0; c <= a; c++ {
			v := f.gram[sys.idx[a]][sys.idx[c]] / s2
			if a == c {
				v++
			}
			for m := 0; m < c; m++ {
				v -= sys.l[a][m] * sys.l[c][m]
			}
			if a == c {
				// A = I + PSD has eigenvalues ≥ 1, so v ≥ 1 up to rounding.
				sys.l[a][a] = math.Sqrt(v)
			} else {
				sys.l[a][c] = v / sys.l[c][c]
			}
		}
	}
	return sys
}

// solve returns A⁻¹v for v of length sys.k (in place on a copy).
func (sys *system) solve(v [K]float64) [K]float64 {
	for a := 0; a < sys.k; a++ { // L w = v
		for m := 0; m < a; m++ {
			v[a] -= sys.l[a][m] * v[m]
		}
		v[a] /= sys.l[a][a]
	}
	for a := sys.k - 1; a >= 0; a-- { // Lᵀ u = w
		for m := a + 1; m < sys.k; m++ {
			v[a] -= sys.l[m][a] * v[m]
		}
		v[a] /= sys.l[a][a]
	}
	return v
}

func (f *Family) logEvidence(s *stats, mask []bool) float64 {
	sys := f.factor(s, mask)
	logDetA := 0.0
	for a := 0; a < sys.k; a++ {
		logDetA += 2 * math.Log(sys.l[a][a])
	}
	// bᵀA⁻¹b = ‖L⁻¹b‖².
	w := sys.b
	q := 0.0
	for a := 0; a < sys.k; a++ {
		for m := 0; m < a; m++ {
			w[a] -= sys.l[a][m] * w[m]
		}
		w[a] /= sys.l[a][a]
		q += w[a] * w[a]
	}
	const s2 = Sigma * Sigma
	quad := s.yy/s2 - q
	logDet := float64(N)*math.Log(s2) + logDetA
	return -0.5 * (float64(N)*math.Log(2*math.Pi) + logDet + quad)
}

// LogEvidence returns log p(y | M) = log N(y; 0, σ²I + Φ_MΦ_Mᵀ) for an
// observation y on the grid (length 100). Only the first K entries of mask
// (the base components) are read.
func (f *Family) LogEvidence(y []float64, mask []bool) float64 {
	s := f.stats(y)
	return f.logEvidence(&s, mask)
}

// MaskIndex returns the ModelPosterior index Σ_k M_k 2^k of a mask.
func MaskIndex(mask []bool) int {
	idx := 0
	for k := 0; k < K; k++ {
		if mask[k] {
			idx |= 1 << k
		}
	}
	return idx
}

// MaskFromIndex returns the full mask (K base components and the noise
// component, which is always on) for a ModelPosterior index.
func MaskFromIndex(idx int) []bool {
	mask := make([]bool, K+1)
	family.MaskFromCode(uint32(idx), mask[:K])
	mask[K] = true
	return mask
}

// ModelPosterior returns p(M | y, λ) for all 64 base masks, indexed by
// MaskIndex (bit k = base component k), under the family's Bernoulli(λ)
// mask prior (λ clipped to [1e−6, 1−1e−6]).
func (f *Family) ModelPosterior(y []float64, lambda float64) []float64 {
	s := f.stats(y)
	lp := make([]float64, NumMasks)
	mask := make([]bool, K+1)
	mask[K] = true
	for idx := range lp {
		family.MaskFromCode(uint32(idx), mask[:K])
		lp[idx] = f.prior.LogProb(mask, lambda) + f.logEvidence(&s, mask)
	}
	z := floats.LogSumExp(lp)
	for i := range lp {
		lp[i] = math.Exp(lp[i] - z)
	}
	return lp
}

// ParamPosterior returns the Gaussian posterior p(θ | y, M) as a mean
// vector (length 6) and covariance matrix (6×6) over all of θ: the entries
// of active base components hold the exact posterior, those of inactive
// components are zero (their θ_k does not enter the model).
func (f *Family) ParamPosterior(y []float64, mask []bool) (mean []float64, cov [][]float64) {
	s := f.stats(y)
	sys := f.factor(&s, mask)
	mean = make([]float64, K)
	cov = make([][]float64, K)
	for k := range cov {
		cov[k] = make([]float64, K)
	}
	m := sys.solve(sys.b)
	for a := 0; a < sys.k; a++ {
		mean[sys.idx[a]] = m[a]
		var e [K]float64
		e[a] = 1
		col := sys.solve(e)
		for c := 0; c < sys.k; c++ {
			cov[sys.idx[c]][sys.idx[a]] = col[c]
		}
	}
	return mean, cov
}
