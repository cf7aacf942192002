package dmrifit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// FitSettings configure the amortized fit of `prism dmri fit`.
type FitSettings struct {
	// Lambda is the model-prior parameter λ of q(M | x, λ) (the reference
	// implementation's prediction default is 0.3).
	Lambda float64 `json:"lambda"`
	// Samples is the number of joint posterior samples per voxel: M from
	// the exact q(M | x, λ) over the model list, then θ ~ q(θ | M, x).
	Samples int `json:"samples"`
	// Steps and Solver configure the probability-flow ODE sampler.
	Steps  int    `json:"steps"`
	Solver string `json:"solver"`
	// ESSSamples is the number of importance samples per voxel under its
	// MAP model for the effective sample size (0: no ESS map).
	ESSSamples int `json:"ess_samples"`
	// Seed selects every random stream.
	Seed uint64 `json:"seed"`
	// BatchSize is the number of voxels per batch: memory, progress
	// granularity and resume points; the results do not depend on it, bit
	// for bit (see Fitter.Fit).
	BatchSize int `json:"batch_size"`
	// Correct is the posterior correction (package correct): "" or "none",
	// "is", "smc", or CorrectAuto (the default of `dmri fit`): smc for
	// ball-and-sticks families, none for model-selection fits (where the
	// correction costs seconds per voxel and is asked for). With a
	// correction the model probabilities come from the corrected evidence
	// of every model in the list and the joint samples from the corrected
	// posteriors. Run records the resolved method (ResolveCorrect).
	Correct string `json:"correct,omitempty"`
	// CorrectParticles is the number of particles of one SMC run (0: the
	// path's default, ResolveCorrect).
	CorrectParticles int `json:"correct_particles,omitempty"`
	// CorrectAlways (model-selection fits with a correction): the models
	// with at most this many active compartments are corrected in every
	// voxel besides the classes the network gives ≥ CorrectMinQ (0: only
	// those; docs/dmri.md).
	CorrectAlways int `json:"correct_always,omitempty"`
	// CorrectLambda (model-selection fits with a correction, 0: off):
	// also correct the classes that hold ≥ CorrectMinQ of the network's
	// q(M | x, CorrectLambda). A network learns the log-evidence gap
	// between nested models only as wide as its training prior needs,
	// which for many-compartment models is at λ near 1; at the fit's λ it
	// then leaves them out of the candidates even where the exact evidence
	// favours them by hundreds of nats. Its ranking at a λ near 1 still
	// proposes them, at the cost of one SMC run per class (docs/dmri.md).
	CorrectLambda float64 `json:"correct_lambda,omitempty"`
	// Mixture draws the joint samples' models from the whole q(M | x, λ)
	// (model averaging over fibre counts). By default (false) they are
	// drawn from q restricted to the models with the most probable number
	// of sticks (argmax of nfibres_prob), so that the samples, mean_fN and
	// dyadsN describe exactly the fibres nfibres_prob counts (issue 20;
	// docs/dmri.md); with a correction, from the corrected posterior
	// restricted in the same way.
	Mixture bool `json:"mixture,omitempty"`
	// Refine is the number of independence Metropolis–Hastings steps
	// that move each network sample towards the exact posterior of its
	// model, with a heavy-tailed Laplace approximation at the model's mode
	// as the proposal (correct.Refine, docs/dmri.md; 0: off). Not used
	// with a correction.
	Refine int `json:"refine"`
	// RefineMALA is the number of preconditioned MALA steps after them
	// (correct.RefineSettings.Steps; 0: none).
	RefineMALA int `json:"refine_mala,omitempty"`
}

// DefaultFitSettings returns the defaults of `prism dmri fit`: λ = 0.3
// (the reference implementation's default), 50 samples with 8 AB2 steps, no ESS pass, seed
// 1, batches of 256 voxels. 8 steps (the reference's presets use 20–40)
// keep a whole brain near 10 minutes on two cores; on the synthetic
// phantom the dyads1 median error is 2.4° at 8 steps against 2.2° at 12
// (docs/validation.md). The ESS map needs log q(θ) of importance samples,
// whose exact Jacobians cost more than the whole fit (docs/dmri.md), so it
// is opt-in (ESSSamples > 0).
func DefaultFitSettings() FitSettings {
	return FitSettings{Lambda: 0.3, Samples: 50, Steps: 8, Solver: "ab2", ESSSamples: 0, Seed: 1, BatchSize: 256, Refine: 3, Correct: CorrectAuto}
}

