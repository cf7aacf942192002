package eval

import (
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

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

// Calibration is the SBC result for masks or parameters.
type Calibration struct {
	// CE is the calibration error of the pooled values, with bootstrap SE
	// over trials.
	CE Value `json:"ce"`
	// Values is the number of pooled SBC values.
	Values int `json:"values"`
	// Band is the CE distribution of a perfectly calibrated posterior at
	// the same N (independent values; for parameters with the discrete
	// ranks of S samples).
	Band Band `json:"band"`
	// Inside reports CE ≤ the band's upper quantile.
	Inside bool `json:"inside_band"`
	// DependentBand (parameters only) keeps the dependence between the
	// pooled PIT values of one trial (SelfConsistentCEBand); InsideDependent
	// compares CE with it.
	DependentBand   *Band `json:"dependent_band,omitempty"`
	InsideDependent *bool `json:"inside_dependent_band,omitempty"`
	// U are the SBC values (for plots).
	U []float64 `json:"-"`
}

// KSDResult summarises kernel Stein discrepancies over observations.
type KSDResult struct {
	Obs      int    `json:"observations"`
	Samples  int    `json:"samples"`
	KSD      Value  `json:"ksd_mean"`
	KSDPrior Value  `json:"ksd_prior_mean"`
	RKSD     Value  `json:"rksd_mean"`
	RKSDMed  Number `json:"rksd_median"`
	// PerObs are the rKSD values (for the histogram).
	PerObs []float64 `json:"-"`
}

// TVPoint is the model-posterior TV distance at one λ.
type TVPoint struct {
	Lambda float64 `json:"lambda"`
	// IS is the TV between q(M|x,λ) and the importance-sampling model
	// posterior, both restricted to each observation's model subset.
	IS Value `json:"tv_is_subset"`
	// Exact is the TV between q(M|x,λ) and the exact model posterior over
	// the whole model space (families with a closed-form evidence).
	Exact *Value `json:"tv_exact,omitempty"`
}

// EvidenceResult summarises importance sampling.
type EvidenceResult struct {
	Obs     int `json:"observations"`
	Samples int `json:"samples"`
	Models  int `json:"model_pairs"`
	// ESS is the mean normalised ESS under the true model, ESSMedian its
	// median, PerObs the values.
	ESS       Value     `json:"ess_mean"`
	ESSMedian Number    `json:"ess_median"`
	PerObs    []float64 `json:"-"`
	// LogEvidenceSE is the mean delta-method SE of log p̂(x|M).
	LogEvidenceSE Number `json:"log_evidence_se_mean"`
	// R2Sets is R² between the evidence estimates of two independent
	// sample sets; R2Proxy between the proxy log q(M|x,λ) − log p(M|λ)
	// and the IS evidence, both centred per observation over its subset;
	// R2Exact between IS and exact evidence (closed-form families).
	R2Sets  Value  `json:"r2_two_sets"`
	R2Proxy Value  `json:"r2_proxy"`
	R2Exact *Value `json:"r2_exact,omitempty"`
	// TV across λ.
	TV []TVPoint `json:"tv"`
}

// PredictiveResult holds predictive RMSEs (paper App. A.1).
type PredictiveResult struct {
	Obs        int   `json:"observations"`
	Samples    int   `json:"samples"`
	Replicates int   `json:"replicates"`
	Local      Value `json:"rmse_local"`
	Global     Value `json:"rmse_global"`
	Floor      Value `json:"rmse_min"`
	RelLocal   Value `json:"rrmse_local"`
	RelGlobal  Value `json:"rrmse_global"`
}

// ClassResult holds the classification view (paper App. B).
type ClassResult struct {
	Models    int   `json:"models"`
	Obs       int   `json:"observations"`
	Top1      Value `json:"top1"`
	Top5      Value `json:"top5"`
	Precision Value `json:"macro_precision"`
	Recall    Value `json:"macro_recall"`
	F1        Value `json:"macro_f1"`
	Classes   int   `json:"classes_present"`
	// BayesTop1 and BayesTop5 are the accuracies of the exact posterior
	// (families with a closed-form evidence): the Bayes-optimal ceiling.
	BayesTop1 *Value      `json:"bayes_top1,omitempty"`
	BayesTop5 *Value      `json:"bayes_top5,omitempty"`
	Labels    []string    `json:"labels"`
	Matrix    [][]float64 `json:"confusion"`
}

// ExactResult holds comparisons with closed-form model posteriors.
type ExactResult struct {
	// Models is the size of the enumerated model space.
	Models int `json:"models"`
	// TV is the mean TV between q(M|x,λ) and the exact p(M|x,λ) over the
	// whole space, at each test observation's own λ.
	TV Value `json:"tv_mean"`
	// TVMedian and TVMax describe its distribution.
	TVMedian Number `json:"tv_median"`
	TVMax    Number `json:"tv_max"`
}

// Report is the result of Run.
type Report struct {
	Family     string            `json:"family"`
	N          int               `json:"n"`
	Seed       uint64            `json:"seed"`
	Lambda     string            `json:"lambda"`
	Settings   Config            `json:"settings"`
	Mask       Calibration       `json:"mask_sbc"`
	Param      Calibration       `json:"param_sbc"`
	KSD        *KSDResult        `json:"ksd,omitempty"`
	Evidence   *EvidenceResult   `json:"evidence,omitempty"`
	Exact      *ExactResult      `json:"exact,omitempty"`
	Predictive *PredictiveResult `json:"predictive,omitempty"`
	Class      *ClassResult      `json:"classification"`
	Seconds    float64           `json:"seconds"`
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
)

func (r *run) seed(stream uint64) uint64 { return r.cfg.Seed*1000003 + stream }

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
	lik := family.HasLikelihood(f)
	if !lik {
		r.progress("KSD, importance sampling and predictive checks skipped: %s has no likelihood (an external simulator)", f.Name())
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

func (r *run) maskSBC(rep *Report) ([]posterior.MaskSet, error) {
	ms, err := r.sampleMasks(r.obs, r.lams, r.cfg.MaskSamples, r.seed(streamMasks))
	if err != nil {
		return nil, err
	}
	truth := make([][][]bool, len(r.obs))
	for i, s := range r.sims {
		truth[i] = [][]bool{s.Mask}
	}
	lq, err := r.logProbMasks(r.obs, r.lams, truth)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(r.seed(streamRank), 1))
	u := make([]float64, len(r.obs))
	ls := make([]float64, r.cfg.MaskSamples)
	for i := range u {
		u[i] = RandomizedRank(rng, lq[i][0], alignTies(ls, lq[i][0], r.sims[i].Mask, ms[i]))
	}
	band, err := UniformCEBand(len(u), 0, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand))
	if err != nil {
		return nil, err
	}
	rep.Mask = r.calibration(u, band, func(idx []int) []float64 { return pick(u, idx) })
	return ms, nil
}

