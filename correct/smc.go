package correct

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/family"
)

// target is the unnormalised posterior γ(z) = p(x | θ, M) · N(z; 0, I) of
// one observation under one model, on the active latent dimensions z of θ.
type target struct {
	fam    family.Family
	design family.Design
	x      []float64
	mask   []bool
	idx    []int // active dimensions of θ
	full   []float64
	gfull  []float64
	// inside, when set, restricts γ to a region (a fundamental domain of
	// the model's symmetries, laplace.go): log γ = −Inf outside it.
	inside func(z []float64) bool
}

func newTarget(f family.Family, d family.Design, x []float64, mask, active []bool) *target {
	t := &target{fam: f, design: d, x: x, mask: mask, full: make([]float64, len(active)), gfull: make([]float64, len(active))}
	for i, a := range active {
		if a {
			t.idx = append(t.idx, i)
		}
	}
	return t
}

// clone returns a target with its own scratch buffers (for another goroutine).
func (t *target) clone() *target {
	c := *t
	c.full = make([]float64, len(t.full))
	c.gfull = make([]float64, len(t.gfull))
	return &c
}

// theta expands z to the full latent vector θ (inactive dimensions 0).
func (t *target) theta(z []float64) []float64 {
	th := make([]float64, len(t.full))
	for a, i := range t.idx {
		th[i] = z[a]
	}
	return th
}

// logProb returns log γ(z) (−Inf where the likelihood is not finite) and,
// when grad is not nil, ∇ log γ(z).
func (t *target) logProb(z, grad []float64) float64 {
	if t.inside != nil && !t.inside(z) {
		if grad != nil {
			clear(grad)
		}
		return math.Inf(-1)
	}
	for a, i := range t.idx {
		t.full[i] = z[a]
	}
	var g []float64
	if grad != nil {
		g = t.gfull
		clear(g)
	}
	ll := t.fam.LogLikelihood(t.design, t.x, t.full, t.mask, g)
	lp := 0.0
	for _, v := range z {
		lp -= 0.5 * v * v
	}
	lp -= 0.5 * float64(len(z)) * math.Log(2*math.Pi)
	if math.IsNaN(ll) || math.IsInf(ll, 0) {
		if grad != nil {
			clear(grad)
		}
		return math.Inf(-1)
	}
	if grad != nil {
		for a, i := range t.idx {
			grad[a] = g[i] - z[a]
		}
	}
	return ll + lp
}

// refDist is the start of the tempering path: a tractable density with
// exact samples (the kernel mixture r of reference.go, or the Laplace
// approximation of laplace.go).
type refDist interface {
	dim() int
	scratch() *refScratch
	sample(rng *rand.Rand, z, xi []float64)
	logProb(z, grad []float64, s *refScratch) float64
}

// smcRun is the result of one SMC replicate.
type smcRun struct {
	logZ float64
	// resamples counts the resampling events; eve[i] is the initial
	// ancestor of final particle i (for lwRelVar).
	resamples int
	eve       []int
	z         [][]float64 // final particles (active dimensions)
	logW      []float64   // their log weights (normalised to Σ exp = 1)
	ess       float64     // normalised ESS of the last reweighting
	steps     int         // tempering steps
	accept    float64     // mean MALA acceptance over all moves
	ok        bool        // reached β = 1 within the step budget
}

// particle state at the current temperature.
type particle struct {
	z, gg, gr []float64 // position, ∇ log γ, ∇ log r
	lg, lr    float64   // log γ, log r
	eve       int       // index of its ancestor among the initial particles
}

