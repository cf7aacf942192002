// Package posterior is the inference side of prism: given a trained PRISM
// network it samples and scores models and parameters for observed data.
//
// A Posterior wraps a network (posterior.Load reads a checkpoint written by
// `prism train`, with its EMA weights) and offers, for many observations
// at once:
//
//   - the model posterior q(M | x, λ): SampleMasks (autoregressive, KV
//     cached), LogProbMasks (exact, one teacher-forced pass), TopK (exact
//     ranking within a candidate subspace, paper App. B.3 procedure (i)),
//     Discover (procedure (ii)) and the evidence proxy
//     log q(M | x, λ) − log p(M | λ);
//   - the parameter posterior q(θ | M, x): SampleTheta and SampleAndLogProb
//     integrate the EDM probability-flow ODE on the Karras schedule (AB2 or
//     Heun), LogProbTheta scores given parameters; log-densities use the
//     exact Jacobian trace on the active dimensions;
//   - joint samples (M, then θ | M), natural-unit parameters, local and
//     model-averaged posterior predictive bands, and importance weights
//     with the normalised ESS and the importance-sampling evidence of
//     paper App. B.1.
//
// Observations are grouped by design length and processed in large chunks
// so that the engine's kernels keep both cores busy. Every random number
// is drawn from streams indexed by the observation's global index
// (Options.Offset + i) and, for parameters, the sample's index, so results
// do not depend on chunking (see docs/posterior.md for what holds exactly).
//
// The ODE solvers only see the Denoiser interface, so analytic denoisers
// can replace the network (Flow, KarrasSigmas, BaseLogProb).
package posterior

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/all" // registers the families (and the spec loader) for Load
	"github.com/prismsbi/prism/internal/seeds"
	"github.com/prismsbi/prism/network"
)

// Observation is one observed data set (design and values).
type Observation = network.Observation

// Posterior answers posterior queries with one trained network. Its
// methods may be called from one goroutine at a time (they use both
// cores internally).
type Posterior struct {
	net    *network.Net
	fam    family.Family
	layout *family.Layout
	c      int
	dmax   int

	// denoiserHook, if set, replaces the network's denoiser in the
	// parameter sampler (tests inject exact analytic denoisers): rowObs
	// gives each row's observation index, masks and active its model.
	denoiserHook func(rowObs []int, masks [][]bool, active []bool) Denoiser

	// cal, if set, rescales the denoiser's step (DenoiserCalibration).
	cal *DenoiserCalibration
}

// New returns a Posterior for net. The network's parameters are frozen
// (RequiresGrad off): the posterior never trains, and frozen weights let
// the Jacobian-trace passes skip weight gradients.
func New(net *network.Net) *Posterior {
	net.Params().SetRequiresGrad(false)
	f := net.Family()
	return &Posterior{net: net, fam: f, layout: f.Layout(), c: len(f.Components()), dmax: f.Layout().DMax}
}

// Load reads a trained network: path is either a training run directory
// written by `prism train` (its EMA weights are used, the weights meant
// for inference) or a weights file such as a checkpoint's ema.safetensors
// (package checkpoint).
func Load(path string) (*Posterior, error) {
	net, h, err := checkpoint.Load(path)
	if err != nil {
		return nil, fmt.Errorf("posterior: %w", err)
	}
	p, err := FromHeader(net, h)
	if err != nil {
		return nil, fmt.Errorf("posterior: %s: %w", path, err)
	}
	return p, nil
}

// FromHeader returns the Posterior of net as its file's header h
// describes it: with the file's denoiser calibration, if it has one
// (`prism calibrate`, DenoiserCalibration).
func FromHeader(net *network.Net, h checkpoint.Header) (*Posterior, error) {
	p := New(net)
	if h.DenoiserCalibration != nil {
		var c DenoiserCalibration
		if err := json.Unmarshal(h.DenoiserCalibration, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", checkpoint.MetaDenoiserCalibration, err)
		}
		if err := p.SetDenoiserCalibration(&c); err != nil {
			return nil, fmt.Errorf("%s: %w", checkpoint.MetaDenoiserCalibration, err)
		}
	}
	return p, nil
}

// LoadCheckpoint reads the committed checkpoint in run directory dir with
// its EMA weights (ema true) or its raw training weights.
func LoadCheckpoint(dir string, ema bool) (*Posterior, error) {
	net, _, err := checkpoint.LoadRun(dir, ema)
	if err != nil {
		return nil, fmt.Errorf("posterior: %w", err)
	}
	return New(net), nil
}

// Net returns the underlying network.
func (p *Posterior) Net() *network.Net { return p.net }

// Family returns the network's model family.
func (p *Posterior) Family() family.Family { return p.fam }

// Options are the settings shared by the random and batched operations.
type Options struct {
	// Seed selects the random streams.
	Seed uint64
	// Offset is the global index of the first observation: observation i
	// draws from stream Offset+i. Give each piece of a split data set its
	// starting index to get the same numbers as one call over everything.
	Offset uint64
	// ChunkRows is the number of network rows (observations × samples)
	// evaluated together; 0 means a default that keeps both cores busy.
	ChunkRows int
}

// Default chunk sizes (rows of one network call): large enough that every
// matrix product is thousands of rows tall, small enough to bound memory.
// Trace passes keep the whole graph for the backward passes, so they use
// fewer rows.
const (
	defaultChunkRows      = 2048
	defaultTraceChunkRows = 512
	defaultMaskChunkRows  = 4096
)