// tieTolerance is the difference in log q below which a sampled mask
// counts as tied with the true mask: the sampler's log q and the
// teacher-forced log q of the same mask agree only to about 10⁻⁴ in
// float32 (docs/posterior.md).
const tieTolerance = 1e-4

// alignTies returns the sampled log q values with ties to the true mask's
// logqTrue made exact: a draw of the true mask itself, or of a mask whose
// log q is within tieTolerance, gets logqTrue. Without this, rounding
// differences between the sampler and teacher forcing would break the
// ties of model SBC in a random direction and make calibrated ranks look
// over-confident (mass at both ends).
func alignTies(dst []float64, logqTrue float64, truth []bool, ms posterior.MaskSet) []float64 {
	dst = dst[:len(ms.LogQ)]
	for s, l := range ms.LogQ {
		if math.Abs(l-logqTrue) <= tieTolerance || slices.Equal(ms.Masks[s], truth) {
			l = logqTrue
		}
		dst[s] = l
	}
	return dst
}

func (r *run) calibration(u []float64, band Band, resample func(idx []int) []float64) Calibration {
	ce := CalibrationError(u)
	se := Bootstrap(len(r.obs), r.cfg.BootReps, r.seed(streamBoot), func(idx []int) float64 {
		return CalibrationError(resample(idx))
	})
	return Calibration{CE: Value{ce, se}, Values: len(u), Band: band, Inside: ce <= band.Upper, U: u}
}

// activeIdx lists the active coordinates of a latent mask.
func activeIdx(a []bool) []int {
	var idx []int
	for j, on := range a {
		if on {
			idx = append(idx, j)
		}
	}
	return idx
}