// CorrectAuto is the default correction: SMC with the Laplace start
// for ball-and-sticks families, none for model-selection fits. Since
// issue 20 the SMC is the default of `dmri fit`: at 20 particles it
// costs under a fifth of `dmri mcmc`'s CPU on the real multi-shell slab
// (docs/benchmarks.md), and its stick counts and second directions agree
// with the MCMC's where the network's do not (docs/validation.md).
const CorrectAuto = "auto"

// ResolveCorrect returns s with CorrectAuto replaced by the method it
// stands for ("smc" when ballAndSticks, else "none") and, for SMC, a
// zero CorrectParticles by the path's default (DefaultCorrectSettings;
// SelectParticles for model-selection fits).
func (s FitSettings) ResolveCorrect(ballAndSticks bool) FitSettings {
	if s.Correct == CorrectAuto {
		s.Correct = "none"
		if ballAndSticks {
			s.Correct = "smc"
		}
	}
	if s.Correct == "smc" && s.CorrectParticles == 0 {
		s.CorrectParticles = DefaultCorrectSettings(correct.SMC).Particles
		if !ballAndSticks {
			s.CorrectParticles = SelectParticles
		}
	}
	return s
}

// CheckScope reports settings that the fit of a network of family f
// would ignore: --correct-lambda and --correct-always choose the model
// classes of a model-selection correction, so they need one (a resolved
// Correct other than "none") and a model-selection family. Call it on
// settings resolved by ResolveCorrect.
func (s FitSettings) CheckScope(f family.Family) error {
	if s.CorrectLambda == 0 && s.CorrectAlways == 0 {
		return nil
	}
	if BallAndSticks(f) {
		return fmt.Errorf("dmri: --correct-lambda and --correct-always choose the model classes of a model-selection correction; %s is a ball-and-sticks family (its correction refines the stick fit of every voxel), drop them", f.Name())
	}
	if s.Correct == "none" {
		return fmt.Errorf("dmri: --correct-lambda and --correct-always need --correct smc or is (the correction is off)")
	}
	return nil
}

// OutputVersion identifies how FitBatch turns network samples into its
// outputs; it changes when they change for the same settings and weights
// (2: sticks aligned across samples and samples from the most probable
// stick count, issue 20; 3: so also with a correction), so that `dmri
// fit` does not resume a partial state written by an older version.
const OutputVersion = 3

// Validate checks the settings.
func (s FitSettings) Validate() error {
	switch {
	case !(s.Lambda > 0 && s.Lambda < 1):
		return fmt.Errorf("dmri: λ = %v, want 0 < λ < 1", s.Lambda)
	case s.Samples < 1:
		return fmt.Errorf("dmri: %d samples per voxel, want ≥ 1", s.Samples)
	case s.Steps < 1:
		return fmt.Errorf("dmri: %d ODE steps, want ≥ 1", s.Steps)
	case s.ESSSamples < 0:
		return fmt.Errorf("dmri: %d importance samples, want ≥ 0", s.ESSSamples)
	case s.BatchSize < 1:
		return fmt.Errorf("dmri: batch size %d, want ≥ 1", s.BatchSize)
	case s.Refine < 0 || s.RefineMALA < 0:
		return fmt.Errorf("dmri: %d refinement jumps and %d MALA steps, want ≥ 0", s.Refine, s.RefineMALA)
	case s.CorrectParticles < 0 || s.CorrectParticles == 1:
		return fmt.Errorf("dmri: %d correction particles, want ≥ 2", s.CorrectParticles)
	case s.CorrectAlways < 0:
		return fmt.Errorf("dmri: --correct-always %d, want ≥ 0", s.CorrectAlways)
	case s.CorrectLambda != 0 && !(s.CorrectLambda > 0 && s.CorrectLambda < 1):
		return fmt.Errorf("dmri: --correct-lambda %v, want 0 (off) or 0 < λ < 1", s.CorrectLambda)
	}
	if _, err := correct.ParseMethod(s.Correct); err != nil && s.Correct != CorrectAuto {
		return fmt.Errorf("dmri: %w (or %s)", err, CorrectAuto)
	}
	if _, err := posterior.ParseSolver(s.Solver); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	return nil
}

