package eval

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/posterior"
)

// SubspaceConfig sets the classification test on a random model subspace
// (paper App. B, "Classifier perspective"; issue 21). Zero fields take the
// defaults in brackets.
type SubspaceConfig struct {
	// Models is the size of the subspace [200]. When the family has at
	// most Models masks of positive prior probability, the subspace is the
	// whole model space.
	Models int
	// Obs is the number of simulated test observations [300].
	Obs int
	// Lambda is the complexity knob: the subspace is drawn from p(M | λ)
	// and q(M | x, λ) ranks it. NaN means λ ~ U(0, 1): every subspace mask
	// is drawn at its own uniform λ (so the subspace follows the marginal
	// prior p(M)), and every observation is ranked at its own uniform λ.
	Lambda float64
	// Seed fixes the subspace, the test data and the bootstrap.
	Seed uint64
	// BootReps is the number of bootstrap resamples for the standard
	// errors [200].
	BootReps int
	// Progress, if non-nil, receives one line per stage.
	Progress io.Writer `json:"-"`
}

// SubspaceResult is the outcome of the subspace classification test.
type SubspaceResult struct {
	Family string `json:"family"`
	// Lambda is the λ of the test, or "random".
	Lambda string `json:"lambda"`
	Seed   uint64 `json:"seed"`
	Models int    `json:"models"`
	Obs    int    `json:"observations"`
	// Top1 and Top5 are the fractions of observations whose true model is
	// ranked first / among the five best of the subspace by the scores.
	Top1 Value `json:"top1"`
	Top5 Value `json:"top5"`
	// MeanRank is the mean rank (1 = best) of the true model.
	MeanRank Value `json:"mean_rank"`
	// Macro precision, recall and F1 of the arg-max classifier over the
	// classes present among the true labels (Classes of them).
	Precision Value `json:"macro_precision"`
	Recall    Value `json:"macro_recall"`
	F1        Value `json:"macro_f1"`
	Classes   int   `json:"classes_present"`
	// BayesTop1 and BayesTop5 rank the subspace by the exact posterior
	// p(x | M) p(M | λ) (families with a closed-form evidence): what a
	// perfect q(M | x, λ) scores in this test.
	BayesTop1 *Value `json:"bayes_top1,omitempty"`
	BayesTop5 *Value `json:"bayes_top5,omitempty"`
	// Correction, with the likelihood correction (SubspaceCorrected),
	// counts its failures: a ranking built on failed corrections is not
	// exact, whatever its accuracy.
	Correction *SubspaceCorrection `json:"correction,omitempty"`
	// Labels are the subspace's masks (family.MaskString), Matrix the
	// confusion matrix of the arg-max classifier (rows: true model).
	Labels []string    `json:"labels"`
	Matrix [][]float64 `json:"confusion"`
	// Ranks is the rank (1 = best) of each observation's true model, in
	// the order the observations were simulated: the whole top-k curve
	// (how many more would a top-10 or a correction of q's top 20 catch).
	Ranks   []int   `json:"ranks"`
	Seconds float64 `json:"seconds"`

	// truth and scores are kept for tests.
	truth  []int
	scores [][]float64
}

// MaskScorer returns, for each observation i, a score of every mask of
// space (larger: more probable) at the observation's λ (lams[i]).
type MaskScorer func(obs []posterior.Observation, lams []float64, space [][]bool) ([][]float64, error)

func (c *SubspaceConfig) defaults() error {
	if c.Models == 0 {
		c.Models = 200
	}
	if c.Obs == 0 {
		c.Obs = 300
	}
	if c.BootReps == 0 {
		c.BootReps = 200
	}
	if c.Models < 2 || c.Obs < 1 || c.BootReps < 2 {
		return fmt.Errorf("eval: subspace test needs at least 2 models, 1 observation and 2 bootstrap resamples (have %d, %d, %d)", c.Models, c.Obs, c.BootReps)
	}
	if !math.IsNaN(c.Lambda) && !(c.Lambda >= 0 && c.Lambda <= 1) {
		return fmt.Errorf("eval: λ = %v outside [0, 1]", c.Lambda)
	}
	return nil
}

// Subspace runs the subspace classification test with the network's model
// posterior: a subspace of cfg.Models distinct masks drawn from p(M | λ),
// cfg.Obs observations each simulated from a uniformly chosen subspace
// model (parameters from the prior, design from the family's default
// mix), and the subspace ranked by the exact log q(M | x, λ) of every
// mask (teacher forcing). It is deterministic given cfg.
func Subspace(p *posterior.Posterior, cfg SubspaceConfig) (*SubspaceResult, error) {
	return SubspaceClassify(p.Family(), qScorer(p), cfg)
}

