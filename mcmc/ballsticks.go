package mcmc

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/family"
)

// MaxFibres is the largest number of sticks the sampler supports.
const MaxFibres = 3

// Settings configures the ball-and-sticks sampler. DefaultSettings returns
// BedpostX's defaults.
type Settings struct {
	Fibres              int     `json:"fibres"`                // number of sticks N, 1..MaxFibres
	BurnIn              int     `json:"burnin"`                // jumps discarded before recording (proposals adapt here)
	Jumps               int     `json:"jumps"`                 // jumps after burn-in
	SampleEvery         int     `json:"sample_every"`          // record every this many jumps: Jumps/SampleEvery samples
	UpdateProposalEvery int     `json:"update_proposal_every"` // rescale the proposal widths every this many burn-in jumps
	ARDWeight           float64 `json:"ard_weight"`            // w in the ARD prior p(f) ∝ f^−w on sticks 2..N; 0 switches ARD off
	DMax                float64 `json:"d_max"`                 // upper bound of d (mm²/s)
	DStdMax             float64 `json:"d_std_max"`             // upper bound of d_std (mm²/s)
	Seed                uint64  `json:"seed"`                  // seed of the per-voxel PCG streams
}

// DefaultSettings returns BedpostX's defaults: 3 sticks, burn-in 1000,
// 1250 jumps, a sample every 25 jumps, proposal update every 40 jumps,
// ARD weight 1, and the b3s prior supports d ≤ 0.01, d_std ≤ 0.005 mm²/s.
func DefaultSettings() Settings {
	return Settings{
		Fibres:              3,
		BurnIn:              1000,
		Jumps:               1250,
		SampleEvery:         25,
		UpdateProposalEvery: 40,
		ARDWeight:           1,
		DMax:                0.01,
		DStdMax:             0.005,
		Seed:                1,
	}
}

// Samples returns the number of recorded samples per voxel.
func (s Settings) Samples() int { return s.Jumps / s.SampleEvery }

// Validate reports the first inconsistent setting.
func (s Settings) Validate() error {
	switch {
	case s.Fibres < 1 || s.Fibres > MaxFibres:
		return fmt.Errorf("mcmc: fibres = %d, want 1..%d", s.Fibres, MaxFibres)
	case s.BurnIn < 0:
		return fmt.Errorf("mcmc: burn-in = %d, want ≥ 0", s.BurnIn)
	case s.SampleEvery < 1:
		return fmt.Errorf("mcmc: sample-every = %d, want ≥ 1", s.SampleEvery)
	case s.Jumps < s.SampleEvery:
		return fmt.Errorf("mcmc: jumps = %d gives no sample with sample-every = %d", s.Jumps, s.SampleEvery)
	case s.UpdateProposalEvery < 1:
		return fmt.Errorf("mcmc: update-proposal-every = %d, want ≥ 1", s.UpdateProposalEvery)
	case !(s.ARDWeight >= 0) || math.IsInf(s.ARDWeight, 0):
		return fmt.Errorf("mcmc: ARD weight = %v, want a finite value ≥ 0", s.ARDWeight)
	case !(s.DMax > 0) || math.IsInf(s.DMax, 0) || !(s.DStdMax > 0) || math.IsInf(s.DStdMax, 0):
		return fmt.Errorf("mcmc: d and d_std bounds must be positive and finite, got %v and %v", s.DMax, s.DStdMax)
	}
	return nil
}

// Chain holds the recorded samples of one voxel, sticks ordered by
// decreasing posterior mean fraction, directions on the upper hemisphere.
type Chain struct {
	Fibres int
	S0     []float64            // [sample]
	D      []float64            // [sample], mm²/s
	DStd   []float64            // [sample], mm²/s
	F      [MaxFibres][]float64 // [fibre][sample]
	Theta  [MaxFibres][]float64 // [fibre][sample], polar angle in [0, π/2]
	Phi    [MaxFibres][]float64 // [fibre][sample], azimuth in (−π, π]
	// Acceptance is the acceptance rate of each parameter over the recorded
	// jumps, in the order S0, d, d_std, then f, θ, φ per stick (sticks in
	// output order).
	Acceptance []float64
}