// Model is one entry of a family's model list: a mask with positive prior
// probability.
type Model struct {
	Index  int    `json:"index"` // value in map_model (1-based; 0 = not fitted)
	Name   string `json:"name"`  // active components joined by "+"
	Mask   []bool `json:"mask"`
	Sticks int    `json:"sticks"` // number of active sticks
}

// MaxListedComponents is the largest number of components whose models
// ModelList enumerates (2^16 masks); a model-selection fit of a larger
// family (bszt-conv's 21) samples the model posterior instead
// (SelectFitter, ModelDraws).
const MaxListedComponents = 16

// ModelList enumerates the masks of f with positive prior probability at
// λ, in increasing binary order of the mask (component 0 the lowest bit).
// It refuses families with more than MaxListedComponents components.
func ModelList(f family.Family, lambda float64) ([]Model, error) {
	comps := f.Components()
	c := len(comps)
	if c > MaxListedComponents {
		return nil, fmt.Errorf("dmri: %s has %d components, too many to enumerate its models", f.Name(), c)
	}
	prior := f.MaskPrior()
	var out []Model
	for bits := 1; bits < 1<<c; bits++ {
		m := make([]bool, c)
		for k := range c {
			m[k] = bits&(1<<k) != 0
		}
		if math.IsInf(prior.LogProb(m, lambda), -1) {
			continue
		}
		out = append(out, newModel(comps, m, len(out)+1))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dmri: %s has no model with positive prior probability at λ = %v", f.Name(), lambda)
	}
	return out, nil
}

// newModel returns the model list entry of mask m with the given index:
// its name joins the active components' names with "+".
func newModel(comps []family.Component, m []bool, index int) Model {
	var names []string
	sticks := 0
	for k, on := range m {
		if on {
			names = append(names, comps[k].Name)
			if comps[k].Has(family.TagStick) {
				sticks++
			}
		}
	}
	return Model{Index: index, Name: strings.Join(names, "+"), Mask: m, Sticks: sticks}
}

// Fitter fits ball-and-sticks posteriors to voxels with a trained network
// of a multi-shell ball-and-sticks family (b3s).
type Fitter struct {
	post   *posterior.Posterior
	fam    family.Family
	set    FitSettings
	so     posterior.SampleOptions
	Models []Model
	masks  [][]bool
	Sticks int   // number of stick components (≤ MaxFibres)
	stick  []int // component index of each stick
	// Positions in the flat natural vector (family.NaturalIndex) of the
	// shared d and d_std and of each stick's fraction, theta and phi.
	nat              *family.NaturalIndex
	natD, natDStd    int
	natFrac, natThet []int
	natPhi           []int
	cs               correct.Settings
	// exch lists the sticks when they are exchangeable (equal Dirichlet
	// concentrations), for the refinement's relabelling; else nil.
	exch []int
	// class[m] is model m's class (modelClass), for the correction's
	// candidates.
	class []string
}

// ModeSearchSteps caps the ODE steps of the draws of q that start the
// SMC's mode search: Newton steps refine them, so rough draws do.
const ModeSearchSteps = 4

// DefaultCorrectSettings are the correction settings of `dmri fit
// --correct`, sized for voxels. SMC: one run of 20 particles per model
// class from the Laplace approximation at the mode (laplaceSettings),
// 1 independence move and 1 MALA move per tempering step; on the real
// multi-shell slab and the crossing phantom 24, 32 and 64 particles gave
// the same tables at more CPU (docs/validation.md, issue 20). IS: 64
// importance samples (each needs the ODE log-density, 12 VJPs per step
// for b3s). A fit corrects the models of every class with q ≥
// CorrectMinQ in every voxel (docs/posterior.md gives the cost).
func DefaultCorrectSettings(m correct.Method) correct.Settings {
	cs := correct.DefaultSettings(m)
	cs.Replicates, cs.Particles, cs.Moves, cs.Draws, cs.FinalSamples = 4, 20, 1, 8, 256
	cs.Samples = 64
	return cs
}

