package eval

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Config sets the sizes of an evaluation run. Zero fields take the
// defaults given in brackets.
type Config struct {
	// N is the number of simulated test observations for SBC and for
	// classification [1000].
	N int
	// Seed fixes every random number of the run.
	Seed uint64
	// Lambda is the complexity knob of the test data and of q(M|x,λ); NaN
	// draws λ ~ U(0,1) per observation, as in training.
	Lambda float64 `json:"-"`
	// MaskSamples is S of model SBC [256].
	MaskSamples int
	// ThetaSamples is S of parameter SBC; the same samples serve KSD and
	// the local predictive [100].
	ThetaSamples int
	// KSDObs is the number of observations with KSD and rKSD [min(N,100)];
	// a negative value (like for ISObs and PredObs) skips the metric.
	KSDObs int
	// ISObs is the number of observations with importance sampling
	// [min(N,100)], ISSamples the proposals per set [256].
	ISObs, ISSamples int
	// Subset is the number of models per observation for the evidence
	// comparisons and the TV distance: the true mask and the most probable
	// distinct masks among the SBC draws [8].
	Subset int
	// TVLambdas are the λ values of the TV-distance sweep
	// [0.1, 0.3, 0.5, 0.7, 0.9].
	TVLambdas []float64
	// ClassModels is the size of the random model subspace for
	// classification [200; 50 for dMRI families].
	ClassModels int
	// PredObs is the number of observations for predictive RMSE
	// [min(N,100)], PredSamples the global predictive draws [ThetaSamples],
	// Replicates the noise-floor replicates R [20].
	PredObs, PredSamples, Replicates int
	// BandReps is the number of simulated perfectly calibrated data sets
	// for the CE bands [1000]; BootReps the bootstrap resamples [200].
	BandReps, BootReps int
	// Level of the CE bands [0.95].
	Level float64
	// Steps are the ODE solver steps [posterior default].
	Steps int
	// Correct, when its Method is not correct.None, adds the parameter SBC
	// of the likelihood-corrected posterior (CorrectedSBC) on the first
	// CorrectObs test observations [min(N, 200)]; families without a
	// likelihood skip it.
	Correct    correct.Settings `json:"-"`
	CorrectObs int              `json:",omitempty"`
	// Progress, if non-nil, receives one line per stage.
	Progress io.Writer `json:"-"`
}

func (c *Config) defaults(f family.Family) error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.N, 1000)
	def(&c.MaskSamples, 256)
	def(&c.ThetaSamples, 100)
	def(&c.KSDObs, min(c.N, 100))
	def(&c.ISObs, min(c.N, 100))
	def(&c.ISSamples, 256)
	def(&c.Subset, 8)
	if _, ok := f.(family.TableDesigner); ok {
		def(&c.ClassModels, 50)
	} else {
		def(&c.ClassModels, 200)
	}
	def(&c.PredObs, min(c.N, 100))
	if c.Correct.Method != correct.None {
		def(&c.CorrectObs, min(c.N, 200))
	} else {
		c.CorrectObs = 0 // nothing corrected: the report's settings say so
	}
	def(&c.PredSamples, c.ThetaSamples)
	def(&c.Replicates, 20)
	def(&c.BandReps, 1000)
	def(&c.BootReps, 200)
	if c.Level == 0 {
		c.Level = 0.95
	}
	if c.TVLambdas == nil {
		c.TVLambdas = []float64{0.1, 0.3, 0.5, 0.7, 0.9}
	}
	c.KSDObs = max(min(c.KSDObs, c.N), 0)
	c.ISObs = max(min(c.ISObs, c.N), 0)
	c.PredObs = max(min(c.PredObs, c.N), 0)
	c.CorrectObs = max(min(c.CorrectObs, c.N), 0)
	if c.N < 2 || c.MaskSamples < 1 || c.ThetaSamples < 2 || c.ISSamples < 2 || c.Subset < 1 ||
		c.ClassModels < 2 || c.PredSamples < 1 || c.Replicates < 1 || c.BandReps < 2 || c.BootReps < 2 ||
		!(c.Level > 0 && c.Level < 1) {
		return fmt.Errorf("eval: invalid configuration %+v", *c)
	}
	if !math.IsNaN(c.Lambda) && !(c.Lambda >= 0 && c.Lambda <= 1) {
		return fmt.Errorf("eval: λ = %v outside [0, 1]", c.Lambda)
	}
	return nil
}

// Value is a figure with its Monte Carlo standard error.
type Value struct {
	Value float64 `json:"value"`
	SE    float64 `json:"se"`
}