// NewChain allocates a chain for the given settings.
func NewChain(s Settings) *Chain {
	n := s.Samples()
	c := &Chain{
		Fibres:     s.Fibres,
		S0:         make([]float64, n),
		D:          make([]float64, n),
		DStd:       make([]float64, n),
		Acceptance: make([]float64, 3+3*s.Fibres),
	}
	for i := 0; i < s.Fibres; i++ {
		c.F[i] = make([]float64, n)
		c.Theta[i] = make([]float64, n)
		c.Phi[i] = make([]float64, n)
	}
	return c
}

// Len returns the number of samples in the chain.
func (c *Chain) Len() int { return len(c.S0) }

// Dir returns the unit direction of stick i in sample s.
func (c *Chain) Dir(i, s int) [3]float64 { return direction(c.Theta[i][s], c.Phi[i][s]) }

// parameter indices in the sampler state.
const (
	pS0 = iota
	pD
	pDStd
	pFibre // f, θ, φ of stick i at pFibre+3i, +1, +2
)

// Sampler runs the ball-and-sticks chain of one voxel at a time. It holds
// every buffer the chain needs, so Run does not allocate; a Sampler must not
// be used by two goroutines at once (RunVoxels uses one per worker).
type Sampler struct {
	set  Settings
	n    int
	b    []float64
	g    [][3]float64
	ub   []float64 // distinct b-values
	bIdx []int     // b[j] = ub[bIdx[j]]
	ubuf []float64 // ball signal per distinct b-value

	y     []float64
	x     [pFibre + 3*MaxFibres]float64 // current parameters
	width [pFibre + 3*MaxFibres]float64 // proposal standard deviations
	acc   [pFibre + 3*MaxFibres]int     // accepted in the current window
	rej   [pFibre + 3*MaxFibres]int     // rejected in the current window

	ball  []float64            // G(b_j, 1)
	stick [MaxFibres][]float64 // G(b_j, (g_j·n_i)²)
	mix   []float64            // (1−Σf)·ball + Σ f_i·stick_i
	ssr   float64
	prior float64 // prior energy (negative log prior density, up to a constant)

	// proposal buffers
	ballNew  []float64
	stickNew [MaxFibres][]float64
	mixNew   []float64
}

// NewSampler prepares a sampler for the acquisition design d (rows b, gx,
// gy, gz as produced by gradtable.ReadFSL).
func NewSampler(d family.Design, s Settings) (*Sampler, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if d.CovDim < 4 || d.N < 1 || len(d.Cov) < d.N*d.CovDim {
		return nil, fmt.Errorf("mcmc: design %q: want N ≥ 1 rows of (b, gx, gy, gz), got N = %d, CovDim = %d", d.Name, d.N, d.CovDim)
	}
	n := d.N
	sm := &Sampler{set: s, n: n, b: make([]float64, n), g: make([][3]float64, n)}
	for j := 0; j < n; j++ {
		r := d.Row(j)
		sm.b[j] = r[0]
		sm.g[j] = [3]float64{r[1], r[2], r[3]}
	}
	// The ball depends on b only, and tables repeat a few b-values.
	sm.bIdx = make([]int, n)
	seen := map[float64]int{}
	for j, b := range sm.b {
		u, ok := seen[b]
		if !ok {
			u = len(sm.ub)
			seen[b] = u
			sm.ub = append(sm.ub, b)
		}
		sm.bIdx[j] = u
	}
	sm.ubuf = make([]float64, len(sm.ub))
	buf := make([]float64, n*(5+2*MaxFibres))
	next := func() []float64 { v := buf[:n:n]; buf = buf[n:]; return v }
	sm.y, sm.ball, sm.mix, sm.ballNew, sm.mixNew = next(), next(), next(), next(), next()
	for i := range MaxFibres {
		sm.stick[i], sm.stickNew[i] = next(), next()
	}
	return sm, nil
}