// laplaceSettings switches an SMC correction to the Laplace start
// (correct.LaplaceOptions): each stick's two latents are the hemisphere
// bijection of its direction (family/dmri: orientation(z[0], z[1]) of a
// MultiShellStick block), and the sticks are exchangeable when their
// Dirichlet concentrations are equal. Families whose stick blocks are
// not 2 latents keep the kernel start (4 replicates).
func laplaceSettings(cs correct.Settings, l *family.Layout, sticks, exch []int) correct.Settings {
	axes := map[int][2]int{}
	for _, k := range sticks {
		b := l.Blocks[k]
		if b.Size != 2 {
			return cs
		}
		axes[k] = [2]int{b.Offset, b.Offset + 1}
	}
	cs.Laplace = &correct.LaplaceOptions{Axes: axes, Exchangeable: exch}
	// The draws only start the mode search (the kernel start builds its
	// reference from them and keeps 8): Newton searches of up to 8 steps
	// from the best 2 of 4 draws of ModeSearchSteps ODE steps in models
	// with two or more sticks, one search elsewhere. On the crossing
	// phantom (UKB-like, SNR 40) one search from the best of 2 draws made
	// 9–25 % of two-fibre voxels three-fibre (a search stopped short of
	// the 2-stick mode lowers that model's evidence); with 2 of 4, 3–6 %,
	// as with 8 draws of 8 steps (docs/validation.md, issue 20).
	cs.Draws = 4
	cs.Laplace.Starts, cs.Laplace.StartIters, cs.Laplace.StartsMinActive = 2, 8, 2
	// A log-evidence SE of 0.5 nats moves a voxel's model probabilities by
	// about a factor e^±0.5; 20 particles give a median 0.24 on the whole
	// slab (64: 0.21 on its crossings; docs/validation.md), so the
	// library's 0.1 would flag most voxels. The SE itself is in the
	// correct_logz_se map.
	cs.MaxLogEvidenceSE = 0.5
	return cs
}

// NewFitter checks that the network's family is a multi-shell ball and
// sticks family (a MultiShellBall and 1–3 MultiShellStick compartments
// with the shared d, d_std, as b3s) and prepares its model list.
func NewFitter(p *posterior.Posterior, s FitSettings) (*Fitter, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.ResolveCorrect(true)
	f := p.Family()
	ft := &Fitter{post: p, fam: f, set: s}
	solver, _ := posterior.ParseSolver(s.Solver)
	ft.so = posterior.SampleOptions{Steps: s.Steps, Solver: solver}
	method, _ := correct.ParseMethod(s.Correct)
	ft.cs = DefaultCorrectSettings(method)
	comps := f.Components()
	simplexPos := map[int]int{}
	for i, k := range f.Layout().Simplex {
		simplexPos[k] = i
	}
	ft.nat = family.NewNaturalIndex(f)
	ball := 0
	for k, c := range comps {
		if c.Kind != family.Base {
			continue
		}
		// Components are recognised by their tags (family/tags.go), so a
		// spec family tagged like b3s is fitted the same way.
		switch {
		case c.Has(family.TagBall) && c.Has(family.TagSharedDiffusivity):
			ball++
		case c.Has(family.TagStick) && c.Has(family.TagSharedDiffusivity):
			pos, ok := simplexPos[k]
			th, ph := ft.nat.Param(k, "theta"), ft.nat.Param(k, "phi")
			if !ok || th < 0 || ph < 0 {
				return nil, fmt.Errorf("dmri: %s: stick %s needs a fraction and parameters theta, phi", f.Name(), c.Name)
			}
			ft.stick = append(ft.stick, k)
			ft.natFrac = append(ft.natFrac, ft.nat.Fraction(pos))
			ft.natThet = append(ft.natThet, th)
			ft.natPhi = append(ft.natPhi, ph)
		default:
			return nil, fmt.Errorf("dmri: `dmri fit` needs a multi-shell ball-and-sticks family such as b3s; %s has a %s compartment (tags %v)", f.Name(), c.Name, c.Tags)
		}
	}
	ft.natD, ft.natDStd = ft.nat.Shared("d"), ft.nat.Shared("d_std")
	if ball != 1 || len(ft.stick) < 1 || len(ft.stick) > MaxFibres || ft.natD < 0 || ft.natDStd < 0 {
		return nil, fmt.Errorf("dmri: `dmri fit` needs a multi-shell ball-and-sticks family such as b3s (one %q and 1–%d %q components with tag %q, shared d and d_std); got %s",
			family.TagBall, MaxFibres, family.TagStick, family.TagSharedDiffusivity, f.Name())
	}
	ft.Sticks = len(ft.stick)
	ft.exch = exchangeable(f.Layout(), ft.stick)
	if method == correct.SMC {
		ft.cs = laplaceSettings(ft.cs, f.Layout(), ft.stick, ft.exch)
	}
	if s.CorrectParticles > 0 {
		ft.cs.Particles = s.CorrectParticles
	}
	var err error
	if ft.Models, err = ModelList(f, s.Lambda); err != nil {
		return nil, err
	}
	for m, mod := range ft.Models {
		ft.masks = append(ft.masks, mod.Mask)
		ft.class = append(ft.class, ft.modelClass(m))
	}
	return ft, nil
}

