package correct

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Refinement: short Markov chains from q's own samples to the exact
// posterior of their model.
//
// Where the network's posterior q(θ | M, x) is about right in location but
// too wide (the amortization gap of sharp posteriors, e.g. the second
// fibre of a dMRI voxel), every sample of q can start a chain that leaves
// the exact posterior p(θ | x, M) ∝ p(x | θ, M) N(θ; 0, I) invariant. It
// needs neither q's density (unlike IS and SMC) nor an evidence: the model
// probabilities stay the network's.
//
// Per observation and model (the samples that share a mask, after
// relabelling exchangeable components to one canonical mask):
//
//  1. Mode. From the sample with the highest γ, up to 8 Newton steps
//     z += Σ ∇log γ with step halving, Σ the inverse of the negative
//     Hessian of log γ (forward differences of the analytic gradient)
//     with its eigenvalues replaced by max(|λ|, 1): a saddle-free metric
//     where the Hessian is indefinite, at least the prior's precision.
//  2. Jumps. Independence Metropolis–Hastings steps with a multivariate t
//     proposal (5 degrees of freedom) at the mode with scale Σ: the
//     Laplace approximation with heavy tails, so that no start in the
//     posterior's tails is a trap. Each jump costs one likelihood; where
//     the posterior is near-Gaussian most are accepted, and a chain
//     forgets its start after one accepted jump.
//  3. MALA (optional). Preconditioned Langevin steps z' = z + (ε²/2) Σ
//     ∇log γ(z) + ε Σ^½ ξ with the Metropolis–Hastings correction; ε
//     starts at 1.65 d^(−1/6) and is adapted towards 57 % acceptance over
//     the model's chains during the first half of the steps, the second
//     half uses a fixed kernel.
//
// The proposals depend on the model's samples only through the mode and
// Σ, fixed before any chain moves (and ε, fixed after the burn-in half),
// so every chain is an exact MCMC run started from q's sample.

// RefineSettings configure Refine.
type RefineSettings struct {
	// Steps is the number of MALA steps per sample (0: no refinement).
	Steps int
	// Jumps is the number of independence Metropolis–Hastings steps per
	// sample, before the MALA steps, with the Laplace approximation at
	// the mode as the proposal (0: none). The mode is found by Newton
	// steps from the sample with the highest density.
	Jumps int
	// Exchangeable lists components (e.g. a ball-and-sticks family's
	// sticks) whose labels do not matter: the model is invariant under
	// permuting their parameters and fractions, the prior included. Each
	// sample is first relabelled to the canonical mask (its active ones
	// moved to the first positions of the list), so that all samples with
	// the same number of them share one mode search and one chain
	// population. The caller's masks[i][j] are replaced by the canonical
	// ones (new slices).
	Exchangeable []int
	// Seed selects the random streams; observation i of a call uses the
	// stream (Seed, Offset+i), so results do not depend on batching.
	Seed, Offset uint64
}

// RefineStats are the diagnostics of one observation's refinement.
type RefineStats struct {
	// Accept is the mean MALA acceptance over all chains and steps, Moved
	// the share of chains that accepted at least one step.
	Accept, Moved float64
}

// refineStreamTag separates the refinement's random streams from the
// network's and the SMC's.
const refineStreamTag = 0x726566696e65 // "refine"

// Refine moves the samples thetas[i][j] (latent θ under masks[i][j]) of
// observation obs[i] by s.Steps preconditioned MALA steps targeting the
// exact posterior p(θ | x_i, M) of the sample's own model, in place
// (inactive dimensions are left as they are). It runs in parallel over
// the observations and is reproducible for a seed. The family must have
// an exact likelihood with latent gradients (Family.LogLikelihood).
func Refine(f family.Family, obs []posterior.Observation, masks [][][]bool, thetas [][][]float64, s RefineSettings) ([]RefineStats, error) {
	if s.Steps < 0 || s.Jumps < 0 {
		return nil, fmt.Errorf("correct: %d refinement steps and %d jumps, want ≥ 0", s.Steps, s.Jumps)
	}
	if len(masks) != len(obs) || len(thetas) != len(obs) {
		return nil, fmt.Errorf("correct: refine: %d observations, %d mask lists and %d sample lists", len(obs), len(masks), len(thetas))
	}
	for i := range obs {
		if len(masks[i]) != len(thetas[i]) {
			return nil, fmt.Errorf("correct: refine: observation %d has %d masks for %d samples", i, len(masks[i]), len(thetas[i]))
		}
	}
	stats := make([]RefineStats, len(obs))
	if s.Steps == 0 && s.Jumps == 0 {
		return stats, nil
	}
	err := parallel(len(obs), func(i int) error {
		rng := rand.New(rand.NewPCG(s.Seed^refineStreamTag, s.Offset+uint64(i)))
		stats[i] = refineObservation(f, obs[i], masks[i], thetas[i], s, rng)
		return nil
	})
	return stats, err
}