// ErrBadData is returned by Run for a voxel whose signal has non-finite
// values or no positive measurement to initialise from.
var ErrBadData = errors.New("mcmc: voxel signal is non-finite or nowhere positive")

// Run samples the posterior of one voxel's signal y (length N of the
// design, normally divided by the mean b≈0 signal) with the random stream
// r and stores the recorded samples in c (from NewChain with the same
// settings).
func (sm *Sampler) Run(y []float64, r *rand.Rand, c *Chain) error {
	if len(y) != sm.n {
		return fmt.Errorf("mcmc: signal has %d values, the design %d", len(y), sm.n)
	}
	if c.Fibres != sm.set.Fibres || c.Len() != sm.set.Samples() || len(c.Acceptance) != pFibre+3*sm.set.Fibres {
		return fmt.Errorf("mcmc: chain for %d sticks × %d samples, the settings have %d × %d", c.Fibres, c.Len(), sm.set.Fibres, sm.set.Samples())
	}
	for _, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ErrBadData
		}
	}
	copy(sm.y, y)
	if err := sm.initialise(); err != nil {
		return err
	}
	sm.sample(r, c)
	return nil
}

// sample runs burn-in and recording from the current state.
func (sm *Sampler) sample(r *rand.Rand, c *Chain) {
	set := sm.set
	np := pFibre + 3*set.Fibres
	for it := 1; it <= set.BurnIn; it++ {
		sm.jump(r)
		if it%set.UpdateProposalEvery == 0 {
			sm.adapt(np)
		}
	}
	clear(sm.acc[:])
	clear(sm.rej[:])
	ns := c.Len()
	for it := 1; it <= ns*set.SampleEvery; it++ {
		sm.jump(r)
		if it%set.SampleEvery == 0 {
			sm.record(c, it/set.SampleEvery-1)
		}
	}
	for k := 0; k < np; k++ {
		c.Acceptance[k] = float64(sm.acc[k]) / float64(max(1, sm.acc[k]+sm.rej[k]))
	}
	c.sortByMeanFraction()
}

// initialise sets the starting point from a log-linear tensor fit and the
// initial proposal widths.
func (sm *Sampler) initialise() error {
	set := sm.set
	t, _ := fitTensor(sm.b, sm.g, sm.y)
	if !(t.S0 > 0) || math.IsInf(t.S0, 0) {
		return ErrBadData
	}
	x := &sm.x
	clear(x[:])
	x[pS0] = t.S0
	x[pD] = clamp(t.Eval[0], 1e-5, 0.9*set.DMax)
	x[pDStd] = min(x[pD]/10, 0.9*set.DStdMax)
	f1 := 1 - (t.Eval[1]+t.Eval[2])/(2*t.Eval[0])
	if math.IsNaN(f1) {
		f1 = 0.3
	}
	const fRest = 0.05
	x[pFibre] = clamp(f1, 0.05, 0.95-fRest*float64(set.Fibres-1))
	for i := 0; i < set.Fibres; i++ {
		th, ph := angles(t.Evec[i])
		if i > 0 {
			x[pFibre+3*i] = fRest
		}
		x[pFibre+3*i+1], x[pFibre+3*i+2] = th, ph
	}
	w := &sm.width
	w[pS0] = x[pS0] / 10
	w[pD] = x[pD] / 10
	w[pDStd] = x[pDStd] / 10
	for i := 0; i < set.Fibres; i++ {
		w[pFibre+3*i] = 0.2
		w[pFibre+3*i+1] = 0.2
		w[pFibre+3*i+2] = 0.2
	}
	return sm.refresh()
}

// refresh recomputes the cached signals, SSR and prior energy from sm.x
// and resets the acceptance counters.
func (sm *Sampler) refresh() error {
	x := &sm.x
	clear(sm.acc[:])
	clear(sm.rej[:])
	sm.compartments(x[pD], x[pDStd], sm.ball, &sm.stick)
	sm.mixInto(sm.mix, sm.ball, &sm.stick, x)
	sm.ssr = sm.ssrOf(x[pS0], sm.mix)
	sm.prior = sm.priorEnergy(x)
	if math.IsInf(sm.prior, 0) || math.IsNaN(sm.ssr) {
		return fmt.Errorf("mcmc: initial point outside the prior support (S0 = %v, d = %v)", x[pS0], x[pD])
	}
	return nil
}

