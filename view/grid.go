package view

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// GridSettings configure the grid-family explorer.
type GridSettings struct {
	// Top is the number of models listed per λ.
	Top int `json:"top"`
	// PredictSamples is the number of posterior draws behind the
	// predictive band; Steps the ODE steps of each parameter draw.
	PredictSamples int `json:"predict_samples"`
	Steps          int `json:"steps"`
	// InclusionDraws is the number of masks drawn from q(M | x, λ)
	// (restricted to the prior's support) behind the component inclusion
	// probabilities.
	InclusionDraws int `json:"inclusion_draws"`
	// MarginalSamples is the number of parameter draws behind the
	// marginals of one model, MarginalSteps their ODE steps; Bins the
	// histogram bins.
	MarginalSamples int `json:"marginal_samples"`
	MarginalSteps   int `json:"marginal_steps"`
	Bins            int `json:"bins"`
	// DiscoverLambdas, DiscoverMasks and DiscoverTop: when no candidate
	// list is given, the candidates are the DiscoverTop most probable
	// distinct supported masks among DiscoverMasks draws from
	// q(M | x, λ), at each of these λ.
	DiscoverLambdas []float64 `json:"discover_lambdas"`
	DiscoverMasks   int       `json:"discover_masks"`
	DiscoverTop     int       `json:"discover_top"`
	// Seed selects every random stream (the same seed as `prism select
	// --seed` gives the same candidates and numbers).
	Seed uint64 `json:"seed"`
}

// DefaultGridSettings returns the settings of `prism view`: 8 models per
// λ, inclusion probabilities from 256 mask draws (one decoding pass;
// standard error ≤ 0.032),
// a band of 120 draws × 6 ODE steps, marginals from 1000 draws × 16
// steps in 30 bins, candidates: the 12 most probable of 512 draws at
// λ = 0, 0.1, …, 1 (at most 132 models). One slider update then stays
// under 200 ms for symbolic-k15 on two cores (docs/benchmarks.md): its
// cost is the band (draws × steps) and the ranking (the candidates).
func DefaultGridSettings() GridSettings {
	ls := make([]float64, 11)
	for i := range ls {
		ls[i] = float64(i) / 10
	}
	return GridSettings{Top: 8, PredictSamples: 120, Steps: 6, InclusionDraws: 256, MarginalSamples: 1000, MarginalSteps: 16, Bins: 30,
		DiscoverLambdas: ls, DiscoverMasks: 512, DiscoverTop: 12, Seed: 1}
}

func (s GridSettings) validate() error {
	if s.Top < 1 || s.InclusionDraws < 1 || s.PredictSamples < 2 || s.Steps < 1 || s.MarginalSamples < 2 || s.MarginalSteps < 1 || s.Bins < 1 || s.DiscoverMasks < 1 || s.DiscoverTop < 1 {
		return fmt.Errorf("view: grid settings %+v: every count must be positive (at least 2 draws)", s)
	}
	for _, l := range s.DiscoverLambdas {
		if !(l >= 0 && l <= 1) {
			return fmt.Errorf("view: discovery λ = %v outside [0, 1]", l)
		}
	}
	return nil
}

// Grid is the explorer of one observation of a grid family: the model
// posterior, predictive band and parameter marginals at any λ. Its
// methods are safe for concurrent use (they take turns: the posterior
// uses both cores by itself).
type Grid struct {
	mu    *sync.Mutex // serialises the use of post, shared by WithObservation's grids
	post  *posterior.Posterior
	fam   family.Family
	obs   posterior.Observation
	truth []bool
	set   GridSettings
	cands [][]bool
	name  string
}

// NewGrid prepares the explorer of observation obs (truth, if not nil, is
// its true mask, shown alongside). candidates are the models ranked at
// every λ; nil discovers them (GridSettings.DiscoverLambdas). name labels
// the data in the page.
func NewGrid(p *posterior.Posterior, obs posterior.Observation, truth []bool, candidates [][]bool, name string, set GridSettings) (*Grid, error) {
	if err := set.validate(); err != nil {
		return nil, err
	}
	return newGrid(&sync.Mutex{}, p, obs, truth, candidates, name, set)
}

