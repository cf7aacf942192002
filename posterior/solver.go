package posterior

import (
	"fmt"
	"math"
)

// Denoiser evaluates an EDM denoiser D(θ_σ; σ) for a fixed set of rows
// (each row has its own observation and mask). The solvers only see this
// interface, so an analytic denoiser can stand in for the network (the
// tests use the exact Gaussian-posterior denoiser of lingauss-k6).
type Denoiser interface {
	// Denoise writes D(θ; σ) for every row of theta ([rows·dim],
	// row-major) into d. On inactive dimensions D must return θ unchanged.
	// If jac is non-nil ([rows·dim·dim]) it also writes the Jacobian
	// ∂D_i/∂θ_k of row r into jac[(r·dim + i)·dim + k]; only entries with
	// both i and k active are read.
	Denoise(theta []float64, sigma float64, d, jac []float64) error
}

// Solver selects the ODE integrator of the probability-flow ODE.
type Solver int

const (
	// AB2 is the 2-step Adams–Bashforth method with constant-step
	// coefficients θ_{n+1} = θ_n + h_n(3/2·f_n − 1/2·f_{n−1}), whose first
	// step is Euler: the reference's exponential AB2, whose linear part is
	// zero for EDM. One denoiser evaluation per step.
	AB2 Solver = iota
	// Heun is Heun's second-order method (EDM's sampler): two denoiser
	// evaluations per step.
	Heun
	// DPM2M is the multistep DPM-Solver++(2M) (Lu et al. 2022) in EDM
	// form: with ρ = σ_{n+1}/σ_n, h_n = ln(σ_n/σ_{n+1}) and r = h_{n−1}/h_n,
	//	θ_{n+1} = ρ·θ_n + (1 − ρ)·((1 + 1/(2r))·D_n − 1/(2r)·D_{n−1}),
	// Euler-exact in the linear part (θ_{n+1} = ρθ_n + (1−ρ)D_n on the
	// first step). One denoiser evaluation per step; it reaches AB2's
	// accuracy with fewer steps because the θ/σ term is integrated
	// exactly.
	DPM2M
)

func (s Solver) String() string {
	switch s {
	case AB2:
		return "ab2"
	case Heun:
		return "heun"
	case DPM2M:
		return "dpm2m"
	}
	return fmt.Sprintf("Solver(%d)", int(s))
}

