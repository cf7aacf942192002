package correct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// SMC from the Laplace approximation (Settings.Laplace).
//
// Where q's draws are too broad for the kernel reference of reference.go
// (sharp posteriors, e.g. the sticks of a dMRI voxel), the SMC can start
// instead from the Laplace approximation at the posterior mode, whose
// density is known in closed form:
//
//  1. Mode. Newton steps from the best of a few draws of q, as in Refine
//     (newtonMode), give the mode m and Σ, the inverse of the negative
//     Hessian (eigenvalues raised to ≥ 1).
//  2. Chart. Axial directions parameterised by the hemisphere bijection
//     (family.Hemisphere: z = (z1, z2) ↦ a direction on the upper
//     hemisphere, uniform under N(0, I)) are split by the hemisphere's
//     rim: a posterior near it has two pieces far apart in z. Each such
//     direction is therefore re-expressed by its gnomonic coordinates
//     t ∈ ℝ² in the tangent plane at the mode's direction u (the axis ±v
//     ↦ t = v/(v·u) − u for the sign with v·u > 0), a bijection between
//     ℝ² and the axes off one great circle, smooth where the posterior
//     is. The other latents are kept. y denotes the new coordinates; the
//     Jacobian is |∂y/∂z| = 2π φ(z1) φ(z2) (1 + |t|²)^{3/2} per direction.
//  3. Reference. A multivariate t (ν = 5) in y at the mode, with scale
//     J Σ Jᵀ (J = ∂y/∂z at the mode by central differences of the chart);
//     its density in z is t(y(z)) |∂y/∂z|, exact and normalised.
//  4. Symmetry. Exchangeable components (the sticks) make k! copies of
//     every mode (k active ones). The target is restricted to the
//     fundamental domain D of the relabellings nearest the mode: the
//     points whose directions v_i match the mode's u_i better, by
//     Σ_i |v_i·u_i|, than under any permutation. Every orbit of the
//     relabellings meets D once (up to ties, of measure zero), so
//     p(x | M) = k! ∫_D γ, exactly, whether or not the copies overlap.
//     Several groups of exchangeable components (sticks, zeppelins,
//     tensors) multiply: D matches each group separately and the factor
//     is Π_g k_g!; components without an axis (tensors) are matched by
//     the distance of a key (LaplaceOptions.Key, e.g. the tensor D)
//     instead of |v·u|. Reflections of single latents (LaplaceOptions.Signs,
//     the sign of each column of a tensor's Cholesky factor) restrict D
//     further to the mode's signs, a factor 2 each.
//  5. SMC. runSMC from the reference to γ·1_D: adaptive tempering by the
//     conditional ESS, multinomial resampling, and per step laplaceJumps
//     independence moves from the reference (accepted with probability
//     min(1, (w'/w)^β), w = γ/r; they renew resampled duplicates at the
//     cost of one likelihood) and s.Moves MALA moves. With a good Laplace
//     fit the first step reaches β = 1: importance sampling from the
//     reference followed by moves.
//  6. Evidence. Ẑ = k! (all factors of step 4) × the SMC's product of
//     mean incremental weights; its standard error from the run itself
//     (lwRelVar, Lee & Whiteley's estimator from the particles' initial
//     ancestors; without resampling it is the importance sampler's
//     delta-method SE).
//
// The reference is a two-component mixture: the t with the Laplace
// scale, and one whose weakly determined directions (Hessian eigenvalue
// below laplaceWeak) take the prior's scale, for posteriors whose tail
// along a ridge is the prior's (d_std, fractions near 0).