// runSMC moves N particles from the reference r to the posterior γ along
// the geometric path π_β ∝ r^(1−β) γ^β, β: 0 → 1. Each step picks the
// next β by bisection so that the conditional ESS of the incremental
// weights is s.CESS (Zhou, Johansen & Aston 2016), multiplies the evidence
// estimate by the weighted mean incremental weight, resamples
// systematically when the ESS falls below N/2, and applies s.Moves
// preconditioned MALA moves (covariance of the weighted particles; step
// size adapted towards 57 % acceptance between steps) that leave π_β
// invariant. log Ẑ is then an unbiased-in-Z estimate of log p(x | M).
func runSMC(t *target, ref refDist, s Settings, rng *rand.Rand) smcRun {
	d, n := ref.dim(), s.Particles
	rs := ref.scratch()
	ps := make([]particle, n)
	xi := make([]float64, d)
	for i := range ps {
		p := &ps[i]
		p.z, p.gg, p.gr = make([]float64, d), make([]float64, d), make([]float64, d)
		ref.sample(rng, p.z, xi)
		p.lg = t.logProb(p.z, p.gg)
		p.lr = ref.logProb(p.z, p.gr, rs)
		p.eve = i
	}
	logW := make([]float64, n) // normalised: Σ exp = 1
	for i := range logW {
		logW[i] = -math.Log(float64(n))
	}
	ell := make([]float64, n)
	out := smcRun{}
	eps := 1.65 * math.Pow(float64(d), -1.0/6)
	beta := 0.0
	var nAcc, nMoves float64
	mv := newMover(d)
	for beta < 1 {
		if out.steps >= s.MaxSteps {
			break
		}
		for i := range ps {
			ell[i] = ps[i].lg - ps[i].lr
			if math.IsNaN(ell[i]) {
				ell[i] = math.Inf(-1)
			}
		}
		rest := 1 - beta
		delta := nextDelta(logW, ell, rest, s.CESS)
		out.logZ += logSumWeighted(logW, ell, delta)
		for i := range logW {
			logW[i] += delta * ell[i]
			if math.IsNaN(logW[i]) {
				logW[i] = math.Inf(-1)
			}
		}
		normaliseLog(logW)
		if delta >= rest { // the last step lands on β = 1 exactly
			beta = 1
		} else {
			beta += delta
		}
		out.steps++
		out.ess = essLog(logW)
		if math.IsInf(out.logZ, -1) || math.IsNaN(out.logZ) {
			out.logZ = math.Inf(-1)
			break
		}
		if out.ess < 0.5 {
			if s.multinomial {
				ps = multinomial(rng, ps, logW)
			} else {
				ps = systematic(rng, ps, logW)
			}
			out.resamples++
			for i := range logW {
				logW[i] = -math.Log(float64(n))
			}
		}
		for range s.jumps {
			for i := range ps {
				if jump(t, ref, rs, &ps[i], beta, s.Moves > 0, xi, rng) {
					nAcc++
				}
				nMoves++
			}
		}
		mv.prepare(ps, logW)
		acc := 0.0
		for range s.Moves {
			for i := range ps {
				if mv.move(t, ref, rs, &ps[i], beta, eps, rng) {
					acc++
				}
			}
		}
		if s.Moves > 0 {
			rate := acc / float64(s.Moves*n)
			nAcc += acc
			nMoves += float64(s.Moves * n)
			eps *= math.Exp(rate - 0.574)
			eps = math.Min(math.Max(eps, 1e-3), 3)
		}
	}
	out.ok = beta >= 1 && !math.IsInf(out.logZ, -1)
	if nMoves > 0 {
		out.accept = nAcc / nMoves
	}
	out.z = make([][]float64, n)
	for i := range ps {
		out.z[i] = ps[i].z
	}
	out.logW = logW
	out.eve = make([]int, n)
	for i := range ps {
		out.eve[i] = ps[i].eve
	}
	return out
}