// Report is the result of Run.
type Report struct {
	Family         string            `json:"family"`
	N              int               `json:"n"`
	Seed           uint64            `json:"seed"`
	Lambda         string            `json:"lambda"`
	Settings       Config            `json:"settings"`
	Mask           Calibration       `json:"mask_sbc"`
	Param          Calibration       `json:"param_sbc"`
	ParamCorrected *CorrectedSBC     `json:"param_sbc_corrected,omitempty"` // when Config.Correct asks for it
	KSD            *KSDResult        `json:"ksd,omitempty"`
	Evidence       *EvidenceResult   `json:"evidence,omitempty"`
	Exact          *ExactResult      `json:"exact,omitempty"`
	Predictive     *PredictiveResult `json:"predictive,omitempty"`
	Class          *ClassResult      `json:"classification"`
	Selection      *SelectionResult  `json:"model_selection,omitempty"` // confusion.go
	Seconds        float64           `json:"seconds"`
}

// run holds the state of one evaluation.
type run struct {
	p      *posterior.Posterior
	f      family.Family
	cfg    Config
	so     posterior.SampleOptions
	start  time.Time
	sims   []family.Sample
	obs    []posterior.Observation
	lams   []float64
	active [][]bool
}

func (r *run) progress(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, a...))
	}
}

// Seeds of the independent random streams of a run, combined with
// Config.Seed.
const (
	streamTest uint64 = iota + 1
	streamMasks
	streamTheta
	streamIS1
	streamIS2
	streamPrior
	streamClassData
	streamClassSpace
	streamPred
	streamBand
	streamBoot
	streamRank
	streamDimBoot // parent of one bootstrap stream per latent dimension (paramSBC)
	streamWidth   // parent of the bands and bootstraps of the posterior-width bins (paramSBC)
	streamCorrect // the corrected parameter SBC's sampler and resampling
)

func (r *run) seed(stream uint64) uint64 { return streamSeed(r.cfg.Seed, stream) }

// streamSeed is the seed of one random stream of a run seeded with seed.
func streamSeed(seed, stream uint64) uint64 { return seed*1000003 + stream }

// Run evaluates the posterior p on freshly simulated test data and
// returns every metric of the suite. It is deterministic given cfg.
func Run(p *posterior.Posterior, cfg Config) (*Report, error) {
	f := p.Family()
	if err := cfg.defaults(f); err != nil {
		return nil, err
	}
	r := &run{p: p, f: f, cfg: cfg, start: time.Now(),
		so: posterior.SampleOptions{Steps: cfg.Steps}}
	rep := &Report{Family: f.Name(), N: cfg.N, Seed: cfg.Seed, Settings: cfg, Lambda: "random"}
	if !math.IsNaN(cfg.Lambda) {
		rep.Lambda = fmt.Sprint(cfg.Lambda)
	}
	if err := r.simulate(); err != nil {
		return nil, err
	}
	r.progress("simulated %d test observations", cfg.N)

	ms, err := r.maskSBC(rep)
	if err != nil {
		return nil, err
	}
	r.progress("mask SBC: CE %.4f (perfect-posterior %.0f%% band ≤ %.4f)", rep.Mask.CE.Value, 100*cfg.Level, rep.Mask.Band.Upper)
	ts, err := r.paramSBC(rep)
	if err != nil {
		return nil, err
	}
	r.progress("parameter SBC: CE %.4f (band ≤ %.4f, dependent band ≤ %.4f)", rep.Param.CE.Value, rep.Param.Band.Upper, rep.Param.DependentBand.Upper)
	r.progress("parameter SBC by dimension: %s", DimSummary(rep.Param.ByDimension, cfg.Level, 3))
	if cfg.ThetaSamples < MinWidthSamples {
		r.progress("parameter SBC by posterior width skipped: %d draws per observation, binning by their SD needs ≥ %d", cfg.ThetaSamples, MinWidthSamples)
	} else {
		r.progress("parameter SBC by posterior width: %s", WidthSummary(rep.Param.ByWidth))
	}
	lik := family.HasLikelihood(f)
	if !lik {
		r.progress("KSD, importance sampling, predictive checks and corrections skipped: %s has no likelihood (an external simulator)", f.Name())
	}
	if cfg.Correct.Method != correct.None && cfg.CorrectObs > 0 && lik {
		if rep.ParamCorrected, err = r.correctedParamSBC(); err != nil {
			return nil, err
		}
		c := rep.ParamCorrected
		r.progress("parameter SBC of the %s-corrected posterior (%d observations, %d corrections failed their diagnostics, mean ESS %.3f, %.0f s): CE %.4f (band ≤ %.4f, dependent band ≤ %.4f)",
			c.Method, c.Observations, c.Failed, c.ESS.Value, c.Seconds, c.CE.Value, c.Band.Upper, c.DependentBand.Upper)
		if c.Passed != nil {
			r.progress("parameter SBC of the %d corrections that passed their diagnostics: CE %.4f (band ≤ %.4f, dependent band ≤ %.4f)",
				c.Observations-c.Failed, c.Passed.CE.Value, c.Passed.Band.Upper, c.Passed.DependentBand.Upper)
		}
		r.progress("corrected parameter SBC by dimension: %s", DimSummary(c.ByDimension, cfg.Level, 3))
		if cfg.ThetaSamples >= MinWidthSamples {
			r.progress("corrected parameter SBC by posterior width: %s", WidthSummary(c.ByWidth))
		}
	}
	if cfg.KSDObs > 0 && lik {
		if rep.KSD, err = r.ksd(ts); err != nil {
			return nil, err
		}
		r.progress("KSD: mean rKSD %.3f", rep.KSD.RKSD.Value)
	}
	if _, ok := f.(family.ExactPosterior); ok {
		if rep.Exact, err = r.exactTV(); err != nil {
			return nil, err
		}
		if rep.Exact != nil {
			r.progress("exact model posterior: mean TV %.4f", rep.Exact.TV.Value)
		}
	}
	if cfg.ISObs > 0 && lik {
		if rep.Evidence, err = r.evidence(ms); err != nil {
			return nil, err
		}
		r.progress("importance sampling: mean ESS %.3f, R² of two sets %.4f", rep.Evidence.ESS.Value, rep.Evidence.R2Sets.Value)
	}
	if cfg.PredObs > 0 && lik {
		if rep.Predictive, err = r.predictive(ts); err != nil {
			return nil, err
		}
		r.progress("predictive: rRMSE local %.4f, global %.4f", rep.Predictive.RelLocal.Value, rep.Predictive.RelGlobal.Value)
	}
	if rep.Class, err = r.classify(); err != nil {
		return nil, err
	}
	r.progress("classification: top-1 %.3f, top-5 %.3f over %d models", rep.Class.Top1.Value, rep.Class.Top5.Value, rep.Class.Models)
	if rep.Class.BayesTop1 != nil {
		r.progress("classification with the exact posterior: top-1 %.3f, top-5 %.3f", rep.Class.BayesTop1.Value, rep.Class.BayesTop5.Value)
	}
	if rep.Selection, err = r.selection(); err != nil {
		return nil, err
	}
	if s := rep.Selection; s != nil {
		r.progress("model selection: model-class top-1 %.3f, top-5 %.3f over %d classes (prior alone: %.3f, %.3f)", s.Top1.Value, s.Top5.Value, s.Signatures, s.PriorTop1.Value, s.PriorTop5.Value)
	}
	rep.Seconds = time.Since(r.start).Seconds()
	return rep, nil
}