func (r *run) paramSBC(rep *Report) ([]posterior.ThetaSet, error) {
	S := r.cfg.ThetaSamples
	rows := make([][][]bool, len(r.obs))
	for i, s := range r.sims {
		rows[i] = posterior.Repeat(s.Mask, S)
	}
	so := r.so
	so.Seed = r.seed(streamTheta)
	ts, err := r.p.SampleTheta(r.obs, rows, so)
	if err != nil {
		return nil, fmt.Errorf("eval: parameter samples: %w", err)
	}
	perTrial := make([][]float64, len(r.obs))
	act := make([][][]float64, 0, len(r.obs))
	var u []float64
	col := make([]float64, S)
	for i, s := range r.sims {
		idx := activeIdx(r.active[i])
		if len(idx) == 0 {
			continue
		}
		for _, j := range idx {
			for k := range col {
				col[k] = ts[i].Theta[k][j]
			}
			perTrial[i] = append(perTrial[i], PIT(s.Theta[j], col))
		}
		u = append(u, perTrial[i]...)
		vs := make([][]float64, S)
		for k := range vs {
			vs[k] = pick(ts[i].Theta[k], idx)
		}
		act = append(act, vs)
	}
	if len(u) == 0 {
		return nil, fmt.Errorf("eval: no active parameters in %d test observations", len(r.obs))
	}
	band, err := UniformCEBand(len(u), S, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand)+1)
	if err != nil {
		return nil, err
	}
	rep.Param = r.calibration(u, band, func(idx []int) []float64 {
		var v []float64
		for _, i := range idx {
			v = append(v, perTrial[i]...)
		}
		return v
	})
	dep, err := SelfConsistentCEBand(act, r.cfg.BandReps, r.cfg.Level, r.seed(streamBand)+2)
	if err != nil {
		return nil, err
	}
	in := rep.Param.CE.Value <= dep.Upper
	rep.Param.DependentBand, rep.Param.InsideDependent = &dep, &in
	return ts, nil
}

// score returns the active coordinates of θ and of the score
// ∇θ[log p(x|θ,M) + log p(θ|M)] at θ.
func (r *run) score(i int, theta []float64, idx []int, grad []float64) (x, s []float64) {
	o, m := r.obs[i], r.sims[i].Mask
	clear(grad)
	r.f.LogLikelihood(o.Design, o.X, theta, m, grad)
	x = make([]float64, len(idx))
	s = make([]float64, len(idx))
	for k, j := range idx {
		x[k] = theta[j]
		s[k] = grad[j] - theta[j]
	}
	return x, s
}

func (r *run) ksd(ts []posterior.ThetaSet) (*KSDResult, error) {
	res := &KSDResult{Samples: r.cfg.ThetaSamples}
	dmax := r.f.Layout().DMax
	grad := make([]float64, dmax)
	prior := make([]float64, dmax)
	rng := rand.New(rand.NewPCG(r.seed(streamPrior), 0))
	var ksd, ksdp []float64
	for i := 0; i < r.cfg.KSDObs; i++ {
		idx := activeIdx(r.active[i])
		if len(idx) == 0 {
			continue
		}
		S := len(ts[i].Theta)
		xq, sq := make([][]float64, S), make([][]float64, S)
		xp, sp := make([][]float64, S), make([][]float64, S)
		for k := 0; k < S; k++ {
			xq[k], sq[k] = r.score(i, ts[i].Theta[k], idx, grad)
			for _, j := range idx {
				prior[j] = rng.NormFloat64()
			}
			xp[k], sp[k] = r.score(i, prior, idx, grad)
		}
		kq, _, err := KSD(xq, sq, nil)
		if err != nil {
			return nil, fmt.Errorf("eval: observation %d: %w", i, err)
		}
		kp, _, err := KSD(xp, sp, nil)
		if err != nil {
			return nil, fmt.Errorf("eval: observation %d (prior): %w", i, err)
		}
		ksd = append(ksd, kq)
		ksdp = append(ksdp, kp)
		res.PerObs = append(res.PerObs, kq/kp)
	}
	res.Obs = len(ksd)
	res.KSD.Value, res.KSD.SE = MeanSE(ksd)
	res.KSDPrior.Value, res.KSDPrior.SE = MeanSE(ksdp)
	res.RKSD.Value, res.RKSD.SE = MeanSE(res.PerObs)
	res.RKSDMed = Number(Quantile(res.PerObs, 0.5))
	return res, nil
}