// qScorer scores every subspace mask by the network's exact log q(M | x,
// λ) at each observation's λ.
func qScorer(p *posterior.Posterior) MaskScorer {
	return func(obs []posterior.Observation, lams []float64, space [][]bool) ([][]float64, error) {
		out := make([][]float64, len(obs))
		err := byLambda(lams, func(l float64, idx []int) error {
			lq, err := p.LogProbMasks(pick(obs, idx), l, [][][]bool{space}, posterior.Options{})
			if err != nil {
				return fmt.Errorf("eval: scoring the subspace: %w", err)
			}
			for k, i := range idx {
				out[i] = lq[k]
			}
			return nil
		})
		return out, err
	}
}

// SubspaceClassify runs the subspace classification test of Subspace with
// any scorer of masks (the network's log q, or an exact posterior).
func SubspaceClassify(f family.Family, score MaskScorer, cfg SubspaceConfig) (*SubspaceResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	progress := func(format string, a ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
		}
	}
	res, err := classifySubspace(f, score, classTest{Models: cfg.Models, Obs: cfg.Obs, Lambda: cfg.Lambda, Seed: cfg.Seed,
		BootReps: cfg.BootReps, Stage: "subspace test"}, progress)
	if err != nil {
		return nil, err
	}
	res.Family, res.Seed, res.Lambda = f.Name(), cfg.Seed, "random"
	if !math.IsNaN(cfg.Lambda) {
		res.Lambda = fmt.Sprint(cfg.Lambda)
	}
	res.Seconds = time.Since(start).Seconds()
	progress("subspace test (λ %s): top-1 %.3f ± %.3f, top-5 %.3f ± %.3f over %d models, %d observations",
		res.Lambda, res.Top1.Value, res.Top1.SE, res.Top5.Value, res.Top5.SE, res.Models, res.Obs)
	return res, nil
}

// classTest sets one run of the classification test; Run's classification
// (Config.ClassModels, N) and SubspaceClassify are the same test with the
// same random streams (streamSeed), so that `prism eval` and the
// stand-alone test agree.
type classTest struct {
	Models, Obs int
	Lambda      float64 // NaN: λ ~ U(0, 1) per mask and per observation
	Seed        uint64  // the run's seed
	BootReps    int
	Stage       string // names the test in progress lines
}

// classifySubspace draws the subspace (DrawSubspace), simulates the test
// observations from it (subspaceData), scores every mask with score and
// returns the classification figures (subspaceMetrics) with their labels
// and, for families with a closed-form evidence, the accuracies of the
// exact posterior.
func classifySubspace(f family.Family, score MaskScorer, c classTest, progress func(format string, a ...any)) (*SubspaceResult, error) {
	space, err := DrawSubspace(f, c.Models, c.Lambda, streamSeed(c.Seed, streamClassSpace))
	if err != nil {
		return nil, err
	}
	obs, lams, truth, err := subspaceData(f, space, c.Obs, c.Lambda, streamSeed(c.Seed, streamClassData))
	if err != nil {
		return nil, err
	}
	progress("%s: scoring %d models for %d observations", c.Stage, len(space), len(obs))
	scores, err := score(obs, lams, space)
	if err != nil {
		return nil, err
	}
	boot := streamSeed(c.Seed, streamBoot)
	res, err := subspaceMetrics(scores, truth, len(space), c.BootReps, boot)
	if err != nil {
		return nil, err
	}
	for _, m := range space {
		res.Labels = append(res.Labels, family.MaskString(m))
	}
	if ex, ok := f.(family.ExactPosterior); ok {
		prior := f.MaskPrior()
		exact := make([][]float64, len(obs))
		for i := range exact {
			exact[i] = make([]float64, len(space))
			for k, m := range space {
				exact[i][k] = ex.LogEvidence(obs[i].X, m) + prior.LogProb(m, lams[i])
			}
		}
		b, err := subspaceMetrics(exact, truth, len(space), c.BootReps, boot)
		if err != nil {
			return nil, err
		}
		res.BayesTop1, res.BayesTop5 = &b.Top1, &b.Top5
	}
	return res, nil
}