func (r *run) simulate() error {
	n := r.cfg.N
	r.sims = make([]family.Sample, n)
	// TrySimulateBatch: an external simulator gets whole batches and may fail.
	if _, err := family.TrySimulateBatch(r.f, family.SimOptions{Seed: r.seed(streamTest), Lambda: r.cfg.Lambda}, 0, r.sims); err != nil {
		return fmt.Errorf("eval: simulating the test set: %w", err)
	}
	r.obs = make([]posterior.Observation, n)
	r.lams = make([]float64, n)
	r.active = make([][]bool, n)
	for i, s := range r.sims {
		r.obs[i] = posterior.Observation{Design: s.Design, X: s.X}
		r.lams[i] = s.Lambda
		r.active[i] = r.p.Active(s.Mask)
	}
	return nil
}

// byLambda calls fn once per distinct λ with the indices of the
// observations that have it, in order.
func byLambda(lams []float64, fn func(lambda float64, idx []int) error) error {
	groups := map[float64][]int{}
	var keys []float64
	for i, l := range lams {
		if _, ok := groups[l]; !ok {
			keys = append(keys, l)
		}
		groups[l] = append(groups[l], i)
	}
	for _, l := range keys {
		if err := fn(l, groups[l]); err != nil {
			return err
		}
	}
	return nil
}

func pick[T any](x []T, idx []int) []T {
	out := make([]T, len(idx))
	for k, i := range idx {
		out[k] = x[i]
	}
	return out
}

// sampleMasks draws n masks per observation at each observation's λ.
func (r *run) sampleMasks(obs []posterior.Observation, lams []float64, n int, seed uint64) ([]posterior.MaskSet, error) {
	out := make([]posterior.MaskSet, len(obs))
	err := byLambda(lams, func(l float64, idx []int) error {
		// Offsets keep every observation's stream distinct across groups.
		for _, i := range idx {
			ms, err := r.p.SampleMasks(obs[i:i+1], l, n, posterior.Options{Seed: seed, Offset: uint64(i)})
			if err != nil {
				return fmt.Errorf("eval: sampling masks: %w", err)
			}
			out[i] = ms[0]
		}
		return nil
	})
	return out, err
}

// logProbMasks scores masks[i] (or masks[0] for all) under q(M|x_i,λ_i).
func (r *run) logProbMasks(obs []posterior.Observation, lams []float64, masks [][][]bool) ([][]float64, error) {
	out := make([][]float64, len(obs))
	err := byLambda(lams, func(l float64, idx []int) error {
		m := masks
		if len(masks) > 1 {
			m = pick(masks, idx)
		}
		lq, err := r.p.LogProbMasks(pick(obs, idx), l, m, posterior.Options{})
		if err != nil {
			return fmt.Errorf("eval: scoring masks: %w", err)
		}
		for k, i := range idx {
			out[i] = lq[k]
		}
		return nil
	})
	return out, err
}