// modelSpace enumerates every mask of positive prior probability when the
// space has at most limit masks (nil otherwise).
func modelSpace(f family.Family, limit int) [][]bool {
	B, M := family.Counts(f)
	size := family.ModelSpaceSize(f)
	if size.Cmp(big.NewInt(int64(limit))) > 0 || B > 30 {
		return nil
	}
	prior := f.MaskPrior()
	var out [][]bool
	for b := 0; b < 1<<B; b++ {
		for nz := 0; nz < M; nz++ {
			m := make([]bool, B+M)
			for k := 0; k < B; k++ {
				m[k] = b>>k&1 == 1
			}
			m[B+nz] = true
			if !math.IsInf(prior.LogProb(m, 0.5), -1) {
				out = append(out, m)
			}
		}
	}
	return out
}

func (r *run) exactTV() (*ExactResult, error) {
	ex := r.f.(family.ExactPosterior)
	space := modelSpace(r.f, 4096)
	if space == nil {
		return nil, nil
	}
	lq, err := r.logProbMasks(r.obs, r.lams, [][][]bool{space})
	if err != nil {
		return nil, err
	}
	prior := r.f.MaskPrior()
	tv := make([]float64, len(r.obs))
	le := make([]float64, len(space))
	for i, o := range r.obs {
		for k, m := range space {
			le[k] = ex.LogEvidence(o.X, m) + prior.LogProb(m, r.lams[i])
		}
		tv[i] = TV(Normalize(lq[i]), Normalize(le))
	}
	res := &ExactResult{Models: len(space), TVMedian: Number(Quantile(tv, 0.5)), TVMax: Number(slices.Max(tv))}
	res.TV.Value, res.TV.SE = MeanSE(tv)
	return res, nil
}