// nextDelta returns the largest Δ ≤ rest whose incremental weights
// exp(Δ·ℓ) have conditional ESS (Σ W u)²/Σ W u² ≥ cess, by bisection.
func nextDelta(logW, ell []float64, rest, cess float64) float64 {
	if condESS(logW, ell, rest) >= cess {
		return rest
	}
	lo, hi := 0.0, rest
	for range 50 {
		mid := 0.5 * (lo + hi)
		if condESS(logW, ell, mid) >= cess {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Max(lo, 1e-12)
}

func condESS(logW, ell []float64, delta float64) float64 {
	mx := math.Inf(-1)
	for i := range ell {
		if v := delta * ell[i]; !math.IsInf(logW[i], -1) && v > mx {
			mx = v
		}
	}
	if math.IsInf(mx, -1) || math.IsNaN(mx) {
		return 0
	}
	s1, s2 := 0.0, 0.0
	for i := range ell {
		if math.IsInf(logW[i], -1) || math.IsInf(ell[i], -1) {
			continue
		}
		u := math.Exp(delta*ell[i] - mx)
		w := math.Exp(logW[i])
		s1 += w * u
		s2 += w * u * u
	}
	if s2 == 0 {
		return 0
	}
	return s1 * s1 / s2
}

// logSumWeighted returns log Σ_i W_i exp(Δ ℓ_i) for normalised log W.
func logSumWeighted(logW, ell []float64, delta float64) float64 {
	mx := math.Inf(-1)
	for i := range ell {
		if v := logW[i] + delta*ell[i]; v > mx && !math.IsNaN(v) {
			mx = v
		}
	}
	if math.IsInf(mx, -1) {
		return mx
	}
	s := 0.0
	for i := range ell {
		if v := logW[i] + delta*ell[i]; !math.IsNaN(v) {
			s += math.Exp(v - mx)
		}
	}
	return mx + math.Log(s)
}

func normaliseLog(logW []float64) {
	mx := math.Inf(-1)
	for _, v := range logW {
		mx = math.Max(mx, v)
	}
	s := 0.0
	for _, v := range logW {
		s += math.Exp(v - mx)
	}
	c := mx + math.Log(s)
	for i := range logW {
		logW[i] -= c
	}
}

// essLog is the normalised ESS 1/(N Σ W²) of normalised log weights.
func essLog(logW []float64) float64 {
	s2 := 0.0
	for _, v := range logW {
		w := math.Exp(v)
		s2 += w * w
	}
	if s2 == 0 {
		return 0
	}
	return 1 / (float64(len(logW)) * s2)
}

// systematic resamples the particles by systematic resampling with
// normalised log weights logW.
func systematic(rng *rand.Rand, ps []particle, logW []float64) []particle {
	n := len(ps)
	out := make([]particle, n)
	u := rng.Float64() / float64(n)
	c := math.Exp(logW[0])
	k := 0
	for i := range n {
		for u > c && k < n-1 {
			k++
			c += math.Exp(logW[k])
		}
		src := ps[k]
		out[i] = particle{z: append([]float64(nil), src.z...), gg: append([]float64(nil), src.gg...),
			gr: append([]float64(nil), src.gr...), lg: src.lg, lr: src.lr, eve: src.eve}
		u += 1 / float64(n)
	}
	return out
}

// mover applies preconditioned MALA moves targeting π_β.
type mover struct {
	d                    int
	chol                 []float64 // Cholesky factor of the preconditioner Σ
	cov                  []float64
	zp, gg, gr, xi, mean []float64
	tmp, tmp2            []float64
}

func newMover(d int) *mover {
	m := &mover{d: d}
	for _, p := range []*[]float64{&m.zp, &m.gg, &m.gr, &m.xi, &m.mean, &m.tmp, &m.tmp2} {
		*p = make([]float64, d)
	}
	return m
}

// prepare sets the preconditioner to the covariance of the weighted
// particles.
func (m *mover) prepare(ps []particle, logW []float64) {
	z := make([][]float64, len(ps))
	w := make([]float64, len(ps))
	for i := range ps {
		z[i] = ps[i].z
		w[i] = math.Exp(logW[i])
	}
	_, m.cov = weightedCov(z, w, m.d)
	m.chol = cholesky(m.cov, m.d)
}

// drift writes z + (ε²/2) Σ g into out, for g = (1−β)∇log r + β∇log γ.
func (m *mover) drift(z, gr, gg []float64, beta, eps float64, out []float64) {
	d := m.d
	for a := range d {
		m.tmp[a] = (1-beta)*gr[a] + beta*gg[a]
	}
	for a := range d {
		s := 0.0
		for b := range d {
			s += m.cov[a*d+b] * m.tmp[b]
		}
		out[a] = z[a] + 0.5*eps*eps*s
	}
}

// logKernel is log N(to; mean, ε²Σ) up to the constant shared by both
// directions.
func (m *mover) logKernel(to, mean []float64, eps float64) float64 {
	for a := range m.d {
		m.tmp[a] = to[a] - mean[a]
	}
	forward(m.chol, m.d, m.tmp, m.tmp2)
	q := 0.0
	for a := range m.d {
		q += m.tmp2[a] * m.tmp2[a]
	}
	return -0.5 * q / (eps * eps)
}

// move proposes z' ~ N(z + (ε²/2)Σ∇log π_β(z), ε²Σ) and accepts it with
// the Metropolis–Hastings probability; it reports acceptance.
func (m *mover) move(t *target, ref refDist, rs *refScratch, p *particle, beta, eps float64, rng *rand.Rand) bool {
	d := m.d
	m.drift(p.z, p.gr, p.gg, beta, eps, m.mean)
	for a := range d {
		m.xi[a] = rng.NormFloat64()
	}
	lowerMul(m.chol, d, m.xi, m.zp)
	for a := range d {
		m.zp[a] = m.mean[a] + eps*m.zp[a]
	}
	lg := t.logProb(m.zp, m.gg)
	if math.IsInf(lg, -1) {
		return false
	}
	gr := m.gr
	if beta >= 1 {
		gr = nil // weighted by 1 − β = 0: not needed (m.gr keeps finite values)
	}
	lr := ref.logProb(m.zp, gr, rs)
	fwd := m.logKernel(m.zp, m.mean, eps)
	m.drift(m.zp, m.gr, m.gg, beta, eps, m.mean)
	rev := m.logKernel(p.z, m.mean, eps)
	logA := (1-beta)*(lr-p.lr) + beta*(lg-p.lg) + rev - fwd
	if p.lr == math.Inf(-1) || p.lg == math.Inf(-1) {
		logA = math.Inf(1) // leave impossible states
	}
	if !(math.Log(rng.Float64()) < logA) {
		return false
	}
	copy(p.z, m.zp)
	copy(p.gg, m.gg)
	copy(p.gr, m.gr)
	p.lg, p.lr = lg, lr
	return true
}

// jump is an independence Metropolis–Hastings move targeting
// π_β ∝ r^(1−β) γ^β with r itself as the proposal: z' ~ r is accepted with
// probability min(1, (w(z')/w(z))^β), w = γ/r. It costs one likelihood
// (and a gradient when accepted and grad is set, for the MALA moves that
// follow); it reports acceptance.
func jump(t *target, ref refDist, rs *refScratch, p *particle, beta float64, grad bool, xi []float64, rng *rand.Rand) bool {
	z := make([]float64, len(p.z))
	ref.sample(rng, z, xi)
	lg := t.logProb(z, nil)
	if math.IsInf(lg, -1) {
		return false
	}
	lr := ref.logProb(z, nil, rs)
	logA := beta * ((lg - lr) - (p.lg - p.lr))
	if math.IsInf(p.lg, -1) || math.IsInf(p.lr, -1) {
		logA = 0
	}
	if !(math.Log(rng.Float64()) < logA) {
		return false
	}
	p.z = z
	p.lg, p.lr = lg, lr
	if grad {
		p.lg = t.logProb(z, p.gg)
		if beta < 1 {
			ref.logProb(z, p.gr, rs)
		}
	}
	return true
}

// multinomial resamples the particles by multinomial resampling with
// normalised log weights logW (the resampling under which lwRelVar's
// variance estimate holds).
func multinomial(rng *rand.Rand, ps []particle, logW []float64) []particle {
	n := len(ps)
	cum := make([]float64, n)
	c := 0.0
	for i, l := range logW {
		c += math.Exp(l)
		cum[i] = c
	}
	out := make([]particle, n)
	for i := range n {
		u := rng.Float64() * c
		k := sort.SearchFloat64s(cum, u)
		if k >= n {
			k = n - 1
		}
		src := ps[k]
		out[i] = particle{z: append([]float64(nil), src.z...), gg: append([]float64(nil), src.gg...),
			gr: append([]float64(nil), src.gr...), lg: src.lg, lr: src.lr, eve: src.eve}
	}
	return out
}

// lwRelVar is the estimate of the relative variance Var(Ẑ)/Z² of an SMC
// run's evidence from its own particles (Lee & Whiteley 2018, Biometrika
// 105:609; for adaptive resampling Du & Guyader 2021): with normalised
// final weights W_i, initial ancestors ("Eve indices") E_i and n
// multinomial resampling events,
//
//	V = 1 − (N/(N−1))^(n+1) (1 − Σ_e (Σ_{i: E_i = e} W_i)²).
//
// Without resampling it is the importance-sampling estimate (N ΣW² −
// 1)/(N − 1), the delta method's. It is consistent as N grows and
// degenerates (V → 1) when all particles descend from one ancestor.
func lwRelVar(logW []float64, eve []int, resamples int) float64 {
	n := float64(len(logW))
	byEve := map[int]float64{}
	for i, l := range logW {
		byEve[eve[i]] += math.Exp(l)
	}
	s := 0.0
	for _, w := range byEve {
		s += w * w
	}
	v := 1 - math.Pow(n/(n-1), float64(resamples+1))*(1-s)
	return math.Max(v, 0)
}