// energy is the negative log posterior up to a constant.
func (sm *Sampler) energy(ssr, prior float64) float64 {
	return 0.5*float64(sm.n)*math.Log(ssr) + prior
}

// priorEnergy returns −log p(x) up to a constant, +Inf outside the support.
func (sm *Sampler) priorEnergy(x *[pFibre + 3*MaxFibres]float64) float64 {
	set := sm.set
	if !(x[pS0] > 0) || !(x[pD] > 0 && x[pD] <= set.DMax) || !(x[pDStd] > 0 && x[pDStd] <= set.DStdMax) {
		return math.Inf(1)
	}
	e, sum := 0.0, 0.0
	for i := 0; i < set.Fibres; i++ {
		f := x[pFibre+3*i]
		if f < 0 || (i > 0 && set.ARDWeight > 0 && f == 0) {
			return math.Inf(1)
		}
		sum += f
		if i > 0 && set.ARDWeight > 0 {
			e += set.ARDWeight * math.Log(f)
		}
		s := math.Abs(math.Sin(x[pFibre+3*i+1]))
		if s == 0 {
			return math.Inf(1)
		}
		e -= math.Log(s)
	}
	if sum > 1 {
		return math.Inf(1)
	}
	return e
}

// gammaShape returns the shape k = (d/s)² and scale q = s²/d of the Gamma
// diffusivity law, in terms of which the compartment signal is
// G(b, c) = (1 + b c q)^−k = exp(−k·log1p(b c q)). This is
// dmri.GammaSignal for d, s > 0 (which the prior guarantees) with the
// per-(d, s) work hoisted out of the loop over measurements; it stays
// accurate for s → 0 because log1p is accurate for small arguments.
func gammaShape(d, s float64) (k, q float64) {
	r := d / s
	return r * r, s * s / d
}

// compartments evaluates the ball and stick signals for (d, d_std).
func (sm *Sampler) compartments(d, dstd float64, ball []float64, stick *[MaxFibres][]float64) {
	k, q := gammaShape(d, dstd)
	for u, b := range sm.ub {
		sm.ubuf[u] = math.Exp(-k * math.Log1p(b*q))
	}
	for j, u := range sm.bIdx {
		ball[j] = sm.ubuf[u]
	}
	for i := 0; i < sm.set.Fibres; i++ {
		sm.stickSignal(direction(sm.x[pFibre+3*i+1], sm.x[pFibre+3*i+2]), d, dstd, stick[i])
	}
}

// stickSignal evaluates one stick with direction n.
func (sm *Sampler) stickSignal(n [3]float64, d, dstd float64, out []float64) {
	k, q := gammaShape(d, dstd)
	for j, b := range sm.b {
		gj := &sm.g[j]
		c := gj[0]*n[0] + gj[1]*n[1] + gj[2]*n[2]
		out[j] = math.Exp(-k * math.Log1p(b*c*c*q))
	}
}

// mixInto computes the fraction-weighted sum of the compartments.
func (sm *Sampler) mixInto(mix, ball []float64, stick *[MaxFibres][]float64, x *[pFibre + 3*MaxFibres]float64) {
	fiso := 1.0
	for i := 0; i < sm.set.Fibres; i++ {
		fiso -= x[pFibre+3*i]
	}
	for j := range mix {
		mix[j] = fiso * ball[j]
	}
	for i := 0; i < sm.set.Fibres; i++ {
		f, s := x[pFibre+3*i], stick[i]
		for j := range mix {
			mix[j] += f * s[j]
		}
	}
}

func (sm *Sampler) ssrOf(s0 float64, mix []float64) float64 {
	var ssr float64
	for j, y := range sm.y {
		r := y - s0*mix[j]
		ssr += r * r
	}
	return ssr
}