// refineObservation refines the samples of one observation, model by
// model in the order of their first sample.
func refineObservation(f family.Family, o posterior.Observation, masks [][]bool, thetas [][]float64, s RefineSettings, rng *rand.Rand) RefineStats {
	if len(s.Exchangeable) > 1 {
		for j := range masks {
			masks[j], thetas[j] = canonical(f, masks[j], thetas[j], s.Exchangeable)
		}
	}
	var groups [][]int
	seen := map[string]int{}
	for j, m := range masks {
		k := family.MaskString(m)
		g, ok := seen[k]
		if !ok {
			g = len(groups)
			seen[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], j)
	}
	lay := f.Layout()
	var acc, moved, chains float64
	for _, g := range groups {
		mask := masks[g[0]]
		active := make([]bool, lay.DMax)
		lay.Active(mask, active)
		t := newTarget(f, o.Design, o.X, mask, active)
		if len(t.idx) == 0 {
			continue
		}
		a, mv := refineGroup(t, thetas, g, s, rng)
		acc += a * float64(len(g))
		moved += mv * float64(len(g))
		chains += float64(len(g))
	}
	if chains == 0 {
		return RefineStats{Accept: math.NaN(), Moved: math.NaN()}
	}
	return RefineStats{Accept: acc / chains, Moved: moved / chains}
}

// canonical relabels the exchangeable components of one sample so that
// its active ones come first in exch (the fractions and parameters move
// with them). It returns mask and theta unchanged when they already are
// canonical or the relabelled parameters have no latent (never for an
// exchangeable family).
func canonical(f family.Family, mask []bool, theta []float64, exch []int) ([]bool, []float64) {
	var on []int
	for _, k := range exch {
		if mask[k] {
			on = append(on, k)
		}
	}
	done := true
	for i, k := range on {
		done = done && k == exch[i]
	}
	if done {
		return mask, theta
	}
	p := f.Natural(theta, mask)
	nm := append([]bool(nil), mask...)
	for _, k := range exch {
		nm[k] = false
	}
	q := family.Params{Shared: p.Shared, Components: map[int]map[string]float64{}}
	if p.Fractions != nil {
		q.Fractions = append([]float64(nil), p.Fractions...)
		for _, k := range exch {
			q.Fractions[k] = 0
		}
	}
	isExch := map[int]bool{}
	for _, k := range exch {
		isExch[k] = true
	}
	for k, v := range p.Components {
		if !isExch[k] {
			q.Components[k] = v
		}
	}
	for i, k := range on {
		to := exch[i]
		nm[to] = true
		if v, ok := p.Components[k]; ok {
			q.Components[to] = v
		}
		if q.Fractions != nil {
			q.Fractions[to] = p.Fractions[k]
		}
	}
	th, err := f.Latent(q, nm)
	if err != nil {
		return mask, theta
	}
	return nm, th
}

// chain is one refinement chain: position, ∇ log γ and log γ.
type chain struct {
	z, g []float64
	lg   float64
	acc  int
}