// DrawSubspace returns k distinct masks of positive prior probability:
// the whole model space when it has at most k masks, else k masks drawn
// from p(M | λ) (λ NaN: each at its own λ ~ U(0, 1)), duplicates redrawn.
func DrawSubspace(f family.Family, k int, lambda float64, seed uint64) ([][]bool, error) {
	if all := modelSpace(f, k); all != nil {
		return all, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	C := len(f.Components())
	prior := f.MaskPrior()
	seen := map[string]bool{}
	var out [][]bool
	for tries := 0; len(out) < k; tries++ {
		if tries > 1000*k {
			return nil, fmt.Errorf("eval: p(M | λ = %v) gave only %d distinct masks in %d draws for a %d-model subspace", lambda, len(out), tries, k)
		}
		l := lambda
		if math.IsNaN(l) {
			l = rng.Float64()
		}
		m := make([]bool, C)
		prior.Sample(rng, l, m)
		if key := family.MaskString(m); !seen[key] {
			seen[key] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// subspaceData simulates n observations, observation i from the subspace
// model truth[i] (uniform), with θ ~ N(0, I) in the latent space and a
// design from the family's default mix, each from its own generator.
func subspaceData(f family.Family, space [][]bool, n int, lambda float64, seed uint64) ([]posterior.Observation, []float64, []int, error) {
	ds, err := f.Designs("")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("eval: designs: %w", err)
	}
	dmax := f.Layout().DMax
	obs := make([]posterior.Observation, n)
	lams := make([]float64, n)
	truth := make([]int, n)
	for i := range obs {
		rng := family.SampleRNG(seed, uint64(i))
		lams[i] = lambda
		if math.IsNaN(lambda) {
			lams[i] = rng.Float64()
		}
		truth[i] = rng.IntN(len(space))
		theta := make([]float64, dmax)
		for j := range theta {
			theta[j] = rng.NormFloat64()
		}
		d := ds.SampleDesign(rng)
		x := make([]float64, d.N)
		f.Simulate(rng, d, theta, space[truth[i]], x)
		obs[i] = posterior.Observation{Design: d, X: x}
	}
	return obs, lams, truth, nil
}

// rankOf returns the rank (1 = best) of class t among scores s, ties
// broken towards the lower index as in TopKAccuracy.
func rankOf(s []float64, t int) int {
	better := 0
	for c, v := range s {
		if v > s[t] || (v == s[t] && c < t) {
			better++
		}
	}
	return better + 1
}

// subspaceMetrics computes the classification figures with bootstrap
// standard errors from scores[i][c] and the true classes.
func subspaceMetrics(scores [][]float64, truth []int, k, boot int, seed uint64) (*SubspaceResult, error) {
	n := len(scores)
	if n != len(truth) {
		return nil, fmt.Errorf("eval: %d score rows for %d observations", n, len(truth))
	}
	pred := make([]int, n)
	ranks := make([]int, n)
	for i, s := range scores {
		if len(s) != k {
			return nil, fmt.Errorf("eval: observation %d has %d scores for %d models", i, len(s), k)
		}
		for c, v := range s {
			if math.IsNaN(v) {
				return nil, fmt.Errorf("eval: observation %d: score of model %d is NaN", i, c)
			}
			if v > s[pred[i]] {
				pred[i] = c
			}
		}
		ranks[i] = rankOf(s, truth[i])
	}
	cm, err := Confusion(truth, pred, k)
	if err != nil {
		return nil, err
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	val := func(f func(idx []int) float64) Value {
		return Value{f(all), Bootstrap(n, boot, seed, f)}
	}
	macro := func(idx []int) Scores {
		cm, _ := Confusion(pick(truth, idx), pick(pred, idx), k)
		return MacroScores(cm)
	}
	res := &SubspaceResult{Models: k, Obs: n, Matrix: cm, Ranks: ranks, truth: truth, scores: scores}
	res.Top1 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truth, idx), 1) })
	res.Top5 = val(func(idx []int) float64 { return TopKAccuracy(pick(scores, idx), pick(truth, idx), 5) })
	res.MeanRank = val(func(idx []int) float64 {
		s := 0.0
		for _, i := range idx {
			s += float64(ranks[i])
		}
		return s / float64(len(idx))
	})
	res.Precision = val(func(idx []int) float64 { return macro(idx).Precision })
	res.Recall = val(func(idx []int) float64 { return macro(idx).Recall })
	res.F1 = val(func(idx []int) float64 { return macro(idx).F1 })
	res.Classes = MacroScores(cm).Classes
	return res, nil
}

// WriteSubspace writes the results of subspace tests into dir (created if
// needed): subspace.json (the results, confusion matrices included) and
// subspace.csv (long format metric,value,se,setting with setting
// "lambda=…"), each atomically.
func WriteSubspace(dir string, results []*SubspaceResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "subspace.json"), results); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, "subspace.csv"), func(w *bufio.Writer) error {
		fmt.Fprintln(w, "metric,value,se,setting")
		for _, r := range results {
			set := "lambda=" + r.Lambda
			for _, m := range []struct {
				name string
				v    Value
			}{{"top1", r.Top1}, {"top5", r.Top5}, {"mean_rank", r.MeanRank}, {"macro_precision", r.Precision},
				{"macro_recall", r.Recall}, {"macro_f1", r.F1}} {
				fmt.Fprintf(w, "%s,%g,%g,%s\n", m.name, m.v.Value, m.v.SE, set)
			}
			if c := r.Correction; c != nil && c.Obs > 0 {
				fmt.Fprintf(w, "correction_failed_models,%g,,%s\n", float64(c.FailedModels)/float64(c.Models), set)
				fmt.Fprintf(w, "correction_failed_observations,%g,,%s\n", float64(c.FailedObs)/float64(c.Obs), set)
			}
			if r.BayesTop1 != nil {
				fmt.Fprintf(w, "bayes_top1,%g,%g,%s\n", r.BayesTop1.Value, r.BayesTop1.SE, set)
				fmt.Fprintf(w, "bayes_top5,%g,%g,%s\n", r.BayesTop5.Value, r.BayesTop5.SE, set)
			}
		}
		return nil
	})
}