// jump performs one Metropolis-within-Gibbs sweep over all parameters.
func (sm *Sampler) jump(r *rand.Rand) {
	for i := 0; i < sm.set.Fibres; i++ {
		sm.updateAngle(r, pFibre+3*i+1, i)
		sm.updateAngle(r, pFibre+3*i+2, i)
		sm.updateFraction(r, i)
	}
	sm.updateDiffusivity(r, pD)
	sm.updateDiffusivity(r, pDStd)
	sm.updateS0(r)
}

// accept applies the Metropolis rule to a proposal with the given new SSR
// and prior energy and updates the counters of parameter k.
func (sm *Sampler) accept(r *rand.Rand, k int, ssr, prior float64) bool {
	if math.IsInf(prior, 1) || !(ssr > 0) {
		sm.rej[k]++
		return false
	}
	delta := sm.energy(sm.ssr, sm.prior) - sm.energy(ssr, prior)
	if delta >= 0 || r.Float64() < math.Exp(delta) {
		sm.acc[k]++
		sm.ssr, sm.prior = ssr, prior
		return true
	}
	sm.rej[k]++
	return false
}

func (sm *Sampler) updateS0(r *rand.Rand) {
	old := sm.x[pS0]
	sm.x[pS0] = old + sm.width[pS0]*r.NormFloat64()
	prior := sm.priorEnergy(&sm.x)
	ssr := math.Inf(1)
	if !math.IsInf(prior, 1) {
		ssr = sm.ssrOf(sm.x[pS0], sm.mix)
	}
	if !sm.accept(r, pS0, ssr, prior) {
		sm.x[pS0] = old
	}
}

func (sm *Sampler) updateFraction(r *rand.Rand, i int) {
	k := pFibre + 3*i
	old := sm.x[k]
	sm.x[k] = old + sm.width[k]*r.NormFloat64()
	prior := sm.priorEnergy(&sm.x)
	if math.IsInf(prior, 1) {
		sm.rej[k]++
		sm.x[k] = old
		return
	}
	df := sm.x[k] - old
	st := sm.stick[i]
	for j := range sm.mixNew {
		sm.mixNew[j] = sm.mix[j] + df*(st[j]-sm.ball[j])
	}
	if sm.accept(r, k, sm.ssrOf(sm.x[pS0], sm.mixNew), prior) {
		sm.mix, sm.mixNew = sm.mixNew, sm.mix
	} else {
		sm.x[k] = old
	}
}

// updateAngle updates θ_i (k = pFibre+3i+1) or φ_i (k = pFibre+3i+2).
func (sm *Sampler) updateAngle(r *rand.Rand, k, i int) {
	old := sm.x[k]
	sm.x[k] = old + sm.width[k]*r.NormFloat64()
	prior := sm.priorEnergy(&sm.x)
	if math.IsInf(prior, 1) {
		sm.rej[k]++
		sm.x[k] = old
		return
	}
	base := pFibre + 3*i
	sn := sm.stickNew[i]
	sm.stickSignal(direction(sm.x[base+1], sm.x[base+2]), sm.x[pD], sm.x[pDStd], sn)
	f, st := sm.x[base], sm.stick[i]
	for j := range sm.mixNew {
		sm.mixNew[j] = sm.mix[j] + f*(sn[j]-st[j])
	}
	if sm.accept(r, k, sm.ssrOf(sm.x[pS0], sm.mixNew), prior) {
		sm.mix, sm.mixNew = sm.mixNew, sm.mix
		sm.stick[i], sm.stickNew[i] = sn, st
	} else {
		sm.x[k] = old
	}
}

// updateDiffusivity updates d (k = pD) or d_std (k = pDStd), which changes
// every compartment.
func (sm *Sampler) updateDiffusivity(r *rand.Rand, k int) {
	old := sm.x[k]
	sm.x[k] = old + sm.width[k]*r.NormFloat64()
	prior := sm.priorEnergy(&sm.x)
	if math.IsInf(prior, 1) {
		sm.rej[k]++
		sm.x[k] = old
		return
	}
	sm.compartments(sm.x[pD], sm.x[pDStd], sm.ballNew, &sm.stickNew)
	sm.mixInto(sm.mixNew, sm.ballNew, &sm.stickNew, &sm.x)
	if sm.accept(r, k, sm.ssrOf(sm.x[pS0], sm.mixNew), prior) {
		sm.mix, sm.mixNew = sm.mixNew, sm.mix
		sm.ball, sm.ballNew = sm.ballNew, sm.ball
		sm.stick, sm.stickNew = sm.stickNew, sm.stick
	} else {
		sm.x[k] = old
	}
}

