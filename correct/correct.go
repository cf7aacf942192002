// Package correct makes the amortized posterior of a trained PRISM network
// exact where the family has a likelihood: it uses the network's
// q(θ | M, x) as a proposal and corrects it, per observation and model,
// by self-normalised importance sampling (IS) or by sequential Monte Carlo
// (SMC) from q to the posterior with likelihood tempering, and computes
// the model posterior over candidate models from the corrected evidence
// log p(x | M).
//
//   - IS draws θ_j ~ q(θ | M, x) with their exact ODE log-densities and
//     weights them by p(x | θ, M) p(θ | M) / q(θ | M, x). It is cheap when
//     q is close to the posterior and fails (low ESS) when the posterior
//     is much sharper than q.
//   - SMC fits a kernel mixture r to draws of q (reference.go), then moves
//     particles from r to the posterior along π_β ∝ r^(1−β) γ^β with
//     adaptive steps chosen by the conditional ESS, systematic resampling
//     and MALA moves driven by the family's likelihood gradients
//     (smc.go), in independent replicates. A final importance stage with
//     a proposal fitted to the particles gives the evidence, its standard
//     error and the weighted samples; where its ESS is too low, the
//     particles and the replicates' own estimate are kept.
//   - SMC with Settings.Laplace starts instead from the Laplace
//     approximation at the posterior mode (laplace.go), in coordinates
//     where axial directions are not cut by the hemisphere's rim, on a
//     fundamental domain of exchangeable components' relabellings: one
//     run per model, the evidence SE from its own particles. For sharp
//     posteriors such as a dMRI voxel's, where q's draws are too broad
//     to build a reference from.
//
// Every Result carries its diagnostics (ESS, tempering steps, MALA
// acceptance, log-evidence standard error) and a Failed flag with the
// reason when they fall outside the Settings' limits, so that callers can
// report a failed correction instead of a silently wrong answer. Work runs
// in parallel over observations, models and replicates; every random
// number comes from streams indexed by the seed, the observation's global
// index, the model's mask and the replicate, so results are reproducible
// and do not depend on how a data set is split.
package correct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Method selects the correction.
type Method int

const (
	// None keeps the network's amortized posterior.
	None Method = iota
	// IS is self-normalised importance sampling with q as the proposal.
	IS
	// SMC is sequential Monte Carlo from q to the posterior.
	SMC
)

// Methods lists the names ParseMethod accepts.
const Methods = "none|is|smc"

// ParseMethod parses "none", "is" or "smc".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "none", "":
		return None, nil
	case "is":
		return IS, nil
	case "smc":
		return SMC, nil
	}
	return None, fmt.Errorf("correct: unknown correction %q (want %s)", s, Methods)
}

func (m Method) String() string {
	switch m {
	case IS:
		return "is"
	case SMC:
		return "smc"
	}
	return "none"
}

// Settings configure a correction. Zero fields take the defaults of
// DefaultSettings.
type Settings struct {
	Method Method
	// Samples is the number of importance samples per model (IS);
	// FinalSamples the number of the final importance-sampling stage of
	// SMC.
	Samples, FinalSamples int
	// Particles is the number of particles of one SMC run, Replicates the
	// number of independent runs per model (≥ 2: their spread gives the
	// log-evidence standard error), Draws the number of draws of q the
	// SMC reference is built from.
	Particles, Replicates, Draws int
	// Moves is the number of MALA moves per tempering step, CESS the
	// conditional ESS (fraction of the particles) each tempering step
	// keeps, MaxSteps the tempering-step budget of one run.
	Moves    int
	CESS     float64
	MaxSteps int
	// MinESS (normalised, in (0, 1]) and MaxLogEvidenceSE (nats) are the
	// limits below/above which a model's correction is flagged Failed.
	MinESS, MaxLogEvidenceSE float64
	// Sample configures the network's θ sampler; its Seed and Offset also
	// select the correction's random streams.
	Sample posterior.SampleOptions
	// Laplace, when set, makes SMC start from the Laplace approximation at
	// the posterior mode instead of the kernel reference fitted to q's
	// draws (laplace.go): one run of Particles particles per canonical
	// model, Draws draws of q only to start the mode search, the evidence
	// SE from the run's own particles; Replicates and FinalSamples are
	// unused. For sharp posteriors with known symmetries (dMRI sticks).
	Laplace *LaplaceOptions
	// jumps is the number of independence moves from the reference per
	// tempering step, before the MALA moves (the Laplace start only).
	jumps int
	// multinomial selects multinomial resampling (else systematic).
	multinomial bool
}