func (o Options) chunkRows(def int) int {
	if o.ChunkRows > 0 {
		return o.ChunkRows
	}
	return def
}

// group is a set of observations (by index) that can share one encoder
// batch: the same number of measurements and covariates, and the same
// number of rows per observation.
type group struct {
	idx  []int
	rows int
}

// groupObservations partitions observation indices by (N, CovDim,
// rows(i)), keeping input order inside a group and ordering groups by
// their first member.
func groupObservations(obs []Observation, rows func(i int) int) []group {
	type key struct{ n, cov, r int }
	pos := map[key]int{}
	var gs []group
	for i, o := range obs {
		k := key{o.Design.N, o.Design.CovDim, rows(i)}
		j, ok := pos[k]
		if !ok {
			j = len(gs)
			pos[k] = j
			gs = append(gs, group{rows: k.r})
		}
		gs[j].idx = append(gs[j].idx, i)
	}
	sort.SliceStable(gs, func(a, b int) bool { return gs[a].idx[0] < gs[b].idx[0] })
	return gs
}

// chunks splits a group into pieces of at most maxRows rows: several whole
// observations per piece when their rows fit, otherwise one observation
// per piece with its rows split into near-equal parts [lo, hi).
type chunk struct {
	idx    []int // observations
	lo, hi int   // row range of each observation covered by this chunk
}

func (g group) chunks(maxRows int) []chunk {
	var out []chunk
	if g.rows <= maxRows {
		per := max(1, maxRows/max(g.rows, 1))
		for s := 0; s < len(g.idx); s += per {
			out = append(out, chunk{idx: g.idx[s:min(s+per, len(g.idx))], lo: 0, hi: g.rows})
		}
		return out
	}
	parts := (g.rows + maxRows - 1) / maxRows
	for _, i := range g.idx {
		for k := range parts {
			out = append(out, chunk{idx: []int{i}, lo: k * g.rows / parts, hi: (k + 1) * g.rows / parts})
		}
	}
	return out
}

func (c chunk) observations(obs []Observation) []Observation {
	o := make([]Observation, len(c.idx))
	for j, i := range c.idx {
		o[j] = obs[i]
	}
	return o
}

// checkObs validates the observations against the family.
func (p *Posterior) checkObs(obs []Observation) error {
	if len(obs) == 0 {
		return fmt.Errorf("posterior: no observations")
	}
	for i, o := range obs {
		if o.Design.N != len(o.X) || o.Design.N == 0 {
			return fmt.Errorf("posterior: observation %d has %d values for a design of %d measurements", i, len(o.X), o.Design.N)
		}
		for j, v := range o.X {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("posterior: observation %d value %d is %v", i, j, v)
			}
		}
	}
	return nil
}

func (p *Posterior) checkMask(m []bool) error {
	if len(m) != p.c {
		return fmt.Errorf("posterior: mask has %d entries, the %s family has %d components", len(m), p.fam.Name(), p.c)
	}
	return nil
}

// checkSupported refuses a user-given model outside the family's prior
// support (family.CheckMask): its evidence proxy would be +Inf and its
// parameters meaningless.
func (p *Posterior) checkSupported(m []bool) error {
	if err := family.CheckMask(p.fam, m); err != nil {
		return fmt.Errorf("posterior: %w", err)
	}
	return nil
}

// Active returns the active latent dimensions of θ under mask.
func (p *Posterior) Active(mask []bool) []bool {
	a := make([]bool, p.dmax)
	p.layout.Active(mask, a)
	return a
}

// Natural maps latent θ to natural-unit parameters under mask.
func (p *Posterior) Natural(theta []float64, mask []bool) family.Params {
	return p.fam.Natural(theta, mask)
}

// Repeat returns n references to mask, for sampling n parameter vectors
// under one fixed model.
func Repeat(mask []bool, n int) [][]bool {
	out := make([][]bool, n)
	for i := range out {
		out[i] = mask
	}
	return out
}

// Stream tags keep the random streams of different operations apart.
const (
	tagMasks uint64 = 0x6d61736b // "mask"
	tagTheta uint64 = 0x74686574 // "thet"
	tagNoise uint64 = 0x6e6f6973 // "nois"
)

// streamSeed derives the seed of stream (tag, observation, sample).
func streamSeed(seed, tag, obs, sample uint64) (uint64, uint64) {
	s := seeds.Mix(seeds.Mix(seeds.Mix(seed^tag)^obs) ^ sample)
	return s, seeds.Mix(s)
}

// Memory estimates, in bytes, for checking a requested size against the
// available memory before allocating (internal/memlimit). They are peak
// resident-memory growth per unit measured with `prism sample` on the
// lingauss-k6 test network (60 B per mask draw with C = 7; 2.7 kB per
// joint sample), rounded up and scaled with C and the latent dimension.

// MaskDrawBytes is the memory of one mask drawn for one observation
// (SampleMasks, Discover): the mask, its slice header, log q and the
// ranking's key.
func (p *Posterior) MaskDrawBytes() float64 { return 64 + 2*float64(p.c) }

// JointSampleBytes is the memory of one joint sample (mask and θ) for one
// observation (SampleJoint, Predict), including its natural-unit copy.
func (p *Posterior) JointSampleBytes() float64 { return 4096 + 64*float64(p.dmax) }