// adapt rescales every proposal width by √((acc+1)/(rej+1)) and starts a
// new counting window.
func (sm *Sampler) adapt(np int) {
	set := sm.set
	for k := 0; k < np; k++ {
		sm.width[k] *= math.Sqrt(float64(sm.acc[k]+1) / float64(sm.rej[k]+1))
		sm.acc[k], sm.rej[k] = 0, 0
	}
	// Caps keep parameters the data do not constrain (the direction of a
	// vanishing stick) from growing steps without bound.
	sm.width[pD] = min(sm.width[pD], set.DMax)
	sm.width[pDStd] = min(sm.width[pDStd], set.DStdMax)
	for i := 0; i < set.Fibres; i++ {
		sm.width[pFibre+3*i] = min(sm.width[pFibre+3*i], 1)
		sm.width[pFibre+3*i+1] = min(sm.width[pFibre+3*i+1], math.Pi)
		sm.width[pFibre+3*i+2] = min(sm.width[pFibre+3*i+2], math.Pi)
	}
}

// record stores the current state as sample s (sticks in internal order,
// directions on the upper hemisphere).
func (sm *Sampler) record(c *Chain, s int) {
	x := &sm.x
	c.S0[s], c.D[s], c.DStd[s] = x[pS0], x[pD], x[pDStd]
	for i := 0; i < sm.set.Fibres; i++ {
		c.F[i][s] = x[pFibre+3*i]
		c.Theta[i][s], c.Phi[i][s] = angles(direction(x[pFibre+3*i+1], x[pFibre+3*i+2]))
	}
}

// sortByMeanFraction relabels the sticks by decreasing mean fraction.
func (c *Chain) sortByMeanFraction() {
	type stick struct {
		mean          float64
		f, th, ph     []float64
		accF, accTh   float64
		accPh         float64
		originalIndex int
	}
	s := make([]stick, c.Fibres)
	for i := range s {
		s[i] = stick{mean: mean(c.F[i]), f: c.F[i], th: c.Theta[i], ph: c.Phi[i],
			accF: c.Acceptance[pFibre+3*i], accTh: c.Acceptance[pFibre+3*i+1], accPh: c.Acceptance[pFibre+3*i+2], originalIndex: i}
	}
	sort.SliceStable(s, func(a, b int) bool { return s[a].mean > s[b].mean })
	for i, st := range s {
		c.F[i], c.Theta[i], c.Phi[i] = st.f, st.th, st.ph
		c.Acceptance[pFibre+3*i], c.Acceptance[pFibre+3*i+1], c.Acceptance[pFibre+3*i+2] = st.accF, st.accTh, st.accPh
	}
}

// direction returns (sin θ cos φ, sin θ sin φ, cos θ).
func direction(th, ph float64) [3]float64 {
	st, ct := math.Sincos(th)
	sp, cp := math.Sincos(ph)
	return [3]float64{st * cp, st * sp, ct}
}

// angles returns the polar angle θ ∈ [0, π/2] and azimuth φ ∈ (−π, π] of
// the axis ±n (the representative with n_z ≥ 0).
func angles(n [3]float64) (th, ph float64) {
	if n[2] < 0 {
		n = [3]float64{-n[0], -n[1], -n[2]}
	}
	norm := math.Sqrt(n[0]*n[0] + n[1]*n[1] + n[2]*n[2])
	th = math.Acos(clamp(n[2]/norm, -1, 1))
	ph = math.Atan2(n[1], n[0])
	if ph == -math.Pi {
		ph = math.Pi
	}
	return th, ph
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