// LaplaceOptions select the Laplace start of SMC and describe the
// family's symmetries.
type LaplaceOptions struct {
	// Axes maps a component to the full-latent indices (z1, z2) of an
	// axial direction parameterised by family.Hemisphere (e.g. a stick's
	// theta, phi); components without one are absent.
	Axes map[int][2]int
	// Exchangeable lists components whose labels do not matter (as
	// RefineSettings.Exchangeable); each must have an axis or a Key.
	// Candidate masks are first relabelled to their canonical representative (the
	// active exchangeable components first), so that masks with the same
	// number of them share one run, and the domain restriction of step 4
	// applies to the active ones.
	Exchangeable []int
	// Groups are further sets of exchangeable components (e.g. a family's
	// sticks, its zeppelins and its tensors), handled as Exchangeable;
	// components of a group without an axis need Key.
	Groups [][]int
	// Key, for exchangeable components without an axis, maps component
	// k's latent block to a point of ℝⁿ that identifies its value up to
	// the component's own symmetries (e.g. a tensor's D, whatever the
	// signs of its Cholesky columns); the relabelling domain compares
	// such components by the distance of their keys.
	Key func(k int, block []float64) []float64
	// Signs are full-latent indices whose sign is a symmetry of the
	// model: flipping it (with whatever else the family flips with it)
	// leaves likelihood and prior unchanged, as the sign of a column of a
	// tensor's Cholesky factor L leaves L·Lᵀ. The target is restricted to
	// the mode's sign of every active one and the evidence multiplied by
	// 2 for each; they must not be part of an axis.
	Signs []int
	// Starts is the number of draws of q the mode search starts from, the
	// best by log γ first (each a Newton search of up to
	// laplaceStartIters steps, the best end point kept); 0 or 1: one
	// search of up to newtonIters steps from the best draw. Several
	// starts find the global mode where q is far from the posterior (an
	// untrained network's draws are nearly the prior's) and the
	// likelihood has local modes (a stick's direction, which
	// compartment takes which diffusivity).
	Starts int
	// StartIters bounds the Newton steps of each of several starts
	// (0: laplaceStartIters); a start near the mode, as a trained
	// network's draws are, needs no more than newtonIters.
	StartIters int
	// StartsMinActive, if positive, keeps several starts to the models
	// with at least this many active Exchangeable components (one can
	// settle on another's direction); the others take one start.
	StartsMinActive int
}

// laplaceStartIters bounds the Newton steps of each of several starts
// (LaplaceOptions.Starts): from a prior-like draw the search needs more
// than the newtonIters of a start near the mode.
const laplaceStartIters = 4 * newtonIters

// groups returns Exchangeable and Groups together (the sets with ≥ 2
// components).
func (lo *LaplaceOptions) groups() [][]int {
	var out [][]int
	for _, g := range append([][]int{lo.Exchangeable}, lo.Groups...) {
		if len(g) > 1 {
			out = append(out, g)
		}
	}
	return out
}

// laplaceDF is the degrees of freedom of the Laplace reference.
const laplaceDF = 5

// axis is one direction of the chart: its positions in z and the
// tangent frame (u, e1, e2) at the mode.
type axis struct {
	a1, a2    int
	u, e1, e2 [3]float64
}

// chart maps the active latents z to y (gnomonic coordinates of the
// axes at the mode, the other latents unchanged).
type chart struct {
	d    int
	axes []axis
}

// hemiDir is the direction of the hemisphere bijection at (z1, z2)
// (family.Hemisphere, computed as in the dMRI likelihood: cos θ = Φ(−z1),
// sin θ = √(Φ(z1)(1 + cos θ))).
func hemiDir(z1, z2 float64) [3]float64 {
	ct := family.Phi(-z1)
	st := math.Sqrt(family.Phi(z1) * (1 + ct))
	sp, cp := math.Sincos(2*math.Pi*family.Phi(z2) - math.Pi)
	return [3]float64{st * cp, st * sp, ct}
}