// DefaultSettings returns the defaults: IS with 512 samples; SMC with
// 4 replicates of 128 particles, a reference from 64 draws of q, CESS
// 0.5, 4 MALA moves per step, at most 100 steps and a final stage of
// 2048 importance samples; failure below a
// normalised ESS of 0.05 or above a log-evidence standard error of 0.1.
func DefaultSettings(m Method) Settings {
	return Settings{Method: m, Samples: 512, FinalSamples: 2048, Particles: 128, Replicates: 4, Draws: 64,
		Moves: 4, CESS: 0.5, MaxSteps: 100, MinESS: 0.05, MaxLogEvidenceSE: 0.1}
}

// Resolved returns the settings with every zero field replaced by its
// default (DefaultSettings), or an error if they are invalid: what a
// correction with s actually uses.
func (s Settings) Resolved() (Settings, error) { return s.withDefaults() }

func (s Settings) withDefaults() (Settings, error) {
	d := DefaultSettings(s.Method)
	if s.Samples == 0 {
		s.Samples = d.Samples
	}
	if s.FinalSamples == 0 {
		s.FinalSamples = d.FinalSamples
	}
	if s.Particles == 0 {
		s.Particles = d.Particles
	}
	if s.Replicates == 0 {
		s.Replicates = d.Replicates
	}
	if s.Draws == 0 {
		s.Draws = d.Draws
	}
	if s.Moves == 0 {
		s.Moves = d.Moves
	}
	if s.CESS == 0 {
		s.CESS = d.CESS
	}
	if s.MaxSteps == 0 {
		s.MaxSteps = d.MaxSteps
	}
	if s.MinESS == 0 {
		s.MinESS = d.MinESS
	}
	if s.MaxLogEvidenceSE == 0 {
		s.MaxLogEvidenceSE = d.MaxLogEvidenceSE
	}
	switch {
	case s.Method != IS && s.Method != SMC:
		return s, fmt.Errorf("correct: method %v has nothing to compute", s.Method)
	case s.Samples < 2, s.FinalSamples < 2, s.Particles < 2, s.Draws < 2:
		return s, fmt.Errorf("correct: need ≥ 2 samples, final samples, particles and draws (got %d, %d, %d, %d)", s.Samples, s.FinalSamples, s.Particles, s.Draws)
	case s.Replicates < 2:
		return s, fmt.Errorf("correct: %d SMC replicates, need ≥ 2 for a standard error", s.Replicates)
	case s.Moves < 0, s.MaxSteps < 1:
		return s, fmt.Errorf("correct: %d moves and %d tempering steps", s.Moves, s.MaxSteps)
	case !(s.CESS > 0 && s.CESS < 1):
		return s, fmt.Errorf("correct: CESS %v, want 0 < CESS < 1", s.CESS)
	case !(s.MinESS > 0 && s.MinESS <= 1), !(s.MaxLogEvidenceSE > 0):
		return s, fmt.Errorf("correct: failure limits ESS %v, SE %v", s.MinESS, s.MaxLogEvidenceSE)
	}
	return s, nil
}

// Result is the correction of one observation under one model.
type Result struct {
	// Mask is the model; with Settings.Laplace and exchangeable
	// components, the candidate's canonical representative (Theta is
	// labelled accordingly).
	Mask []bool
	// LogEvidence is the estimate of log p(x | M), LogEvidenceSE its
	// delta-method standard error over the importance weights (IS, or
	// SMC's final stage; SMC falls back to its replicates' estimate when
	// the final stage's ESS is below MinESS).
	LogEvidence, LogEvidenceSE float64
	// SMCLogEvidence and SMCLogEvidenceSE are the SMC replicates' own
	// estimate (mean of their unbiased estimates of Z) and its delta-method
	// standard error over the replicates (SMC only).
	SMCLogEvidence, SMCLogEvidenceSE float64
	// ESS is the normalised effective sample size of Theta's weights: the
	// importance weights of IS or of SMC's final stage, or, when that
	// stage's ESS is below MinESS, of the pooled SMC particles (weighted
	// by their replicate's Ẑ, so it also falls when the replicates
	// disagree).
	ESS float64
	// Steps is the mean number of tempering steps of the SMC replicates,
	// Accept their mean MALA acceptance rate (0 for IS).
	Steps, Accept float64
	// Theta are weighted posterior samples (latent, length DMax), LogW
	// their normalised log weights.
	Theta [][]float64
	LogW  []float64
	// Failed is set, with the reason, when a diagnostic is outside the
	// Settings' limits: the estimate should not be trusted.
	Failed bool
	Reason string
}