// refineGroup runs the chains of the samples thetas[j], j ∈ idx, which
// share t's model, and returns the mean acceptance and the share of
// chains that moved.
func refineGroup(t *target, thetas [][]float64, idx []int, s RefineSettings, rng *rand.Rand) (accept, moved float64) {
	steps := s.Steps
	d := len(t.idx)
	cs := make([]chain, len(idx))
	best := -1
	for c, j := range idx {
		ch := &cs[c]
		ch.z, ch.g = make([]float64, d), make([]float64, d)
		for a, q := range t.idx {
			ch.z[a] = thetas[j][q]
		}
		if steps > 0 {
			ch.lg = t.logProb(ch.z, ch.g)
		} else {
			ch.lg = t.logProb(ch.z, nil) // no MALA: no gradient needed
		}
		if !math.IsInf(ch.lg, -1) && (best < 0 || ch.lg > cs[best].lg) {
			best = c
		}
	}
	if best < 0 {
		return 0, 0 // no sample with a finite density: nothing to refine from
	}
	pc := newPrecond(t, cs[best].z)
	var (
		prop, gp, mean, xi, w = make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d), make([]float64, d)
		nAcc, nTry            float64
	)
	if s.Jumps > 0 {
		mode := append([]float64(nil), cs[best].z...)
		pc, _ = newtonMode(t, mode, cs[best].lg, pc, gp, prop)
		// Independence sampler: proposal a multivariate t with jumpDF
		// degrees of freedom at the mode with scale Σ (heavier tails than
		// the Laplace approximation, so that a start far out in the
		// posterior's tails is not a trap); log q up to a constant is
		// −(ν+d)/2 log(1 + |A⁻¹(z − mode)|²/ν).
		logQ := func(z []float64) float64 {
			for a := range w {
				w[a] = z[a] - mode[a]
			}
			return -0.5 * (jumpDF + float64(d)) * math.Log1p(-2*pc.logKernel(w, 1)/jumpDF)
		}
		for c := range cs {
			ch := &cs[c]
			lqc := logQ(ch.z)
			jumped := false
			for range s.Jumps {
				u := 0.0
				for range int(jumpDF) {
					v := rng.NormFloat64()
					u += v * v
				}
				r2 := 0.0
				for a := range xi {
					xi[a] = rng.NormFloat64()
					r2 += xi[a] * xi[a]
				}
				sc := math.Sqrt(jumpDF / u)
				pc.mulA(xi, w)
				for a := range prop {
					prop[a] = mode[a] + sc*w[a]
				}
				lqp := -0.5 * (jumpDF + float64(d)) * math.Log1p(sc*sc*r2/jumpDF)
				lgp := t.logProb(prop, nil)
				logA := math.Inf(-1)
				if !math.IsInf(lgp, -1) {
					logA = lgp - ch.lg + lqc - lqp
					if math.IsInf(ch.lg, -1) {
						logA = 0
					}
				}
				if logA >= 0 || rng.Float64() < math.Exp(logA) {
					copy(ch.z, prop)
					ch.lg, lqc = lgp, lqp
					ch.acc++
					nAcc++
					jumped = true
				}
				nTry++
			}
			if jumped && steps > 0 {
				ch.lg = t.logProb(ch.z, ch.g)
			}
		}
	}
	eps := 1.65 * math.Pow(float64(d), -1.0/6)
	burn := steps / 2
	for step := range steps {
		sweepAcc := 0
		for c := range cs {
			ch := &cs[c]
			if math.IsInf(ch.lg, -1) {
				continue // a start outside the support cannot move by MALA
			}
			// Forward proposal: mean = z + (ε²/2) Σ g, prop = mean + ε A ξ.
			pc.drift(ch.z, ch.g, eps, mean)
			for a := range xi {
				xi[a] = rng.NormFloat64()
			}
			pc.mulA(xi, w)
			for a := range prop {
				prop[a] = mean[a] + eps*w[a]
			}
			lgp := t.logProb(prop, gp)
			logA := math.Inf(-1)
			if !math.IsInf(lgp, -1) {
				fwd := 0.0
				for _, v := range xi {
					fwd -= 0.5 * v * v
				}
				pc.drift(prop, gp, eps, mean)
				for a := range w {
					w[a] = ch.z[a] - mean[a]
				}
				logA = lgp - ch.lg + pc.logKernel(w, eps) - fwd
			}
			if logA >= 0 || rng.Float64() < math.Exp(logA) {
				copy(ch.z, prop)
				copy(ch.g, gp)
				ch.lg = lgp
				ch.acc++
				sweepAcc++
			}
			nTry++
		}
		nAcc += float64(sweepAcc)
		if step < burn && len(cs) > 0 {
			// Robbins–Monro on log ε towards 57 % acceptance, bounded so
			// that one bad sweep cannot collapse the step.
			r := float64(sweepAcc) / float64(len(cs))
			eps *= math.Exp(math.Max(-1, math.Min(1, 2*(r-0.574))))
		}
	}
	for c, j := range idx {
		for a, q := range t.idx {
			thetas[j][q] = cs[c].z[a]
		}
		if cs[c].acc > 0 {
			moved++
		}
	}
	if nTry == 0 {
		return 0, 0
	}
	return nAcc / nTry, moved / float64(len(cs))
}

// precond is the MALA preconditioner Σ = A Aᵀ with A = V diag(λ^−½), λ and
// V the eigenvalues (raised to ≥ 1) and eigenvectors of the negative
// Hessian of log γ at a point.
type precond struct {
	d       int
	v       []float64 // eigenvectors, column k = V[:, k], row-major d×d
	isq, sq []float64 // λ^−½ and λ^½
	tmp     []float64
}

// hessStep is the central-difference step of the Hessian (latent units;
// posterior widths in the latent space are ≳ 10⁻³).
const hessStep = 1e-5