func dot3(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

// newChart sets the tangent frames at the mode z0 for the axes at
// positions pos (pairs of indices into z).
func newChart(d int, pos [][2]int, z0 []float64) *chart {
	c := &chart{d: d}
	for _, p := range pos {
		u := hemiDir(z0[p[0]], z0[p[1]])
		// e1: the coordinate axis least aligned with u, orthogonalised.
		k := 0
		for i := 1; i < 3; i++ {
			if math.Abs(u[i]) < math.Abs(u[k]) {
				k = i
			}
		}
		var e1 [3]float64
		e1[k] = 1
		dd := dot3(e1, u)
		n := 0.0
		for i := range 3 {
			e1[i] -= dd * u[i]
			n += e1[i] * e1[i]
		}
		n = math.Sqrt(n)
		for i := range 3 {
			e1[i] /= n
		}
		e2 := [3]float64{u[1]*e1[2] - u[2]*e1[1], u[2]*e1[0] - u[0]*e1[2], u[0]*e1[1] - u[1]*e1[0]}
		c.axes = append(c.axes, axis{a1: p[0], a2: p[1], u: u, e1: e1, e2: e2})
	}
	return c
}

// toY writes y(z) and returns log |∂y/∂z|; ok is false where the chart
// is undefined (an axis on the great circle orthogonal to u, or a latent
// that is not finite).
func (c *chart) toY(z, y []float64) (logJ float64, ok bool) {
	copy(y, z)
	for _, a := range c.axes {
		z1, z2 := z[a.a1], z[a.a2]
		if math.IsInf(z1, 0) || math.IsInf(z2, 0) || math.IsNaN(z1) || math.IsNaN(z2) {
			return 0, false
		}
		v := hemiDir(z1, z2)
		cu := dot3(v, a.u)
		if cu == 0 {
			return 0, false
		}
		t1, t2 := dot3(v, a.e1)/cu, dot3(v, a.e2)/cu
		y[a.a1], y[a.a2] = t1, t2
		// 2π φ(z1) φ(z2) = exp(−(z1² + z2²)/2).
		logJ += -0.5*(z1*z1+z2*z2) + 1.5*math.Log1p(t1*t1+t2*t2)
	}
	return logJ, true
}

// toZ writes z(y); ok is false where it is undefined (an axis on the
// hemisphere's rim, measure zero).
func (c *chart) toZ(y, z []float64) bool {
	copy(z, y)
	for _, a := range c.axes {
		t1, t2 := y[a.a1], y[a.a2]
		var w [3]float64
		n := 0.0
		for i := range 3 {
			w[i] = a.u[i] + t1*a.e1[i] + t2*a.e2[i]
			n += w[i] * w[i]
		}
		n = math.Sqrt(n)
		if w[2] < 0 {
			n = -n
		}
		for i := range 3 {
			w[i] /= n
		}
		if !(w[2] > 0) {
			return false
		}
		// Φ(−z1) = cos θ; near the pole 1 − cos θ = Φ(z1) without
		// cancellation (as family.HemisphereInv).
		s2 := w[0]*w[0] + w[1]*w[1]
		if w[2] < 0.5 {
			z[a.a1] = -family.PhiInv(w[2])
		} else {
			z[a.a1] = family.PhiInv(s2 / (1 + w[2]))
		}
		z[a.a2] = family.PhiInv((math.Atan2(w[1], w[0]) + math.Pi) / (2 * math.Pi))
		if math.IsInf(z[a.a1], 0) || math.IsInf(z[a.a2], 0) {
			return false
		}
	}
	return true
}

// laplaceRef is the reference in the chart's coordinates, as a density
// on z: the multivariate t at the mode with the Laplace scale, or, with a
// second scale, the equal mixture of the two t densities (same centre).
type laplaceRef struct {
	c      *chart
	d      int
	mu     []float64   // centre in y
	chol   [][]float64 // Cholesky factors of the scales in y
	logNrm []float64   // log normalisation of each t density in y (with its weight)
}

func newLaplaceRef(c *chart, mu []float64, covs ...[]float64) *laplaceRef {
	d := c.d
	r := &laplaceRef{c: c, d: d, mu: mu}
	nu, fd := float64(laplaceDF), float64(d)
	lg1, _ := math.Lgamma((nu + fd) / 2)
	lg2, _ := math.Lgamma(nu / 2)
	for _, cov := range covs {
		l := cholesky(cov, d)
		r.chol = append(r.chol, l)
		r.logNrm = append(r.logNrm, lg1-lg2-0.5*fd*math.Log(nu*math.Pi)-logDiag(l, d)-math.Log(float64(len(covs))))
	}
	return r
}

func (r *laplaceRef) dim() int { return r.d }

func (r *laplaceRef) scratch() *refScratch {
	return &refScratch{y: make([]float64, r.d), acc: make([]float64, r.d), lw: make([]float64, r.d)}
}

// logY is log of the t density at y, using s.acc as scratch.
func (r *laplaceRef) logY(y []float64, s *refScratch) float64 {
	for a := range r.d {
		y[a] -= r.mu[a]
	}
	l := math.Inf(-1)
	for k, ch := range r.chol {
		forward(ch, r.d, y, s.acc)
		q := 0.0
		for _, v := range s.acc {
			q += v * v
		}
		lk := r.logNrm[k] - 0.5*(laplaceDF+float64(r.d))*math.Log1p(q/laplaceDF)
		if lk > l {
			l, lk = lk, l
		}
		if !math.IsInf(lk, -1) {
			l += math.Log1p(math.Exp(lk - l))
		}
	}
	return l
}

// laplaceGradStep is the central-difference step of ∇ log r (latent
// units; r is smooth on the scale of the posterior widths, ≳ 10⁻³).
const laplaceGradStep = 1e-6

// logProb returns log r(z) and, when grad is not nil, its gradient by
// central differences (the chart's derivatives are not needed anywhere
// else; MALA only needs a deterministic drift, the Metropolis–Hastings
// correction keeps it exact).
func (r *laplaceRef) logProb(z, grad []float64, s *refScratch) float64 {
	lj, ok := r.c.toY(z, s.y)
	if !ok {
		if grad != nil {
			clear(grad)
		}
		return math.Inf(-1)
	}
	l := r.logY(s.y, s) + lj
	if grad != nil {
		zp := s.lw
		copy(zp, z)
		for a := range r.d {
			zp[a] = z[a] + laplaceGradStep
			lp := r.logProb(zp, nil, s)
			zp[a] = z[a] - laplaceGradStep
			lm := r.logProb(zp, nil, s)
			zp[a] = z[a]
			grad[a] = (lp - lm) / (2 * laplaceGradStep)
			if math.IsNaN(grad[a]) || math.IsInf(grad[a], 0) {
				grad[a] = 0
			}
		}
	}
	return l
}

// sample draws z ~ r (a draw of y on the chart's undefined set, of
// probability zero, is redrawn).
func (r *laplaceRef) sample(rng *rand.Rand, z, xi []float64) {
	y := make([]float64, r.d)
	for {
		u := 0.0
		for range laplaceDF {
			v := rng.NormFloat64()
			u += v * v
		}
		sc := math.Sqrt(laplaceDF / u)
		for a := range xi {
			xi[a] = rng.NormFloat64()
		}
		lowerMul(r.chol[rng.IntN(len(r.chol))], r.d, xi, y)
		for a := range y {
			y[a] = r.mu[a] + sc*y[a]
		}
		if r.c.toZ(y, z) {
			return
		}
	}
}

// sandwich returns J Σ Jᵀ (row-major d×d).
func sandwich(j, sig []float64, d int) []float64 {
	tmp, out := make([]float64, d*d), make([]float64, d*d)
	for a := range d {
		for b := range d {
			v := 0.0
			for k := range d {
				v += j[a*d+k] * sig[k*d+b]
			}
			tmp[a*d+b] = v
		}
	}
	for a := range d {
		for b := range d {
			v := 0.0
			for k := range d {
				v += tmp[a*d+k] * j[b*d+k]
			}
			out[a*d+b] = v
		}
	}
	return out
}

// laplaceWeak is the Hessian eigenvalue (precision, latent units) below
// which the reference's second component takes the prior's scale.
const laplaceWeak = 25

// laplaceJumps is the number of independence moves from the Laplace
// reference per tempering step (before the MALA moves): each is one
// likelihood, accepted with probability min(1, (w'/w)^β).
const laplaceJumps = 1

// permutations returns the permutations of 0 … k−1.
func permutations(k int) [][]int {
	if k <= 1 {
		return [][]int{make([]int, k)}
	}
	var out [][]int
	for _, p := range permutations(k - 1) {
		for i := 0; i <= k-1; i++ {
			q := make([]int, 0, k)
			q = append(q, p[:i]...)
			q = append(q, k-1)
			q = append(q, p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// relabelItem is one exchangeable component in the coordinates z of a
// run: its axis (positions a1, a2 of its hemisphere latents) or, for a
// component without one, its latent block z[lo:hi] and the key that
// identifies its value up to its own symmetries (LaplaceOptions.Key).
type relabelItem struct {
	axis   bool
	a1, a2 int
	lo, hi int
	key    func(block []float64) []float64
}

// value is the item's value at z: its direction for an axis, else its key.
func (it relabelItem) value(z []float64) []float64 {
	if it.axis {
		v := hemiDir(z[it.a1], z[it.a2])
		return v[:]
	}
	return it.key(z[it.lo:it.hi])
}

// score is the similarity of an item's value v to the mode's value ref:
// |v·u| for an axis, the negative squared distance of the keys otherwise.
func (it relabelItem) score(v, ref []float64) float64 {
	if it.axis {
		return math.Abs(v[0]*ref[0] + v[1]*ref[1] + v[2]*ref[2])
	}
	s := 0.0
	for i := range v {
		d := v[i] - ref[i]
		s -= d * d
	}
	return s
}

// relabelDomain returns the indicator of the fundamental domain D of the
// relabellings within each group of exchangeable items (step 4) and
// Σ log k_g! (nil and 0 when no group has two items). A point is in D
// when, in every group, the identity assignment of its items to the
// mode's matches them at least as well (score) as any permutation: the
// relabellings of a group permute its items' values, so every orbit
// meets D once, up to ties of measure zero.
func relabelDomain(groups [][]relabelItem, z0 []float64) (func(z []float64) bool, float64) {
	type grp struct {
		items []relabelItem
		ref   [][]float64
		perms [][]int
		s     [][]float64 // scores of item i against the mode's item j (one domain per goroutine: runAllLaplace builds one per run)
	}
	var gs []grp
	logK := 0.0
	for _, items := range groups {
		k := len(items)
		if k < 2 {
			continue
		}
		g := grp{items: items, perms: permutations(k), s: make([][]float64, k)}
		for i, it := range items {
			g.ref = append(g.ref, it.value(z0))
			g.s[i] = make([]float64, k)
		}
		for i := 2; i <= k; i++ {
			logK += math.Log(float64(i))
		}
		gs = append(gs, g)
	}
	if len(gs) == 0 {
		return nil, 0
	}
	return func(z []float64) bool {
		for _, g := range gs {
			k := len(g.items)
			for i, it := range g.items {
				v := it.value(z)
				for j := range k {
					g.s[i][j] = it.score(v, g.ref[j])
				}
			}
			id := 0.0
			for i := range k {
				id += g.s[i][i]
			}
			for _, p := range g.perms {
				sc := 0.0
				for i, j := range p {
					sc += g.s[i][j]
				}
				if sc > id {
					return false
				}
			}
		}
		return true
	}, logK
}

// signDomain returns the indicator of the points whose latents at
// positions pos have the signs of z0's (a fundamental domain of the
// reflections of LaplaceOptions.Signs) and its log multiplicity
// len(pos)·log 2 (nil and 0 without any).
func signDomain(pos []int, z0 []float64) (func(z []float64) bool, float64) {
	if len(pos) == 0 {
		return nil, 0
	}
	neg := make([]bool, len(pos))
	for i, a := range pos {
		neg[i] = z0[a] < 0
	}
	return func(z []float64) bool {
		for i, a := range pos {
			if (z[a] < 0) != neg[i] {
				return false
			}
		}
		return true
	}, float64(len(pos)) * math.Ln2
}

// canonicalMask returns mask with its active exchangeable components
// moved to the first positions of exch (a new slice when it changes).
func canonicalMask(mask []bool, exch []int) []bool {
	n := 0
	for _, k := range exch {
		if mask[k] {
			n++
		}
	}
	out := append([]bool(nil), mask...)
	for i, k := range exch {
		out[k] = i < n
	}
	return out
}

// runAllLaplace is Evidence for SMC with a Laplace start: every
// observation's candidates are grouped by canonical mask, each group is
// corrected once from s.Draws draws of q (for the mode search only), and
// every candidate of a group gets the group's result (Mask the canonical
// one).
func runAllLaplace(p *posterior.Posterior, obs []posterior.Observation, cands func(int) [][]bool, s Settings, out [][]Result) error {
	lo := s.Laplace
	groups0 := lo.groups()
	for _, g := range groups0 {
		for _, k := range g {
			if _, ok := lo.Axes[k]; !ok && lo.Key == nil {
				return fmt.Errorf("correct: exchangeable component %d has neither an axis nor a key", k)
			}
		}
	}
	groups := make([][][]bool, len(obs)) // canonical masks per observation
	which := make([][]int, len(obs))     // candidate → group
	rows := make([][][]bool, len(obs))
	for i := range obs {
		seen := map[string]int{}
		for _, m := range cands(i) {
			cm := m
			for _, g := range groups0 {
				cm = canonicalMask(cm, g)
			}
			key := family.MaskString(cm)
			g, ok := seen[key]
			if !ok {
				g = len(groups[i])
				seen[key] = g
				groups[i] = append(groups[i], cm)
				rows[i] = append(rows[i], posterior.Repeat(cm, s.Draws)...)
			}
			which[i] = append(which[i], g)
		}
	}
	ts, err := p.SampleTheta(obs, rows, s.Sample)
	if err != nil {
		return fmt.Errorf("correct: sampling q(θ | M, x): %w", err)
	}
	type job struct{ i, g int }
	var jobs []job
	res := make([][]Result, len(obs))
	for i := range obs {
		res[i] = make([]Result, len(groups[i]))
		for g := range groups[i] {
			jobs = append(jobs, job{i, g})
		}
	}
	f := p.Family()
	err = parallel(len(jobs), func(k int) error {
		i, g := jobs[k].i, jobs[k].g
		mask := groups[i][g]
		s1, s2 := jobSeed(s.Sample.Seed, s.Sample.Offset+uint64(i), mask, 0)
		res[i][g] = laplaceModel(f, obs[i], mask, ts[i].Theta[g*s.Draws:(g+1)*s.Draws], s, rand.New(rand.NewPCG(s1, s2)))
		return nil
	})
	if err != nil {
		return err
	}
	for i := range obs {
		for m, g := range which[i] {
			out[i][m] = res[i][g]
		}
	}
	return nil
}

// findMode returns the mode that the Newton search reaches from draws
// (full latent vectors) and the preconditioner there, or nil when no draw
// has a finite density. With starts ≤ 1 it is one search of up to
// newtonIters steps from the draw of highest density; with more, a
// search of up to iters steps (0: laplaceStartIters, rounded down to
// whole newtonIters) from each of the starts best draws, keeping the
// highest end point (LaplaceOptions.Starts, StartIters).
func findMode(t *target, draws [][]float64, starts, iters int) ([]float64, *precond) {
	type start struct {
		z []float64
		l float64
	}
	d := len(t.idx)
	var all []start
	for _, th := range draws {
		z := make([]float64, d)
		for a, q := range t.idx {
			z[a] = th[q]
		}
		if l := t.logProb(z, nil); !math.IsInf(l, -1) && !math.IsNaN(l) {
			all = append(all, start{z, l})
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].l > all[b].l })
	gp, tmp := make([]float64, d), make([]float64, d)
	if starts <= 1 {
		pc, _ := newtonMode(t, all[0].z, all[0].l, newPrecond(t, all[0].z), gp, tmp)
		return all[0].z, pc
	}
	var (
		best   []float64
		bestPC *precond
		bestL  = math.Inf(-1)
	)
	for _, st := range all[:min(starts, len(all))] {
		pc := newPrecond(t, st.z)
		l := st.l
		if iters <= 0 {
			iters = laplaceStartIters
		}
		for range max(iters/newtonIters, 1) {
			var l2 float64
			pc, l2 = newtonMode(t, st.z, l, pc, gp, tmp)
			done := l2 <= l+newtonTol
			l = l2
			if done {
				break
			}
		}
		if best == nil || l > bestL {
			best, bestPC, bestL = st.z, pc, l
		}
	}
	return best, bestPC
}

// laplaceModel corrects one observation under one (canonical) model,
// starting the mode search from draws (full latent vectors).
func laplaceModel(f family.Family, o posterior.Observation, mask []bool, draws [][]float64, s Settings, rng *rand.Rand) Result {
	lay := f.Layout()
	act := make([]bool, lay.DMax)
	lay.Active(mask, act)
	t := newTarget(f, o.Design, o.X, mask, act)
	d := len(t.idx)
	res := Result{Mask: mask}
	if d == 0 {
		res.LogEvidence = t.logProb(nil, nil)
		res.ESS, res.Theta, res.LogW = 1, [][]float64{t.theta(nil)}, []float64{0}
		res.SMCLogEvidence = res.LogEvidence
		res.judge(s)
		return res
	}
	// 1. Mode.
	starts, iters := s.Laplace.Starts, s.Laplace.StartIters
	if m := s.Laplace.StartsMinActive; m > 0 {
		n := 0
		for _, k := range s.Laplace.Exchangeable {
			if mask[k] {
				n++
			}
		}
		if n < m {
			starts = 1
		}
	}
	best, pc := findMode(t, draws, starts, iters)
	if best == nil {
		res.LogEvidence = math.Inf(-1)
		res.judge(s)
		return res
	}
	// 2. Chart: the axes of the active components, positions in z.
	pos := map[int]int{}
	for a, q := range t.idx {
		pos[q] = a
	}
	var axes [][2]int
	for k := range mask {
		ax, ok := s.Laplace.Axes[k]
		if !ok || !mask[k] {
			continue
		}
		a1, ok1 := pos[ax[0]]
		a2, ok2 := pos[ax[1]]
		if !ok1 || !ok2 {
			continue
		}
		axes = append(axes, [2]int{a1, a2})
	}
	var items [][]relabelItem
	for _, g := range s.Laplace.groups() {
		var its []relabelItem
		for _, k := range g {
			if !mask[k] {
				continue
			}
			if ax, ok := s.Laplace.Axes[k]; ok {
				its = append(its, relabelItem{axis: true, a1: pos[ax[0]], a2: pos[ax[1]]})
				continue
			}
			b := lay.Blocks[k]
			key := s.Laplace.Key
			its = append(its, relabelItem{lo: pos[b.Offset], hi: pos[b.Offset] + b.Size, key: func(z []float64) []float64 { return key(k, z) }})
		}
		items = append(items, its)
	}
	var signs []int
	for _, q := range s.Laplace.Signs {
		if a, ok := pos[q]; ok {
			signs = append(signs, a)
		}
	}
	c := newChart(d, axes, best)
	// 3. Reference: Σ_y = J Σ Jᵀ with Σ = V diag(1/λ) Vᵀ.
	mu := make([]float64, d)
	c.toY(best, mu)
	jac := make([]float64, d*d)
	zp, yp, ym := append([]float64(nil), best...), make([]float64, d), make([]float64, d)
	const h = 1e-6
	for b := range d {
		zp[b] = best[b] + h
		_, ok1 := c.toY(zp, yp)
		zp[b] = best[b] - h
		_, ok2 := c.toY(zp, ym)
		zp[b] = best[b]
		for a := range d {
			if ok1 && ok2 {
				jac[a*d+b] = (yp[a] - ym[a]) / (2 * h)
			} else if a == b {
				jac[a*d+b] = 1
			}
		}
	}
	// Σ = V diag(1/λ) Vᵀ, and the widened Σ_w: directions weaker than
	// laplaceWeak (posterior sd ≳ 0.2 latent units, where the likelihood
	// is flat on one side and the posterior's tail that of the prior)
	// get the prior's scale 1.
	sig, sigW := make([]float64, d*d), make([]float64, d*d)
	for a := range d {
		for b := range d {
			v, w := 0.0, 0.0
			for k := range d {
				l := pc.sq[k] * pc.sq[k]
				p := pc.v[a*d+k] * pc.v[b*d+k]
				v += p / l
				if l < laplaceWeak {
					l = 1
				}
				w += p / l
			}
			sig[a*d+b], sigW[a*d+b] = v, w
		}
	}
	cov, covW := sandwich(jac, sig, d), sandwich(jac, sigW, d)
	ref := newLaplaceRef(c, mu, cov, covW)
	// 4. Symmetry.
	inRelabel, logK := relabelDomain(items, best)
	inSign, logS := signDomain(signs, best)
	logK += logS
	switch {
	case inRelabel != nil && inSign != nil:
		t.inside = func(z []float64) bool { return inSign(z) && inRelabel(z) }
	case inRelabel != nil:
		t.inside = inRelabel
	default:
		t.inside = inSign
	}
	// 5. SMC.
	s.jumps, s.multinomial = laplaceJumps, true
	run := runSMC(t, ref, s, rng)
	res.Steps, res.Accept = float64(run.steps), run.accept
	res.SMCLogEvidence, res.SMCLogEvidenceSE = run.logZ+logK, math.NaN()
	if !run.ok {
		res.Reason = fmt.Sprintf("tempering did not reach β = 1 in %d steps", s.MaxSteps)
	}
	if math.IsInf(run.logZ, -1) || math.IsNaN(run.logZ) {
		res.LogEvidence = math.Inf(-1)
		res.judge(s)
		return res
	}

	res.Theta = make([][]float64, len(run.z))
	for j, z := range run.z {
		res.Theta[j] = t.theta(z)
	}
	res.LogW, res.ESS = run.logW, essLog(run.logW)
	res.LogEvidence = res.SMCLogEvidence
	res.LogEvidenceSE = math.Sqrt(lwRelVar(run.logW, run.eve, run.resamples))
	res.SMCLogEvidenceSE = res.LogEvidenceSE
	res.judge(s)
	return res
}