// Draw returns n samples from the weighted set Theta by systematic
// resampling (references into Theta).
func (r *Result) Draw(rng *rand.Rand, n int) [][]float64 {
	out := make([][]float64, n)
	u := rng.Float64() / float64(n)
	c := math.Exp(r.LogW[0])
	k := 0
	for i := range n {
		for u > c && k < len(r.LogW)-1 {
			k++
			c += math.Exp(r.LogW[k])
		}
		out[i] = r.Theta[k]
		u += 1 / float64(n)
	}
	// Systematic draws come out sorted by particle; shuffle them so that a
	// prefix of the draws is a fair subsample.
	rng.Shuffle(n, func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// Evidence corrects the posterior of every observation under every model
// of its candidate list (masks[i], or masks[0] for all observations).
// It returns results[i][m] for candidate m of observation i.
func Evidence(p *posterior.Posterior, obs []posterior.Observation, masks [][][]bool, s Settings) ([][]Result, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	lists := posterior.MaskLists(masks)
	if err := lists.Check(len(obs)); err != nil {
		return nil, fmt.Errorf("correct: candidates: %w", err)
	}
	cands := lists.For
	c := len(p.Family().Components())
	for i := range obs {
		for _, m := range cands(i) {
			if len(m) != c {
				return nil, fmt.Errorf("correct: mask has %d entries, the %s family has %d components", len(m), p.Family().Name(), c)
			}
		}
	}
	out := make([][]Result, len(obs))
	for i := range obs {
		out[i] = make([]Result, len(cands(i)))
	}
	if s.Method == SMC && s.Laplace != nil {
		if err := runAllLaplace(p, obs, cands, s, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	per := s.Draws
	if s.Method == IS {
		per = s.Samples
	}
	rows := make([][][]bool, len(obs))
	for i := range obs {
		for _, m := range cands(i) {
			rows[i] = append(rows[i], posterior.Repeat(m, per)...)
		}
	}
	var ts []posterior.ThetaSet
	if s.Method == IS {
		ts, err = p.SampleAndLogProb(obs, rows, s.Sample)
	} else {
		ts, err = p.SampleTheta(obs, rows, s.Sample)
	}
	if err != nil {
		return nil, fmt.Errorf("correct: sampling q(θ | M, x): %w", err)
	}
	if s.Method == IS {
		err = parallel(len(obs), func(i int) error {
			for m, mask := range cands(i) {
				out[i][m] = importance(p, obs[i], mask, ts[i].Theta[m*per:(m+1)*per], ts[i].LogQ[m*per:(m+1)*per], s)
			}
			return nil
		})
		return out, err
	}
	return out, runAllSMC(p, obs, cands, ts, s, out)
}

// importance computes the IS correction of one observation and model.
func importance(p *posterior.Posterior, o posterior.Observation, mask []bool, theta [][]float64, logq []float64, s Settings) Result {
	act := p.Active(mask)
	t := newTarget(p.Family(), o.Design, o.X, mask, act)
	r := Result{Mask: mask, Theta: theta, LogW: make([]float64, len(theta))}
	z := make([]float64, len(t.idx))
	for j, th := range theta {
		for a, k := range t.idx {
			z[a] = th[k]
		}
		r.LogW[j] = t.logProb(z, nil) - logq[j]
	}
	r.ESS = posterior.ESS(r.LogW)
	r.LogEvidence, r.LogEvidenceSE = posterior.LogMeanExp(r.LogW)
	if !math.IsInf(r.LogEvidence, -1) {
		normaliseLog(r.LogW)
	}
	r.judge(s)
	return r
}

// judge sets Failed and Reason from the diagnostics.
func (r *Result) judge(s Settings) {
	switch {
	case math.IsInf(r.LogEvidence, -1) || math.IsNaN(r.LogEvidence):
		r.Failed, r.Reason = true, "no sample with a finite likelihood"
	case r.Reason != "":
		r.Failed = true
	case r.ESS < s.MinESS:
		r.Failed, r.Reason = true, fmt.Sprintf("ESS %.3g below %.3g", r.ESS, s.MinESS)
	case !(r.LogEvidenceSE <= s.MaxLogEvidenceSE):
		r.Failed, r.Reason = true, fmt.Sprintf("log-evidence SE %.3g above %.3g", r.LogEvidenceSE, s.MaxLogEvidenceSE)
	}
}

// streamTag separates the correction's random streams from the network
// sampler's.
const streamTag uint64 = 0x636f7272 // "corr"

// jobSeed derives the stream of (observation, model, replicate) from the
// mask itself, so that a model gets the same numbers in any candidate list.
func jobSeed(seed, obs uint64, mask []bool, rep int) (uint64, uint64) {
	h := uint64(0xcbf29ce484222325)
	for _, b := range mask {
		v := uint64(1)
		if b {
			v = 2
		}
		h = (h ^ v) * 0x100000001b3
	}
	a := mix(mix(mix(seed^streamTag)^obs) ^ h)
	return mix(a ^ uint64(rep)), mix(a + uint64(rep) + 1)
}

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// runAllSMC runs every (observation, model, replicate) in parallel and
// combines the replicates.
func runAllSMC(p *posterior.Posterior, obs []posterior.Observation, cands func(int) [][]bool, ts []posterior.ThetaSet, s Settings, out [][]Result) error {
	type job struct{ i, m int }
	var jobs []job
	for i := range obs {
		for m := range cands(i) {
			jobs = append(jobs, job{i, m})
		}
	}
	return parallel(len(jobs), func(k int) error {
		i, m := jobs[k].i, jobs[k].m
		mask := cands(i)[m]
		act := p.Active(mask)
		t := newTarget(p.Family(), obs[i].Design, obs[i].X, mask, act)
		d := len(t.idx)
		res := Result{Mask: mask}
		if d == 0 { // nothing to integrate: p(x | M) is the likelihood itself
			res.LogEvidence = t.logProb(nil, nil)
			res.ESS, res.Theta, res.LogW = 1, [][]float64{t.theta(nil)}, []float64{0}
			res.judge(s)
			out[i][m] = res
			return nil
		}
		draws := make([][]float64, s.Draws)
		for j := range draws {
			th := ts[i].Theta[m*s.Draws+j]
			draws[j] = make([]float64, d)
			for a, q := range t.idx {
				draws[j][a] = th[q]
			}
		}
		ref := newReference(draws, d)
		runs := make([]smcRun, s.Replicates)
		logZ := make([]float64, s.Replicates)
		for r := range runs {
			s1, s2 := jobSeed(s.Sample.Seed, s.Sample.Offset+uint64(i), mask, r)
			runs[r] = runSMC(t, ref, s, rand.New(rand.NewPCG(s1, s2)))
			logZ[r] = runs[r].logZ
			res.Steps += float64(runs[r].steps) / float64(s.Replicates)
			res.Accept += runs[r].accept / float64(s.Replicates)
			if !runs[r].ok && res.Reason == "" {
				res.Reason = fmt.Sprintf("tempering did not reach β = 1 in %d steps", s.MaxSteps)
			}
		}
		// Z = mean of the replicates' unbiased estimates; the pooled
		// particles are weighted by Ẑ_r × their weight within run r.
		smcZ, smcSE := posterior.LogMeanExp(logZ)
		res.LogEvidence, res.LogEvidenceSE = smcZ, smcSE
		if math.IsInf(smcZ, -1) || math.IsNaN(smcZ) {
			res.judge(s)
			out[i][m] = res
			return nil
		}
		var z [][]float64
		var lw []float64
		for r, run := range runs {
			z = append(z, run.z...)
			for j := range run.z {
				lw = append(lw, run.logW[j]+logZ[r])
			}
		}
		normaliseLog(lw)
		// Final importance-sampling stage with a proposal fitted to the
		// particles: an unbiased estimate of Z given the particles, far
		// more precise than the replicates' when the fit is good (it is
		// used when its ESS passes MinESS). Its weighted samples are the
		// result.
		s1, s2 := jobSeed(s.Sample.Seed, s.Sample.Offset+uint64(i), mask, s.Replicates)
		rng := rand.New(rand.NewPCG(s1, s2))
		g := newProposal(z, lw, d, min(len(z), s.Draws), rng)
		gs := g.kde.scratch()
		xi := make([]float64, d)
		res.Theta = make([][]float64, s.FinalSamples)
		res.LogW = make([]float64, s.FinalSamples)
		for j := range res.Theta {
			zj := make([]float64, d)
			g.sample(rng, zj, xi)
			res.Theta[j] = t.theta(zj)
			res.LogW[j] = t.logProb(zj, nil) - g.logProb(zj, gs)
		}
		res.ESS = posterior.ESS(res.LogW)
		isZ, isSE := posterior.LogMeanExp(res.LogW)
		res.SMCLogEvidence, res.SMCLogEvidenceSE = smcZ, smcSE
		if res.ESS >= s.MinESS && !math.IsInf(isZ, -1) {
			normaliseLog(res.LogW)
			res.LogEvidence, res.LogEvidenceSE = isZ, isSE
		} else {
			// The fit is too poor (e.g. a sharp posterior in many
			// dimensions, or many modes): keep the SMC particles and the
			// replicates' estimate.
			res.Theta = make([][]float64, len(z))
			for j := range z {
				res.Theta[j] = t.theta(z[j])
			}
			res.LogW, res.ESS = lw, essLog(lw)
		}
		res.judge(s)
		out[i][m] = res
		return nil
	})
}

// parallel runs job(0 … n−1) on GOMAXPROCS goroutines and returns the
// first error.
func parallel(n int, job func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if err := job(k); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ModelPosterior is the corrected model posterior of one observation
// over its candidate models: p(M | x, λ) ∝ p(M | λ) p̂(x | M), exact
// within the candidates up to the evidence estimates' error.
type ModelPosterior struct {
	Masks    [][]bool
	LogPrior []float64
	// LogPost is log p(M | x, λ) renormalised over the candidates, Prob
	// its exponential.
	LogPost, Prob []float64
	// Failed is set when a candidate holding ≥ 1 % of the corrected mass
	// failed its diagnostics; Reason names it.
	Failed bool
	Reason string
}

// Models combines the per-model results of one observation with the mask
// prior at λ.
func Models(f family.Family, res []Result, lambda float64) ModelPosterior {
	prior := f.MaskPrior()
	mp := ModelPosterior{Masks: make([][]bool, len(res)), LogPrior: make([]float64, len(res)),
		LogPost: make([]float64, len(res)), Prob: make([]float64, len(res))}
	for m, r := range res {
		mp.Masks[m] = r.Mask
		mp.LogPrior[m] = prior.LogProb(r.Mask, lambda)
		mp.LogPost[m] = mp.LogPrior[m] + r.LogEvidence
		if math.IsNaN(mp.LogPost[m]) {
			mp.LogPost[m] = math.Inf(-1)
		}
	}
	mx := math.Inf(-1)
	for _, v := range mp.LogPost {
		mx = math.Max(mx, v)
	}
	if math.IsInf(mx, -1) {
		mp.Failed, mp.Reason = true, "no candidate has a finite corrected posterior"
		for m := range mp.Prob {
			mp.Prob[m] = 1 / float64(len(res))
			mp.LogPost[m] = -math.Log(float64(len(res)))
		}
		return mp
	}
	sum := 0.0
	for _, v := range mp.LogPost {
		sum += math.Exp(v - mx)
	}
	for m := range mp.LogPost {
		mp.LogPost[m] -= mx + math.Log(sum)
		mp.Prob[m] = math.Exp(mp.LogPost[m])
		if res[m].Failed && mp.Prob[m] >= 0.01 && !mp.Failed {
			mp.Failed = true
			mp.Reason = fmt.Sprintf("model %s (p = %.2f): %s", family.MaskLabel(f, res[m].Mask), mp.Prob[m], res[m].Reason)
		}
	}
	return mp
}

// DrawJoint draws n joint samples from a corrected posterior: M from mp,
// then θ from that model's weighted samples.
func DrawJoint(rng *rand.Rand, mp ModelPosterior, res []Result, n int) (masks [][]bool, theta [][]float64) {
	counts := make([]int, len(res))
	for range n {
		u, c, k := rng.Float64(), 0.0, len(res)-1
		for m, q := range mp.Prob {
			c += q
			if u < c {
				k = m
				break
			}
		}
		counts[k]++
	}
	for m, c := range counts {
		if c == 0 {
			continue
		}
		for _, th := range res[m].Draw(rng, c) {
			masks = append(masks, res[m].Mask)
			theta = append(theta, th)
		}
	}
	rng.Shuffle(len(masks), func(a, b int) {
		masks[a], masks[b] = masks[b], masks[a]
		theta[a], theta[b] = theta[b], theta[a]
	})
	return masks, theta
}

// Corrected is the corrected posterior of one observation over its
// candidate models: the model posterior from the corrected evidence and
// each model's weighted parameter samples.
type Corrected struct {
	ModelPosterior
	Results []Result
	s1, s2  uint64 // stream of Draw
}

// Correct corrects every observation over its candidate models (masks[i],
// or masks[0] for all) and forms the model posterior at λ.
func Correct(p *posterior.Posterior, obs []posterior.Observation, masks [][][]bool, lambda float64, s Settings) ([]Corrected, error) {
	res, err := Evidence(p, obs, masks, s)
	if err != nil {
		return nil, err
	}
	out := make([]Corrected, len(obs))
	for i := range obs {
		s1, s2 := jobSeed(s.Sample.Seed^0x64726177, s.Sample.Offset+uint64(i), nil, 0) // "draw"
		out[i] = Corrected{ModelPosterior: Models(p.Family(), res[i], lambda), Results: res[i], s1: s1, s2: s2}
	}
	return out, nil
}

// Draw returns n joint samples (M, θ) from the corrected posterior; the
// same call on the same result gives the same draws.
func (c *Corrected) Draw(n int) (masks [][]bool, theta [][]float64) {
	return DrawJoint(rand.New(rand.NewPCG(c.s1, c.s2)), c.ModelPosterior, c.Results, n)
}

// DrawWithin returns n joint samples from the corrected posterior
// conditioned on the candidates m with keep[m] (their probabilities
// renormalised), from the same stream as Draw. If the kept candidates
// have no mass it draws from the whole posterior.
func (c *Corrected) DrawWithin(keep []bool, n int) (masks [][]bool, theta [][]float64) {
	mp := c.ModelPosterior
	mp.Prob = make([]float64, len(c.Prob))
	sum := 0.0
	for m, q := range c.Prob {
		if keep[m] {
			mp.Prob[m] = q
			sum += q
		}
	}
	if !(sum > 0) {
		return c.Draw(n)
	}
	for m := range mp.Prob {
		mp.Prob[m] /= sum
	}
	return DrawJoint(rand.New(rand.NewPCG(c.s1, c.s2)), mp, c.Results, n)
}

// Best returns the index of the most probable candidate.
func (c *Corrected) Best() int {
	best := 0
	for m, q := range c.Prob {
		if q > c.Prob[best] {
			best = m
		}
	}
	return best
}

// Prune keeps, for every observation, the candidates (cands[i], or
// cands[0] for all) that hold at least minQ of the network's q(M | x, λ)
// renormalised over the candidates, at most maxModels of them (0: no
// limit) in decreasing q, and always the most probable one. Correcting
// costs one SMC per model, so a large subspace (hundreds of models) is
// pruned to the few that can matter; the corrected posterior is then
// exact within the kept models, and a model q puts below minQ is
// treated as having no mass.
func Prune(p *posterior.Posterior, obs []posterior.Observation, lambda float64, cands [][][]bool, minQ float64, maxModels int, opt posterior.Options) ([][][]bool, error) {
	lq, err := p.LogProbMasks(obs, lambda, cands, opt)
	if err != nil {
		return nil, fmt.Errorf("correct: pruning candidates: %w", err)
	}
	out := make([][][]bool, len(obs))
	for i := range obs {
		c := cands[0]
		if len(cands) > 1 {
			c = cands[i]
		}
		l := lq[i]
		mx := math.Inf(-1)
		for _, v := range l {
			mx = math.Max(mx, v)
		}
		sum := 0.0
		for _, v := range l {
			sum += math.Exp(v - mx)
		}
		idx := make([]int, len(c))
		for m := range idx {
			idx[m] = m
		}
		sort.SliceStable(idx, func(a, b int) bool { return l[idx[a]] > l[idx[b]] })
		keep := idx[:0:0]
		for k, m := range idx {
			if k > 0 && (math.Exp(l[m]-mx)/sum < minQ || (maxModels > 0 && k >= maxModels)) {
				break
			}
			keep = append(keep, m)
		}
		sort.Ints(keep) // candidate order, so that a kept model sees the same random numbers
		for _, m := range keep {
			out[i] = append(out[i], c[m])
		}
	}
	return out, nil
}