func (r *run) evidence(ms []posterior.MaskSet) (*EvidenceResult, error) {
	cfg := r.cfg
	n := cfg.ISObs
	prior := r.f.MaskPrior()
	// Model subsets: the true mask first, then the most probable distinct
	// sampled masks.
	subsets := make([][][]bool, n)
	var pairObs []posterior.Observation
	var pairMask [][]bool
	var pairOf [][2]int
	for i := 0; i < n; i++ {
		sub := [][]bool{r.sims[i].Mask}
		seen := map[string]bool{family.MaskString(r.sims[i].Mask): true}
		order := make([]int, len(ms[i].Masks))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return ms[i].LogQ[order[a]] > ms[i].LogQ[order[b]] })
		for _, k := range order {
			if len(sub) >= cfg.Subset {
				break
			}
			key := family.MaskString(ms[i].Masks[k])
			if !seen[key] {
				seen[key] = true
				sub = append(sub, ms[i].Masks[k])
			}
		}
		subsets[i] = sub
		for k, m := range sub {
			pairObs = append(pairObs, r.obs[i])
			pairMask = append(pairMask, m)
			pairOf = append(pairOf, [2]int{i, k})
		}
	}
	so := r.so
	so.Seed = r.seed(streamIS1)
	r.progress("importance sampling: %d (observation, model) pairs × %d samples × 2 sets", len(pairObs), cfg.ISSamples)
	is1, err := r.p.ImportanceSample(pairObs, pairMask, cfg.ISSamples, so)
	if err != nil {
		return nil, fmt.Errorf("eval: importance sampling: %w", err)
	}
	so.Seed = r.seed(streamIS2)
	is2, err := r.p.ImportanceSample(pairObs, pairMask, cfg.ISSamples, so)
	if err != nil {
		return nil, fmt.Errorf("eval: importance sampling: %w", err)
	}
	res := &EvidenceResult{Obs: n, Samples: cfg.ISSamples, Models: len(pairObs)}
	ev1 := make([][]float64, n)
	ev2 := make([][]float64, n)
	var seSum float64
	for p, io := range pairOf {
		i := io[0]
		ev1[i] = append(ev1[i], is1[p].LogEvidence)
		ev2[i] = append(ev2[i], is2[p].LogEvidence)
		seSum += is1[p].LogEvidenceSE
		if io[1] == 0 {
			res.PerObs = append(res.PerObs, is1[p].ESS)
		}
	}
	res.LogEvidenceSE = Number(seSum / float64(len(pairOf)))
	res.ESS.Value, res.ESS.SE = MeanSE(res.PerObs)
	res.ESSMedian = Number(Quantile(res.PerObs, 0.5))
	flat := func(v [][]float64, idx []int) []float64 {
		var out []float64
		for _, i := range idx {
			out = append(out, v[i]...)
		}
		return out
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	r2 := func(a, b [][]float64) Value {
		v := R2(flat(a, all), flat(b, all))
		se := Bootstrap(n, cfg.BootReps, r.seed(streamBoot), func(idx []int) float64 { return R2(flat(a, idx), flat(b, idx)) })
		return Value{v, se}
	}
	res.R2Sets = r2(ev1, ev2)

	// Evidence proxy log q(M|x,λ) − log p(M|λ), centred per observation.
	lqs, err := r.logProbMasks(r.obs[:n], r.lams[:n], subsets)
	if err != nil {
		return nil, err
	}
	proxy := make([][]float64, n)
	evc := make([][]float64, n)
	for i := 0; i < n; i++ {
		for k, m := range subsets[i] {
			proxy[i] = append(proxy[i], lqs[i][k]-prior.LogProb(m, r.lams[i]))
		}
		proxy[i] = centre(proxy[i])
		evc[i] = centre(ev1[i])
	}
	res.R2Proxy = r2(proxy, evc)

	if ex, ok := r.f.(family.ExactPosterior); ok {
		exact := make([][]float64, n)
		for i := 0; i < n; i++ {
			for _, m := range subsets[i] {
				exact[i] = append(exact[i], ex.LogEvidence(r.obs[i].X, m))
			}
		}
		v := r2(ev1, exact)
		res.R2Exact = &v
	}

	// TV across λ.
	var space [][]bool
	if _, ok := r.f.(family.ExactPosterior); ok {
		space = modelSpace(r.f, 4096)
	}
	for _, l := range cfg.TVLambdas {
		lams := make([]float64, n)
		for i := range lams {
			lams[i] = l
		}
		lq, err := r.logProbMasks(r.obs[:n], lams, subsets)
		if err != nil {
			return nil, err
		}
		tv := make([]float64, n)
		for i := 0; i < n; i++ {
			lp := make([]float64, len(subsets[i]))
			for k, m := range subsets[i] {
				lp[k] = ev1[i][k] + prior.LogProb(m, l)
			}
			tv[i] = TV(Normalize(lq[i]), Normalize(lp))
		}
		pt := TVPoint{Lambda: l}
		pt.IS.Value, pt.IS.SE = MeanSE(tv)
		if space != nil {
			ex := r.f.(family.ExactPosterior)
			lqAll, err := r.p.LogProbMasks(r.obs[:n], l, [][][]bool{space}, posterior.Options{})
			if err != nil {
				return nil, fmt.Errorf("eval: scoring masks: %w", err)
			}
			tve := make([]float64, n)
			le := make([]float64, len(space))
			for i := 0; i < n; i++ {
				for k, m := range space {
					le[k] = ex.LogEvidence(r.obs[i].X, m) + prior.LogProb(m, l)
				}
				tve[i] = TV(Normalize(lqAll[i]), Normalize(le))
			}
			var v Value
			v.Value, v.SE = MeanSE(tve)
			pt.Exact = &v
		}
		res.TV = append(res.TV, pt)
	}
	return res, nil
}

func centre(x []float64) []float64 {
	m := mean(x)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - m
	}
	return out
}

