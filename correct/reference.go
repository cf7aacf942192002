package correct

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/internal/quantile"
)

// reference is the tractable stand-in for the network's q(θ | M, x) at the
// start of the tempering path: a Gaussian-kernel mixture with one kernel on
// each of J draws of q (active dimensions only),
//
//	r(z) = (1/J) Σ_j N(z; c_j, H),   H = h² D Σ̂ D,   h = J^(−1/(d+4)),
//
// where Σ̂ is the sample covariance of the draws, D shrinks each dimension
// to Silverman's robust scale min(sd, IQR/1.349)/sd (so that draws from
// several modes, e.g. the two ends of a wrapped azimuth, do not widen
// every kernel to the distance between the modes), and h is Scott's
// factor. q itself has an exact density only at its own samples (the ODE
// log-density), and MCMC moves need a density and a gradient everywhere;
// r has both in O(J·d) and keeps q's location, scale and modes.
type reference struct {
	d, j   int
	chol   []float64   // Cholesky factor of H
	cent   [][]float64 // the draws c_j
	white  [][]float64 // L⁻¹ c_j
	logNrm float64     // −log J − ½ log det(2πH)
}

func newReference(draws [][]float64, d int) *reference {
	j := len(draws)
	w := make([]float64, j)
	for i := range w {
		w[i] = 1 / float64(j)
	}
	_, cov := weightedCov(draws, w, d)
	col := make([]float64, j)
	shrink := make([]float64, d)
	for a := range d {
		for i, c := range draws {
			col[i] = c[a]
		}
		sort.Float64s(col)
		iqr := quantile.Sorted(col, 0.75) - quantile.Sorted(col, 0.25)
		sd := math.Sqrt(cov[a*d+a])
		shrink[a] = 1
		if sd > 0 && iqr/1.349 < sd {
			shrink[a] = math.Max(iqr/1.349/sd, 1e-3)
		}
	}
	h2 := math.Pow(float64(j), -2/float64(d+4))
	hm := make([]float64, d*d)
	for a := range d {
		for b := range d {
			hm[a*d+b] = h2 * shrink[a] * shrink[b] * cov[a*d+b]
		}
	}
	r := &reference{d: d, j: j, chol: cholesky(hm, d), cent: draws}
	r.white = make([][]float64, j)
	for i, c := range draws {
		r.white[i] = make([]float64, d)
		forward(r.chol, d, c, r.white[i])
	}
	r.logNrm = -math.Log(float64(j)) - 0.5*float64(d)*math.Log(2*math.Pi) - logDiag(r.chol, d)
	return r
}

// refScratch holds per-worker buffers of logProb.
type refScratch struct {
	y, acc, lw []float64
}

func (r *reference) dim() int { return r.d }

func (r *reference) scratch() *refScratch {
	return &refScratch{y: make([]float64, r.d), acc: make([]float64, r.d), lw: make([]float64, r.j)}
}

// logProb returns log r(z) and, when grad is not nil, writes ∇ log r(z)
// into it.
func (r *reference) logProb(z, grad []float64, s *refScratch) float64 {
	d := r.d
	forward(r.chol, d, z, s.y)
	mx := math.Inf(-1)
	for i, c := range r.white {
		q := 0.0
		for a := range d {
			e := s.y[a] - c[a]
			q += e * e
		}
		s.lw[i] = -0.5 * q
		mx = math.Max(mx, s.lw[i])
	}
	sum := 0.0
	for i := range s.lw {
		s.lw[i] = math.Exp(s.lw[i] - mx)
		sum += s.lw[i]
	}
	if grad != nil {
		// ∇ log r = −H⁻¹ Σ_j w_j (z − c_j) = −L⁻ᵀ Σ_j w_j (y − L⁻¹c_j).
		clear(s.acc)
		for i, c := range r.white {
			wi := s.lw[i] / sum
			for a := range d {
				s.acc[a] -= wi * (s.y[a] - c[a])
			}
		}
		backward(r.chol, d, s.acc, grad)
	}
	return r.logNrm + mx + math.Log(sum)
}

// sample draws z ~ r into z.
func (r *reference) sample(rng *rand.Rand, z, xi []float64) {
	c := r.cent[rng.IntN(r.j)]
	for a := range r.d {
		xi[a] = rng.NormFloat64()
	}
	lowerMul(r.chol, r.d, xi, z)
	for a := range r.d {
		z[a] += c[a]
	}
}

// proposal is the final importance-sampling proposal of SMC, fitted to the
// posterior particles: the defensive mixture ½ N(μ̂, Σ̂) + ½ r̂, where
// μ̂, Σ̂ are the particles' weighted moments and r̂ the kernel mixture of
// newReference on J particles drawn from them. The Gaussian half makes the
// proposal nearly exact for unimodal, near-Gaussian posteriors; the
// kernel half keeps several modes covered, and either half bounds the
// weight p/g by twice its own ratio.
type proposal struct {
	d      int
	mean   []float64
	chol   []float64
	logNrm float64
	kde    *reference
}

func newProposal(z [][]float64, logW []float64, d, j int, rng *rand.Rand) *proposal {
	w := make([]float64, len(z))
	for i := range w {
		w[i] = math.Exp(logW[i])
	}
	mean, cov := weightedCov(z, w, d)
	g := &proposal{d: d, mean: mean, chol: cholesky(cov, d)}
	g.logNrm = -0.5*float64(d)*math.Log(2*math.Pi) - logDiag(g.chol, d)
	centres := make([][]float64, j)
	u := rng.Float64() / float64(j)
	c, k := w[0], 0
	for i := range j {
		for u > c && k < len(w)-1 {
			k++
			c += w[k]
		}
		centres[i] = z[k]
		u += 1 / float64(j)
	}
	g.kde = newReference(centres, d)
	return g
}

func (g *proposal) logProb(z []float64, s *refScratch) float64 {
	for a := range g.d {
		s.acc[a] = z[a] - g.mean[a]
	}
	forward(g.chol, g.d, s.acc, s.y)
	q := 0.0
	for a := range g.d {
		q += s.y[a] * s.y[a]
	}
	lg := g.logNrm - 0.5*q
	lk := g.kde.logProb(z, nil, s)
	mx := math.Max(lg, lk)
	return mx + math.Log(0.5*math.Exp(lg-mx)+0.5*math.Exp(lk-mx))
}

func (g *proposal) sample(rng *rand.Rand, z, xi []float64) {
	if rng.IntN(2) == 0 {
		g.kde.sample(rng, z, xi)
		return
	}
	for a := range g.d {
		xi[a] = rng.NormFloat64()
	}
	lowerMul(g.chol, g.d, xi, z)
	for a := range g.d {
		z[a] += g.mean[a]
	}
}