// exchangeable returns the sticks if their Dirichlet concentrations are
// equal (the model is then invariant under relabelling them), else nil.
func exchangeable(l *family.Layout, sticks []int) []int {
	alpha := map[int]float64{}
	for i, k := range l.Simplex {
		alpha[k] = l.Alpha[i]
	}
	for _, k := range sticks {
		if alpha[k] != alpha[sticks[0]] {
			return nil
		}
	}
	return sticks
}

// Settings returns the fitter's settings.
func (ft *Fitter) Settings() FitSettings { return ft.set }

// WeightsHash returns the SHA-256 of the network's family, architecture
// and parameter values (names, shapes and float32 bits in creation
// order): it identifies the weights actually used, whatever file they
// came from.
func WeightsHash(p *posterior.Posterior) string {
	h := sha256.New()
	net := p.Net()
	cfg, _ := json.Marshal(net.Config())
	fmt.Fprintf(h, "%s\n%s\n", p.Family().Name(), cfg)
	var buf [4]byte
	for _, t := range net.Params().Tensors() {
		fmt.Fprintf(h, "%s %v\n", t.Name, t.Shape)
		for _, v := range t.Data {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			h.Write(buf[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Result holds the fit of n consecutive voxels of a scan. Per-sample
// quantities of voxel v are at [v*Samples+s]; the sticks of every sample
// are assigned to slots so that each slot follows one fibre across the
// samples (alignSticks, relabel.go), and the slots are ordered by
// decreasing mean fraction, as BedpostX orders its sticks; a stick absent
// from a sample has f = 0 and Active false there.
type Result struct {
	Start, N, Samples, Models, Sticks int

	ModelProb []float32 // [v*Models+m]: q(M_m | x, λ) renormalised over the model list
	ModelMass []float32 // [v]: Σ_m q(M_m | x, λ) before renormalising
	F         [MaxFibres][]float32
	Theta     [MaxFibres][]float32
	Phi       [MaxFibres][]float32
	Active    [MaxFibres][]bool
	D, DStd   []float32
	ESS       []float32 // NaN when not computed
	PPRMSE    []float32
	// Correction diagnostics of the most probable model (NaN without a
	// correction): the ESS of its weighted samples, its tempering steps
	// (SMC), its log-evidence standard error, and 1 where the voxel's
	// correction failed its diagnostics (0 otherwise).
	CorrESS, CorrSteps, CorrLogZSE, CorrFailed []float32
}

func newBatch(start, n, samples, models, sticks int) *Result {
	b := &Result{Start: start, N: n, Samples: samples, Models: models, Sticks: sticks,
		ModelProb: make([]float32, n*models), ModelMass: make([]float32, n),
		D: make([]float32, n*samples), DStd: make([]float32, n*samples),
		ESS: make([]float32, n), PPRMSE: make([]float32, n),
		CorrESS: make([]float32, n), CorrSteps: make([]float32, n), CorrLogZSE: make([]float32, n), CorrFailed: make([]float32, n)}
	for i := range sticks {
		b.F[i] = make([]float32, n*samples)
		b.Theta[i] = make([]float32, n*samples)
		b.Phi[i] = make([]float32, n*samples)
		b.Active[i] = make([]bool, n*samples)
	}
	return b
}

var nan32 = float32(math.NaN())

// CorrectMinQ is the network probability q(M | x, λ) summed over a model
// class (modelClass: the models that differ only in which sticks are
// on) below which the class is left out of a voxel's correction (its
// corrected probability is 0). With the Laplace start each class costs
// one SMC run.
const CorrectMinQ = 0.01

// maskStreamTag separates the model-draw streams from everything else.
const maskStreamTag = 0x6669746d61736b // "fitmask"

// FitBatch fits the voxels start … start+n−1 of the scan (indices into
// s.Voxels). Voxel v's random numbers depend only on the seed and on
// its position in s.Voxels (θ streams, posterior.Options.Offset) and
// its linear grid index (model draws), never on the batch: any batch
// size gives identical results.
func (ft *Fitter) FitBatch(s *Scan, start, n int) (*Result, error) {
	if start < 0 || n < 1 || start+n > len(s.Voxels) {
		return nil, fmt.Errorf("dmri: batch [%d, %d) outside the %d voxels", start, start+n, len(s.Voxels))
	}
	N := s.Design.N
	obs := make([]posterior.Observation, n)
	for v := range obs {
		obs[v] = posterior.Observation{Design: s.Design, X: s.Signal[(start+v)*N : (start+v+1)*N]}
	}
	S, M := ft.set.Samples, len(ft.Models)
	b := newBatch(start, n, S, M, ft.Sticks)

	// Model posterior: exact q(M | x, λ) of every model in the list.
	opt := posterior.Options{Seed: ft.set.Seed, Offset: uint64(start)}
	if err := ft.modelPosterior(obs, opt, b.ModelProb, b.ModelMass); err != nil {
		return nil, err
	}
	masks := make([][][]bool, n)
	mapMasks := make([][]bool, n)
	for v := range n {
		p := b.ModelProb[v*M : (v+1)*M]
		best := 0
		for m := range p {
			if p[m] > p[best] {
				best = m
			}
		}
		mapMasks[v] = ft.masks[best]
		// Joint samples: S models drawn from the renormalised q, or from
		// q restricted to the most probable stick count.
		draw := p
		if !ft.set.Mixture {
			draw = ft.countRestricted(p)
		}
		r := rand.New(rand.NewPCG(ft.set.Seed^maskStreamTag, uint64(s.Voxels[start+v])))
		masks[v] = make([][]bool, S)
		for j := range S {
			masks[v][j] = ft.masks[drawCategorical(r, draw)]
		}
	}

	so := ft.so
	so.Options = opt
	var thetas [][][]float64
	if ft.cs.Method != correct.None {
		cs := ft.cs
		cs.Sample = so
		if cs.Laplace != nil {
			// The draws of q only start the mode search.
			cs.Sample.Steps = min(cs.Sample.Steps, ModeSearchSteps)
		}
		// Candidates: the models of the classes (the same compartments
		// but for which sticks are on, modelClass) holding at least
		// CorrectMinQ of the network's q(M | x, λ), and the most probable
		// model; the corrected posterior is exact within them, the
		// others get 0.
		cands := make([][][]bool, n)
		pos := make([][]int, n)
		for v := range n {
			p := b.ModelProb[v*M : (v+1)*M]
			byClass := map[string]float64{}
			for m := range M {
				byClass[ft.class[m]] += float64(p[m])
			}
			for m := range M {
				if byClass[ft.class[m]] >= CorrectMinQ || &ft.masks[m][0] == &mapMasks[v][0] {
					cands[v] = append(cands[v], ft.masks[m])
					pos[v] = append(pos[v], m)
				}
			}
		}
		corr, err := correct.Correct(ft.post, obs, cands, ft.set.Lambda, cs)
		if err != nil {
			return nil, fmt.Errorf("dmri: correction: %w", err)
		}
		thetas = make([][][]float64, n)
		for v := range n {
			c := &corr[v]
			clear(b.ModelProb[v*M : (v+1)*M])
			for k, m := range pos[v] {
				b.ModelProb[v*M+m] = float32(c.Prob[k])
			}
			if ft.set.Mixture {
				masks[v], thetas[v] = c.Draw(S)
			} else {
				// As without a correction: the samples come from the
				// models with the most probable stick count, so that
				// mean_fN and dyadsN describe the fibres nfibres_prob counts.
				restricted := ft.countRestricted(b.ModelProb[v*M : (v+1)*M])
				keep := make([]bool, len(pos[v]))
				for k, m := range pos[v] {
					keep[k] = restricted[m] > 0
				}
				masks[v], thetas[v] = c.DrawWithin(keep, S)
			}
			mapMasks[v] = ft.masks[pos[v][c.Best()]]
			r := c.Results[c.Best()]
			b.CorrESS[v], b.CorrSteps[v], b.CorrLogZSE[v] = float32(r.ESS), float32(r.Steps), float32(r.LogEvidenceSE)
			if c.Failed {
				b.CorrFailed[v] = 1
			}
			c.Results = nil // the weighted samples are no longer needed
		}
	} else {
		ts, err := ft.post.SampleTheta(obs, masks, so)
		if err != nil {
			return nil, fmt.Errorf("dmri: parameter posterior: %w", err)
		}
		thetas = make([][][]float64, n)
		for v := range n {
			thetas[v] = ts[v].Theta
			b.CorrESS[v], b.CorrSteps[v], b.CorrLogZSE[v], b.CorrFailed[v] = nan32, nan32, nan32, nan32
		}
		if _, err := correct.Refine(ft.fam, obs, masks, thetas, correct.RefineSettings{Jumps: ft.set.Refine, Steps: ft.set.RefineMALA, Exchangeable: ft.exch, Seed: ft.set.Seed, Offset: uint64(start)}); err != nil {
			return nil, fmt.Errorf("dmri: refinement: %w", err)
		}
	}
	if ft.set.ESSSamples > 0 {
		eso := so
		eso.Seed = ft.set.Seed ^ 0x657373 // "ess": streams apart from the joint samples
		im, err := ft.post.ImportanceSample(obs, mapMasks, ft.set.ESSSamples, eso)
		if err != nil {
			return nil, fmt.Errorf("dmri: importance sampling: %w", err)
		}
		for v := range n {
			b.ESS[v] = float32(im[v].ESS)
		}
	} else {
		for v := range n {
			b.ESS[v] = float32(math.NaN())
		}
	}

	// Natural parameters, stick ordering and predictive RMSE, in parallel
	// over the voxels (the family is safe for concurrent use).
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pred := make([]float64, N)
			mean := make([]float64, N)
			order := make([]int, ft.Sticks)
			fr := make([]float64, ft.Sticks)
			nat := make([]float64, ft.nat.Len())
			align := newAlignScratch(S, ft.Sticks)
			for v := w; v < n; v += workers {
				clear(mean)
				for j := range S {
					th := thetas[v][j]
					mk := masks[v][j]
					ft.nat.Fill(th, mk, nat)
					k := v*S + j
					b.D[k] = float32(nat[ft.natD])
					b.DStd[k] = float32(nat[ft.natDStd])
					for i := range ft.Sticks {
						order[i] = i
						fr[i] = 0
						if mk[ft.stick[i]] {
							fr[i] = nat[ft.natFrac[i]]
						}
					}
					sort.SliceStable(order, func(a, c int) bool { return fr[order[a]] > fr[order[c]] })
					for slot, i := range order {
						if !mk[ft.stick[i]] {
							continue
						}
						b.F[slot][k] = float32(fr[i])
						b.Theta[slot][k] = float32(nat[ft.natThet[i]])
						b.Phi[slot][k] = float32(nat[ft.natPhi[i]])
						b.Active[slot][k] = true
					}
					ft.fam.Forward(s.Design, th, mk, pred)
					for m, y := range pred {
						mean[m] += y
					}
				}
				b.alignSticks(v, align)
				x := obs[v].X
				var ss float64
				for m := range mean {
					d := mean[m]/float64(S) - x[m]
					ss += d * d
				}
				b.PPRMSE[v] = float32(math.Sqrt(ss / float64(N)))
			}
		}()
	}
	wg.Wait()
	return b, nil
}

// ModelPosterior returns the model posterior of the voxels start …
// start+n−1 of s (indices into s.Voxels): q(M | x, λ) of every model of
// ft.Models renormalised over the list, prob[v*len(Models)+m], and the
// list's mass before renormalising, mass[v]. These are FitBatch's
// ModelProb and ModelMass without the parameter samples (the model
// posterior draws no random numbers), e.g. to refit the model maps of a
// slice at another λ.
func (ft *Fitter) ModelPosterior(s *Scan, start, n int) (prob, mass []float32, err error) {
	if start < 0 || n < 1 || start+n > len(s.Voxels) {
		return nil, nil, fmt.Errorf("dmri: voxels [%d, %d) outside the %d voxels", start, start+n, len(s.Voxels))
	}
	N := s.Design.N
	obs := make([]posterior.Observation, n)
	for v := range obs {
		obs[v] = posterior.Observation{Design: s.Design, X: s.Signal[(start+v)*N : (start+v+1)*N]}
	}
	prob, mass = make([]float32, n*len(ft.Models)), make([]float32, n)
	opt := posterior.Options{Seed: ft.set.Seed, Offset: uint64(start)}
	if err := ft.modelPosterior(obs, opt, prob, mass); err != nil {
		return nil, nil, err
	}
	return prob, mass, nil
}

// modelPosterior writes the renormalised q(M | x, λ) over the model list
// of every observation into prob and the list's mass into mass.
func (ft *Fitter) modelPosterior(obs []posterior.Observation, opt posterior.Options, prob, mass []float32) error {
	lq, err := ft.post.LogProbMasks(obs, ft.set.Lambda, [][][]bool{ft.masks}, opt)
	if err != nil {
		return fmt.Errorf("dmri: model posterior: %w", err)
	}
	M := len(ft.masks)
	for v := range obs {
		mass[v] = float32(normalise(lq[v], prob[v*M:(v+1)*M]))
	}
	return nil
}

// normalise writes exp(lq) / Σ exp(lq) into p and returns Σ exp(lq).
func normalise(lq []float64, p []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range lq {
		mx = math.Max(mx, v)
	}
	var sum float64
	for _, v := range lq {
		sum += math.Exp(v - mx)
	}
	for m, v := range lq {
		p[m] = float32(math.Exp(v-mx) / sum)
	}
	return sum * math.Exp(mx)
}

// countRestricted returns the model probabilities p restricted to the
// models whose number of sticks is the most probable one (the argmax of
// nfibres_prob; ties go to the smaller count) and renormalised.
func (ft *Fitter) countRestricted(p []float32) []float32 {
	var byCount [MaxFibres + 1]float64
	for m, mod := range ft.Models {
		byCount[mod.Sticks] += float64(p[m])
	}
	best := 0
	for k := range byCount {
		if byCount[k] > byCount[best] {
			best = k
		}
	}
	out := make([]float32, len(p))
	for m, mod := range ft.Models {
		if mod.Sticks == best && byCount[best] > 0 {
			out[m] = float32(float64(p[m]) / byCount[best])
		}
	}
	return out
}

// modelClass is the key of model m's class: its mask with the sticks
// replaced by their number (exchangeable sticks make the models of a
// class the same model).
func (ft *Fitter) modelClass(m int) string {
	k := append([]bool(nil), ft.masks[m]...)
	for _, j := range ft.stick {
		k[j] = false
	}
	return fmt.Sprintf("%s/%d", family.MaskString(k), ft.Models[m].Sticks)
}

// drawCategorical draws an index with probabilities p (Σ p = 1 up to
// rounding; the last index absorbs the remainder).
func drawCategorical(r *rand.Rand, p []float32) int {
	u := r.Float64()
	var c float64
	for m, v := range p {
		c += float64(v)
		if u < c {
			return m
		}
	}
	for m := len(p) - 1; m > 0; m-- {
		if p[m] > 0 {
			return m
		}
	}
	return 0
}

// errStateMismatch reports a state file from another run.
var errStateMismatch = errors.New("dmri: the partial state in the output folder belongs to a different run")

// Memory estimate of a fit (Fitter.Fit, then WriteFit), for checking the
// requested sizes before allocating (internal/memlimit): FitBaseBytes,
// plus FitBatchBytes per voxel of a batch and measurement, plus
// FitSampleBytes per fitted voxel and sample. Measured peak resident
// memory of `prism dmri fit --model b3s` on the 2,218 voxels of the
// mrtrix3-msmt-slab scan (102 volumes): 1.14 GB with batches of 256
// voxels and 16 samples, 1.22 GB with 160 samples, 0.27 GB with batches
// of 8 voxels and 160 samples; hence about 37 kB per batch voxel and
// measurement (encoder and sampler activations) and 260 B per voxel and
// sample (the samples kept for all voxels); the constants round these up.
const (
	FitBaseBytes   = 300e6
	FitBatchBytes  = 40e3
	FitSampleBytes = 300
)