// WithObservation returns an explorer of another observation with the
// same network and settings (candidates nil: discovered for it); the two
// explorers take turns on the network.
func (g *Grid) WithObservation(obs posterior.Observation, truth []bool, candidates [][]bool, name string) (*Grid, error) {
	return newGrid(g.mu, g.post, obs, truth, candidates, name, g.set)
}

func newGrid(mu *sync.Mutex, p *posterior.Posterior, obs posterior.Observation, truth []bool, candidates [][]bool, name string, set GridSettings) (*Grid, error) {
	f := p.Family()
	if obs.Design.CovDim > 1 {
		return nil, fmt.Errorf("view: %s: the grid explorer needs a family on a 1-D grid; %s has %d covariates per measurement (use the dMRI view)", name, f.Name(), obs.Design.CovDim)
	}
	if truth != nil && len(truth) != len(f.Components()) {
		return nil, fmt.Errorf("view: %s: true mask of %d entries for the %d components of %s", name, len(truth), len(f.Components()), f.Name())
	}
	g := &Grid{mu: mu, post: p, fam: f, obs: obs, truth: truth, set: set, name: name}
	if candidates == nil {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if candidates, err = g.discover(); err != nil {
			return nil, err
		}
	}
	for i, m := range candidates {
		// Candidates outside the prior's support are refused, as by
		// prism select (their posterior probability is zero).
		if err := family.CheckMask(f, m); err != nil {
			return nil, fmt.Errorf("view: %s: candidate %d: %w", name, i+1, err)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("view: %s: no candidate model", name)
	}
	g.cands = candidates
	return g, nil
}

// discover collects the most probable distinct masks with positive
// prior probability among draws from q(M | x, λ) at the discovery λ
// values, in order of first appearance (Discover ranks each λ's draws
// by q). Unsupported masks (zero prior, e.g. two noise models) are
// dropped before counting.
func (g *Grid) discover() ([][]bool, error) {
	seen := map[string]bool{}
	var out [][]bool
	prior := g.fam.MaskPrior()
	for _, l := range g.set.DiscoverLambdas {
		rs, err := g.post.Discover([]posterior.Observation{g.obs}, l, g.set.DiscoverMasks, 0, posterior.Options{Seed: g.set.Seed})
		if err != nil {
			return nil, fmt.Errorf("view: discovering candidates at λ = %v: %w", l, err)
		}
		taken := 0
		for _, r := range rs[0] {
			if taken == g.set.DiscoverTop {
				break
			}
			if math.IsInf(prior.LogProb(r.Mask, l), -1) {
				continue
			}
			taken++
			if key := family.MaskString(r.Mask); !seen[key] {
				seen[key] = true
				out = append(out, r.Mask)
			}
		}
	}
	return out, nil
}

// Candidates returns the ranked models (0/1 mask strings), the list that
// `prism select --candidates FILE` ranks to the same numbers.
func (g *Grid) Candidates() []string {
	out := make([]string, len(g.cands))
	for i, m := range g.cands {
		out[i] = family.MaskString(m)
	}
	return out
}

// RankedModel is one model of the posterior at one λ.
type RankedModel struct {
	Mask  string  `json:"mask"`
	Label string  `json:"label"`
	LogQ  float64 `json:"log_q"`
	// Q is q(M | x, λ) = exp(LogQ), the network's probability of the
	// model (not renormalised over the candidates).
	Q float64 `json:"q"`
	// LogPrior is log p(M | λ), the family's mask prior (the λ-dependent
	// part of the posterior); −1e300 for a model outside its support (a
	// --candidates entry), as `prism select` writes it.
	LogPrior float64 `json:"log_prior"`
	IsTrue   bool    `json:"is_true,omitempty"`
}

// Inclusion is the posterior probability that one component is present.
type Inclusion struct {
	Name string  `json:"name"`
	Prob float64 `json:"p"`
}

// Band is the posterior predictive over the grid.
type Band struct {
	Kind string    `json:"kind"` // "global" or "local"
	Mask string    `json:"mask,omitempty"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
	Mean []float64 `json:"mean"`
	Lo   []float64 `json:"lo"`
	Hi   []float64 `json:"hi"`
}

// Update is the state of the page at one λ.
type Update struct {
	Lambda float64       `json:"lambda"`
	Top    []RankedModel `json:"top"`
	// Mass is Σ q(M | x, λ) over the candidates: the share of the
	// posterior that the candidate ranking covers.
	Mass float64 `json:"mass"`
	// Inclusion is P(component k ∈ M | x, λ): the fraction of
	// InclusionDraws masks drawn from q(M | x, λ) (restricted to the
	// prior's support) that contain component k.
	Inclusion []Inclusion `json:"inclusion"`
	Draws     int         `json:"inclusion_draws"`
	Band      Band        `json:"band"`
	Seconds   float64     `json:"seconds"`
}

// Update computes the model posterior at λ (exact q over the candidates,
// as `prism select --candidates`), the component inclusion
// probabilities, and the predictive band: model-averaged (local nil, as
// `prism predict --lambda`) or under the fixed model local (`prism
// predict --local`).
func (g *Grid) Update(lambda float64, local []bool) (*Update, error) {
	if !(lambda >= 0 && lambda <= 1) {
		return nil, fmt.Errorf("view: λ = %v outside [0, 1]", lambda)
	}
	if local != nil && len(local) != len(g.fam.Components()) {
		return nil, fmt.Errorf("view: local model of %d entries for the %d components of %s", len(local), len(g.fam.Components()), g.fam.Name())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	obs := []posterior.Observation{g.obs}
	opt := posterior.Options{Seed: g.set.Seed}
	ranked, err := g.post.TopK(obs, lambda, g.cands, 0, opt)
	if err != nil {
		return nil, fmt.Errorf("view: model posterior: %w", err)
	}
	u := &Update{Lambda: lambda, Draws: g.set.InclusionDraws}
	truthKey := ""
	if g.truth != nil {
		truthKey = family.MaskString(g.truth)
	}
	for i, r := range ranked[0] {
		q := math.Exp(r.LogQ)
		u.Mass += q
		if i < g.set.Top {
			key := family.MaskString(r.Mask)
			u.Top = append(u.Top, RankedModel{Mask: key, Label: family.MaskLabel(g.fam, r.Mask), LogQ: r.LogQ, Q: q, LogPrior: max(r.LogPrior, -1e300), IsTrue: key == truthKey})
		}
	}
	draws, err := g.post.SampleMasksSupported(obs, lambda, g.set.InclusionDraws, opt)
	if err != nil {
		return nil, fmt.Errorf("view: inclusion probabilities: %w", err)
	}
	u.Inclusion = inclusion(g.fam.Components(), draws[0])
	po := posterior.PredictOptions{SampleOptions: posterior.SampleOptions{Options: opt, Steps: g.set.Steps},
		Lambda: lambda, Mask: local, Samples: g.set.PredictSamples}
	bands, err := g.post.Predict(obs, po)
	if err != nil {
		return nil, fmt.Errorf("view: predictive: %w", err)
	}
	b := bands[0]
	u.Band = Band{Kind: "global", X: gridOf(g.obs.Design), Y: g.obs.X, Mean: b.Mean, Lo: b.Lo, Hi: b.Hi}
	if local != nil {
		u.Band.Kind, u.Band.Mask = "local", family.MaskString(local)
	}
	return u, nil
}

// inclusion returns the fraction of masks that contain each component.
func inclusion(comps []family.Component, masks [][]bool) []Inclusion {
	out := make([]Inclusion, len(comps))
	for k, c := range comps {
		n := 0
		for _, m := range masks {
			if m[k] {
				n++
			}
		}
		out[k] = Inclusion{Name: c.Name, Prob: float64(n) / float64(len(masks))}
	}
	return out
}

// Marginal is the posterior histogram of one natural-unit parameter.
type Marginal struct {
	Name   string    `json:"name"`
	Edges  []float64 `json:"edges"`
	Counts []int     `json:"counts"`
	Mean   float64   `json:"mean"`
}

// Marginals draws θ ~ q(θ | M, x) under the model mask and returns the
// histogram of every natural parameter (component parameters named
// "Component.param", shared ones by name, fractions "fraction k").
func (g *Grid) Marginals(mask []bool) ([]Marginal, error) {
	if len(mask) != len(g.fam.Components()) {
		return nil, fmt.Errorf("view: model of %d entries for the %d components of %s", len(mask), len(g.fam.Components()), g.fam.Name())
	}
	if !g.supported(mask) {
		return nil, fmt.Errorf("view: model %s has zero prior probability in %s", family.MaskString(mask), g.fam.Name())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.set.MarginalSamples
	so := posterior.SampleOptions{Options: posterior.Options{Seed: g.set.Seed}, Steps: g.set.MarginalSteps}
	ts, err := g.post.SampleTheta([]posterior.Observation{g.obs}, [][][]bool{posterior.Repeat(mask, n)}, so)
	if err != nil {
		return nil, fmt.Errorf("view: parameter posterior: %w", err)
	}
	values := map[string][]float64{}
	var names []string
	add := func(name string, v float64) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = append(values[name], v)
	}
	comps := g.fam.Components()
	for _, th := range ts[0].Theta {
		flattenParams(g.fam.Natural(th, mask), comps, add)
	}
	out := make([]Marginal, 0, len(names))
	for _, name := range names {
		out = append(out, histogram(name, values[name], g.set.Bins))
	}
	return out, nil
}

// supported reports whether mask has positive prior probability at some
// λ (the prior's support does not depend on λ inside (0, 1)).
func (g *Grid) supported(mask []bool) bool {
	return !math.IsInf(g.fam.MaskPrior().LogProb(mask, 0.5), -1)
}

// flattenParams calls add for every natural parameter in a stable order.
func flattenParams(p family.Params, comps []family.Component, add func(string, float64)) {
	for k, c := range comps {
		par, ok := p.Components[k]
		if !ok {
			continue
		}
		keys := make([]string, 0, len(par))
		for name := range par {
			keys = append(keys, name)
		}
		slices.Sort(keys)
		for _, name := range keys {
			add(c.Name+"."+name, par[name])
		}
	}
	keys := make([]string, 0, len(p.Shared))
	for name := range p.Shared {
		keys = append(keys, name)
	}
	slices.Sort(keys)
	for _, name := range keys {
		add(name, p.Shared[name])
	}
	for k, v := range p.Fractions {
		add(fmt.Sprintf("fraction %d", k+1), v)
	}
}

// histogram bins v into bins equal bins over [min, max].
func histogram(name string, v []float64, bins int) Marginal {
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum float64
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
		sum += x
	}
	if hi <= lo {
		hi = lo + 1e-12*math.Max(1, math.Abs(lo))
	}
	m := Marginal{Name: name, Edges: make([]float64, bins+1), Counts: make([]int, bins), Mean: sum / float64(len(v))}
	w := (hi - lo) / float64(bins)
	for i := range m.Edges {
		m.Edges[i] = lo + float64(i)*w
	}
	for _, x := range v {
		b := min(int((x-lo)/w), bins-1)
		m.Counts[b]++
	}
	return m
}

// gridOf returns the covariate of each measurement of a 1-D design, or
// the measurement index.
func gridOf(d family.Design) []float64 {
	x := make([]float64, d.N)
	for j := range x {
		x[j] = float64(j)
		if d.CovDim == 1 {
			x[j] = d.Cov[j]
		}
	}
	return x
}