func (r *run) predictive(ts []posterior.ThetaSet) (*PredictiveResult, error) {
	cfg := r.cfg
	n := cfg.PredObs
	res := &PredictiveResult{Obs: n, Samples: cfg.PredSamples, Replicates: cfg.Replicates}
	so := r.so
	so.Seed = r.seed(streamPred)
	js := make([]posterior.JointSet, n)
	err := byLambda(r.lams[:n], func(l float64, idx []int) error {
		for _, i := range idx {
			so.Offset = uint64(i)
			// Masks from q restricted to the prior's support: the
			// family cannot simulate the others.
			ms, err := r.p.SampleMasksSupported(r.obs[i:i+1], l, cfg.PredSamples, so.Options)
			if err != nil {
				return fmt.Errorf("eval: global predictive: %w", err)
			}
			th, err := r.p.SampleTheta(r.obs[i:i+1], ms, so)
			if err != nil {
				return fmt.Errorf("eval: global predictive: %w", err)
			}
			js[i] = posterior.JointSet{MaskSet: posterior.MaskSet{Masks: ms[0]}, Theta: th[0].Theta}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	local := make([]float64, n)
	global := make([]float64, n)
	floor := make([]float64, n)
	for i := 0; i < n; i++ {
		rng := family.SampleRNG(r.seed(streamPred), uint64(i))
		d, x := r.obs[i].Design, r.obs[i].X
		out := make([]float64, d.N)
		mse := func(theta []float64, m []bool) float64 {
			r.f.Simulate(rng, d, theta, m, out)
			s := 0.0
			for j := range out {
				s += (out[j] - x[j]) * (out[j] - x[j])
			}
			return s / float64(d.N)
		}
		for _, th := range ts[i].Theta {
			local[i] += mse(th, r.sims[i].Mask) / float64(len(ts[i].Theta))
		}
		for k, th := range js[i].Theta {
			global[i] += mse(th, js[i].Masks[k]) / float64(len(js[i].Theta))
		}
		for k := 0; k < cfg.Replicates; k++ {
			floor[i] += mse(r.sims[i].Theta, r.sims[i].Mask) / float64(cfg.Replicates)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	val := func(f func(idx []int) float64) Value {
		return Value{f(all), Bootstrap(n, cfg.BootReps, r.seed(streamBoot), f)}
	}
	res.Local = val(func(idx []int) float64 { return RMSE(pick(local, idx)) })
	res.Global = val(func(idx []int) float64 { return RMSE(pick(global, idx)) })
	res.Floor = val(func(idx []int) float64 { return RMSE(pick(floor, idx)) })
	res.RelLocal = val(func(idx []int) float64 { return RMSE(pick(local, idx)) - RMSE(pick(floor, idx)) })
	res.RelGlobal = val(func(idx []int) float64 { return RMSE(pick(global, idx)) - RMSE(pick(floor, idx)) })
	return res, nil
}

// classSpace returns the classification subspace: every mask when the
// model space has at most k masks, else k distinct masks drawn from
// p(M | λ) at the run's λ (each at its own λ ~ U(0,1) when λ is random):
// the subspace test's (DrawSubspace, SubspaceClassify).
func (r *run) classSpace(k int) ([][]bool, error) {
	return DrawSubspace(r.f, k, r.cfg.Lambda, r.seed(streamClassSpace))
}

func (r *run) classify() (*ClassResult, error) {
	cfg := r.cfg
	space, err := r.classSpace(cfg.ClassModels)
	if err != nil {
		return nil, err
	}
	n := cfg.N
	obs, lams, truth, err := subspaceData(r.f, space, n, cfg.Lambda, r.seed(streamClassData))
	if err != nil {
		return nil, err
	}
	r.progress("classification: scoring %d models for %d observations", len(space), n)
	scores, err := r.logProbMasks(obs, lams, [][][]bool{space})
	if err != nil {
		return nil, err
	}
	pred := make([]int, n)
	for i, s := range scores {
		best := 0
		for c, v := range s {
			if v > s[best] {
				best = c
			}
		}
		pred[i] = best
	}
	cm, err := Confusion(truth, pred, len(space))
	if err != nil {
		return nil, err
	}
	res := &ClassResult{Models: len(space), Obs: n, Matrix: cm}
	for _, m := range space {
		res.Labels = append(res.Labels, family.MaskString(m))
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	val := func(f func(idx []int) float64) Value {
		return Value{f(all), Bootstrap(n, cfg.BootReps, r.seed(streamBoot), f)}
	}
	res.Top1 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truth, idx), 1) })
	res.Top5 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truth, idx), 5) })
	macro := func(idx []int) Scores {
		cm, _ := Confusion(pick(truth, idx), pick(pred, idx), len(space))
		return MacroScores(cm)
	}
	res.Precision = val(func(idx []int) float64 { return macro(idx).Precision })
	res.Recall = val(func(idx []int) float64 { return macro(idx).Recall })
	res.F1 = val(func(idx []int) float64 { return macro(idx).F1 })
	res.Classes = MacroScores(cm).Classes
	if ex, ok := r.f.(family.ExactPosterior); ok {
		prior := r.f.MaskPrior()
		exact := make([][]float64, n)
		for i := range exact {
			exact[i] = make([]float64, len(space))
			for c, m := range space {
				exact[i][c] = ex.LogEvidence(obs[i].X, m) + prior.LogProb(m, lams[i])
			}
		}
		t1 := val(func(idx []int) float64 { return TopKAccuracy(pick(exact, idx), pick(truth, idx), 1) })
		t5 := val(func(idx []int) float64 { return TopKAccuracy(pick(exact, idx), pick(truth, idx), 5) })
		res.BayesTop1, res.BayesTop5 = &t1, &t5
	}
	return res, nil
}