// newtonMode moves z (log γ = lg, preconditioner pc from the Hessian at
// z) by at most newtonIters Newton steps z += Σ ∇log γ with step halving,
// and returns the preconditioner at the final point and its log γ. gp and
// tmp are scratch of length d.
func newtonMode(t *target, z []float64, lg float64, pc *precond, gp, tmp []float64) (*precond, float64) {
	d := len(z)
	g := make([]float64, d)
	t.logProb(z, g)
	for range newtonIters {
		pc.drift(z, g, math.Sqrt2, tmp) // z + Σ g
		moved := false
		for h := 1.0; h > 0.01; h /= 2 {
			for a := range gp {
				gp[a] = z[a] + h*(tmp[a]-z[a])
			}
			if l := t.logProb(gp, nil); l > lg {
				moved = l > lg+newtonTol
				copy(z, gp)
				lg = l
				break
			}
		}
		if !moved {
			break
		}
		t.logProb(z, g)
		pc = newPrecond(t, z)
	}
	return pc, lg
}

// jumpDF is the degrees of freedom of the independence proposal.
const jumpDF = 5

// newtonIters bounds the Newton steps towards the mode.
const newtonIters = 8

// newtonTol is the gain of log γ (nats) below which the Newton search
// stops.
const newtonTol = 0.05

func newPrecond(t *target, z0 []float64) *precond {
	d := len(z0)
	h := mat.NewSymDense(d, nil)
	zp, gp := make([]float64, d), make([]float64, d)
	cols := make([][]float64, d)
	g0 := make([]float64, d)
	l0 := t.logProb(z0, g0)
	for a := range d {
		// Forward differences of the analytic gradient: d calls (the
		// symmetrisation below averages the two triangles' errors).
		copy(zp, z0)
		zp[a] = z0[a] + hessStep
		lp := t.logProb(zp, gp)
		cols[a] = make([]float64, d)
		if math.IsInf(lp, -1) || math.IsInf(l0, -1) {
			cols[a][a] = 1 // the prior's precision where the difference is undefined
			continue
		}
		for b := range d {
			cols[a][b] = -(gp[b] - g0[b]) / hessStep
		}
	}
	for a := range d {
		for b := a; b < d; b++ {
			v := 0.5 * (cols[a][b] + cols[b][a])
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
				if a == b {
					v = 1
				}
			}
			h.SetSym(a, b, v)
		}
	}
	p := &precond{d: d, v: make([]float64, d*d), isq: make([]float64, d), sq: make([]float64, d), tmp: make([]float64, d)}
	var es mat.EigenSym
	if !es.Factorize(h, true) {
		// No decomposition: the prior's scale.
		for a := range d {
			p.v[a*d+a], p.isq[a], p.sq[a] = 1, 1, 1
		}
		return p
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	for k, l := range vals {
		// |λ|: a saddle-free Newton metric where the Hessian is
		// indefinite (far from the mode), at least the prior's precision.
		l = math.Max(math.Abs(l), 1)
		p.sq[k], p.isq[k] = math.Sqrt(l), 1/math.Sqrt(l)
		for a := range d {
			p.v[a*d+k] = vecs.At(a, k)
		}
	}
	return p
}

// mulA writes A x = V diag(λ^−½) x into y.
func (p *precond) mulA(x, y []float64) {
	d := p.d
	for a := range d {
		s := 0.0
		for k := range d {
			s += p.v[a*d+k] * p.isq[k] * x[k]
		}
		y[a] = s
	}
}

// drift writes z + (ε²/2) Σ g into out (Σ g = V diag(1/λ) Vᵀ g).
func (p *precond) drift(z, g []float64, eps float64, out []float64) {
	d := p.d
	for k := range d {
		s := 0.0
		for a := range d {
			s += p.v[a*d+k] * g[a]
		}
		p.tmp[k] = s * p.isq[k] * p.isq[k]
	}
	h := 0.5 * eps * eps
	for a := range d {
		s := 0.0
		for k := range d {
			s += p.v[a*d+k] * p.tmp[k]
		}
		out[a] = z[a] + h*s
	}
}

// logKernel returns −|A⁻¹ r|²/(2ε²), the log proposal density of the
// displacement r from the proposal mean up to a constant shared by both
// directions (A⁻¹ = diag(λ^½) Vᵀ).
func (p *precond) logKernel(r []float64, eps float64) float64 {
	d := p.d
	s := 0.0
	for k := range d {
		u := 0.0
		for a := range d {
			u += p.v[a*d+k] * r[a]
		}
		u *= p.sq[k]
		s += u * u
	}
	return -0.5 * s / (eps * eps)
}