// ParseSolver returns the solver named "ab2", "heun" or "dpm2m".
func ParseSolver(name string) (Solver, error) {
	for _, s := range []Solver{AB2, Heun, DPM2M} {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("posterior: unknown solver %q (want ab2, heun or dpm2m)", name)
}

// Evaluations returns the number of denoiser evaluations the solver
// needs for the given number of steps.
func (s Solver) Evaluations(steps int) int {
	if s == Heun {
		return 2 * steps
	}
	return steps
}

// KarrasSigmas returns the EDM noise schedule of steps+1 points from
// sigmaMax down to sigmaMin (both included):
//
//	σ_i = (σ_max^{1/ρ} + i/steps·(σ_min^{1/ρ} − σ_max^{1/ρ}))^ρ,  i = 0…steps.
func KarrasSigmas(steps int, sigmaMin, sigmaMax, rho float64) []float64 {
	s := make([]float64, steps+1)
	a, b := math.Pow(sigmaMax, 1/rho), math.Pow(sigmaMin, 1/rho)
	for i := range s {
		s[i] = math.Pow(a+float64(i)/float64(steps)*(b-a), rho)
	}
	s[0], s[steps] = sigmaMax, sigmaMin
	return s
}

// flowState holds the work arrays of one integration.
type flowState struct {
	rows, dim int
	active    []bool  // rows·dim
	idx       [][]int // active dimensions of each row
	d         []float64
	jac       []float64 // ∂D/∂θ of the current evaluation, rows·dim·dim
}

func newFlowState(rows, dim int, active []bool, withJac bool) *flowState {
	s := &flowState{rows: rows, dim: dim, active: active, idx: make([][]int, rows)}
	n := 0
	for _, a := range active[:rows*dim] {
		if a {
			n++
		}
	}
	flat := make([]int, 0, n) // one allocation for every row's list
	for r := range rows {
		lo := len(flat)
		for k, a := range active[r*dim : (r+1)*dim] {
			if a {
				flat = append(flat, k)
			}
		}
		s.idx[r] = flat[lo:len(flat):len(flat)]
	}
	s.d = make([]float64, rows*dim)
	if withJac {
		s.jac = make([]float64, rows*dim*dim)
	}
	return s
}

// drift evaluates f = (θ − D)/σ on active dimensions (0 elsewhere) into f
// and, if fj is non-nil, the drift's Jacobian on the active dimensions,
// ∂f/∂θ = (I − ∂D/∂θ)/σ, compacted per row into fj (row r occupies
// na·na entries at r·dim·dim, na = the row's number of active dimensions).
func (s *flowState) drift(den Denoiser, theta []float64, sigma float64, f, fj []float64) error {
	var jac []float64
	if fj != nil {
		jac = s.jac
	}
	if err := den.Denoise(theta, sigma, s.d, jac); err != nil {
		return err
	}
	for i, a := range s.active {
		if a {
			f[i] = (theta[i] - s.d[i]) / sigma
		} else {
			f[i] = 0
		}
	}
	if fj != nil {
		dim := s.dim
		for r, idx := range s.idx {
			na := len(idx)
			o := r * dim * dim
			for a, i := range idx {
				for b, k := range idx {
					v := -jac[o+i*dim+k]
					if a == b {
						v++
					}
					fj[o+a*na+b] = v / sigma
				}
			}
		}
	}
	return nil
}

// Flow integrates the probability-flow ODE dθ/dσ = (θ − D(θ; σ))/σ in
// place over the noise levels sigmas (decreasing: sampling; increasing:
// density evaluation) for the rows of theta ([rows·dim]), moving only the
// active dimensions.
//
// If logdet is non-nil (length rows) it receives log|det ∂θ_end/∂θ_start|
// of the discrete solver map on the active dimensions, obtained by
// propagating the exact Jacobian of every step (the denoiser's Jacobian,
// from one VJP per active dimension) alongside θ. Then
// log p_end(θ_end) = log p_start(θ_start) − logdet holds exactly for the
// distribution the solver actually produces, whatever the step count:
// the sampler's log q is the density of its own samples.
func Flow(den Denoiser, solver Solver, sigmas, theta []float64, active []bool, dim int, logdet []float64) error {
	if dim <= 0 || len(theta)%dim != 0 || len(active) != len(theta) {
		return fmt.Errorf("posterior: Flow of %d values with %d activity flags in rows of %d", len(theta), len(active), dim)
	}
	rows := len(theta) / dim
	if logdet != nil && len(logdet) != rows {
		return fmt.Errorf("posterior: Flow of %d rows with %d log-determinants", rows, len(logdet))
	}
	if len(sigmas) < 2 {
		return fmt.Errorf("posterior: Flow needs at least two noise levels, got %d", len(sigmas))
	}
	for _, sg := range sigmas {
		if !(sg > 0) {
			return fmt.Errorf("posterior: Flow through noise level %v (must be positive)", sg)
		}
	}
	withJac := logdet != nil
	s := newFlowState(rows, dim, active, withJac)
	n := rows * dim
	f, fPrev := make([]float64, n), make([]float64, n)
	// Jacobians, compacted per row to na×na at offset r·dim·dim: F (drift
	// Jacobian) now and before, J = ∂θ_n/∂θ_0 now and before.
	var fj, fjPrev, jn, jPrev, tmp []float64
	if withJac {
		m := rows * dim * dim
		fj, fjPrev, jn, jPrev, tmp = make([]float64, m), make([]float64, m), make([]float64, m), make([]float64, m), make([]float64, m)
		for r, idx := range s.idx {
			for a := range idx {
				jn[r*dim*dim+a*len(idx)+a] = 1
			}
		}
	}
	var dPrev []float64 // DPM2M: D_{n−1} on active dimensions
	if solver == DPM2M {
		dPrev = make([]float64, n)
	}
	var th2, f2, fj2 []float64
	if solver == Heun {
		th2, f2 = make([]float64, n), make([]float64, n)
		if withJac {
			fj2 = make([]float64, rows*dim*dim)
		}
	}
	for step := 0; step+1 < len(sigmas); step++ {
		sig, h := sigmas[step], sigmas[step+1]-sigmas[step]
		if err := s.drift(den, theta, sig, f, fj); err != nil {
			return err
		}
		switch solver {
		case AB2:
			a, b := 1.0, 0.0 // Euler on the first step
			if step > 0 {
				a, b = 1.5, -0.5
			}
			for i, ac := range active {
				if ac {
					theta[i] += h * (a*f[i] + b*fPrev[i])
				}
			}
			if withJac {
				// J_{n+1} = J_n + h(a·F_n J_n + b·F_{n−1} J_{n−1}).
				for r, idx := range s.idx {
					na, o := len(idx), r*dim*dim
					jNew := tmp[o : o+na*na]
					copy(jNew, jn[o:o+na*na])
					matMulAdd(jNew, fj[o:o+na*na], jn[o:o+na*na], na, h*a)
					if b != 0 {
						matMulAdd(jNew, fjPrev[o:o+na*na], jPrev[o:o+na*na], na, h*b)
					}
				}
				jPrev, jn, tmp = jn, tmp, jPrev
				fj, fjPrev = fjPrev, fj
			}
			f, fPrev = fPrev, f
		case Heun:
			for i := range theta {
				th2[i] = theta[i] + h*f[i]
			}
			if err := s.drift(den, th2, sigmas[step+1], f2, fj2); err != nil {
				return err
			}
			for i, ac := range active {
				if ac {
					theta[i] += h / 2 * (f[i] + f2[i])
				}
			}
			if withJac {
				// Step map Jacobian S = I + h/2·(F + F̃(I + hF)); J ← S·J.
				for r, idx := range s.idx {
					na, o := len(idx), r*dim*dim
					st := tmp[o : o+na*na]
					for i := range st {
						st[i] = h * fj[o+i]
					}
					for a := range na {
						st[a*na+a]++
					}
					// st = I + hF; now S = I + h/2·F + h/2·F̃·st.
					sm := jPrev[o : o+na*na]
					clear(sm)
					matMulAdd(sm, fj2[o:o+na*na], st, na, h/2)
					for i := range sm {
						sm[i] += h / 2 * fj[o+i]
					}
					for a := range na {
						sm[a*na+a]++
					}
					clear(st)
					matMulAdd(st, sm, jn[o:o+na*na], na, 1)
					copy(jn[o:o+na*na], st)
				}
			}
		case DPM2M:
			next := sigmas[step+1]
			rho := next / sig
			c1, c2 := 1.0, 0.0 // first step: DDIM (exponential Euler)
			if step > 0 {
				r := math.Log(sigmas[step-1]/sig) / math.Log(sig/next)
				c1, c2 = 1+1/(2*r), -1/(2*r)
			}
			for i, ac := range active {
				if ac {
					d := theta[i] - sig*f[i] // D_n
					theta[i] = rho*theta[i] + (1-rho)*(c1*d+c2*dPrev[i])
					dPrev[i] = d
				}
			}
			if withJac {
				// With ∂D_n/∂θ_n = I − σ_n·F_n:
				// J_{n+1} = ρJ_n + (1−ρ)(c1(J_n − σ_n F_n J_n) + c2(J_{n−1} − σ_{n−1}F_{n−1}J_{n−1})).
				sPrev := 0.0
				if step > 0 {
					sPrev = sigmas[step-1]
				}
				for r, idx := range s.idx {
					na, o := len(idx), r*dim*dim
					jNew := tmp[o : o+na*na]
					for i := range jNew {
						jNew[i] = (rho+(1-rho)*c1)*jn[o+i] + (1-rho)*c2*jPrev[o+i]
					}
					matMulAdd(jNew, fj[o:o+na*na], jn[o:o+na*na], na, -(1-rho)*c1*sig)
					if c2 != 0 {
						matMulAdd(jNew, fjPrev[o:o+na*na], jPrev[o:o+na*na], na, -(1-rho)*c2*sPrev)
					}
				}
				jPrev, jn, tmp = jn, tmp, jPrev
				fj, fjPrev = fjPrev, fj
			}
		default:
			return fmt.Errorf("posterior: unknown solver %v", solver)
		}
	}
	if withJac {
		for r, idx := range s.idx {
			na, o := len(idx), r*dim*dim
			logdet[r] = logAbsDet(jn[o:o+na*na], na)
		}
	}
	return nil
}

// matMulAdd adds alpha·A·B to C (all n×n, row-major).
func matMulAdd(c, a, b []float64, n int, alpha float64) {
	for i := range n {
		for k := range n {
			v := alpha * a[i*n+k]
			if v == 0 {
				continue
			}
			bk := b[k*n : k*n+n]
			ci := c[i*n : i*n+n]
			for j, bv := range bk {
				ci[j] += v * bv
			}
		}
	}
}

// logAbsDet returns log|det A| of the n×n matrix A (overwritten) by
// Gaussian elimination with partial pivoting; 0 for n = 0.
func logAbsDet(a []float64, n int) float64 {
	ld := 0.0
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r*n+c]) > math.Abs(a[p*n+c]) {
				p = r
			}
		}
		if p != c {
			for k := range n {
				a[p*n+k], a[c*n+k] = a[c*n+k], a[p*n+k]
			}
		}
		piv := a[c*n+c]
		if piv == 0 {
			return math.Inf(-1)
		}
		ld += math.Log(math.Abs(piv))
		for r := c + 1; r < n; r++ {
			m := a[r*n+c] / piv
			if m == 0 {
				continue
			}
			for k := c; k < n; k++ {
				a[r*n+k] -= m * a[c*n+k]
			}
		}
	}
	return ld
}

// BaseLogProb is the log density of N(0, (σ_max² + 1)·I) on the active
// dimensions of one row: the sampler's initial distribution, the EDM
// marginal at σ_max of latents with unit prior variance.
func BaseLogProb(theta []float64, active []bool, sigmaMax float64) float64 {
	v := sigmaMax*sigmaMax + 1
	lp := 0.0
	for i, a := range active {
		if a {
			lp -= 0.5 * (theta[i]*theta[i]/v + math.Log(2*math.Pi*v))
		}
	}
	return lp
}
