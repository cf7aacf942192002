package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/eval"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/posterior"
)

func init() {
	register("eval", "evaluation suite on fresh simulations: SBC, KSD, ESS, evidence, TV, classification (report.json, summary.csv, figures)", runEval)
}

func runEval(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval", "(--checkpoint DIR | --model NAME) --n N --seed S --out DIR [--lambda L|random] [--correct is|smc [--correct-obs N]]\n       prism eval --subspace (--checkpoint DIR | --model NAME) [--n 300] [--class-models 200] --seed S --out DIR [--lambda L,…|random]", stderr)
	net := addNetFlags(fs, "trained network")
	n := fs.Int("n", 1000, "test observations for SBC and classification")
	seed := fs.Uint64("seed", 1, "random seed of the test data and of every sampler; the same seed gives the same report")
	out := fs.String("out", "", "output directory (report.json, summary.csv, PNG figures)")
	lambda := fs.String("lambda", "random", "complexity knob λ ∈ [0, 1] of the test data and of q(M|x,λ), or \"random\" (λ ~ U(0,1) per observation)")
	maskS := fs.Int("mask-samples", 256, "masks drawn per observation for model SBC")
	thetaS := fs.Int("theta-samples", 100, "parameter samples per observation for parameter SBC, KSD and the local predictive")
	ksdObs := fs.Int("ksd-obs", 100, "observations with KSD/rKSD (0: skip)")
	isObs := fs.Int("is-obs", 100, "observations with importance sampling (ESS, evidence, TV; 0: skip)")
	isS := fs.Int("is-samples", 256, "importance samples per (observation, model) and set")
	subset := fs.Int("subset", 8, "models per observation for the evidence and TV comparisons")
	classModels := fs.Int("class-models", 0, "size of the classification subspace (0: 200, or 50 for dMRI families)")
	predObs := fs.Int("pred-obs", 100, "observations with predictive RMSE (0: skip)")
	steps := fs.Int("steps", posterior.DefaultSteps, "ODE solver steps of the parameter sampler")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	cf := addCorrectFlags(fs)
	correctObs := fs.Int("correct-obs", 200, "with --correct (without --subspace): observations of the corrected parameter SBC, the first of the --n (the network's posterior corrected under each one's true model)")
	subspace := fs.Bool("subspace", false, "only the paper's subspace classification test: a --class-models subspace drawn from p(M|λ), --n observations from its models, ranked by q(M|x,λ); --lambda may list several values (\"0.3,random\"); writes subspace.json and subspace.csv")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !net.given() {
		return errNoNetwork
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	if !*subspace {
		// Without --subspace a correction is of the true model only (the
		// corrected parameter SBC): no candidates to prune.
		for _, f := range []string{"correct-min-q", "correct-max-models"} {
			if set[f] {
				return fmt.Errorf("--%s applies to --subspace only", f)
			}
		}
	} else if set["correct-obs"] {
		return errors.New("--correct-obs applies without --subspace only (the corrected parameter SBC)")
	}
	if *subspace {
		return runSubspace(net, cf, *lambda, *n, *classModels, *seed, *out, *quiet, set, stderr)
	}
	lam := math.NaN()
	if *lambda != "random" {
		v, err := strconv.ParseFloat(*lambda, 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return fmt.Errorf("--lambda %q: want a number in [0, 1] or \"random\"", *lambda)
		}
		lam = v
	}
	if *n < 2 || *maskS < 1 || *thetaS < 2 || *isS < 2 || *subset < 1 || *steps < 1 ||
		*ksdObs < 0 || *isObs < 0 || *predObs < 0 || *correctObs < 1 || *classModels < 0 || *classModels == 1 {
		return errors.New("need --n ≥ 2, --mask-samples ≥ 1, --theta-samples ≥ 2, --is-samples ≥ 2, --subset ≥ 1, --steps ≥ 1, non-negative observation counts, --correct-obs ≥ 1, --class-models 0 or ≥ 2")
	}
	cs, err := cf.settings(posterior.SampleOptions{Steps: *steps})
	if err != nil {
		return err
	}
	if set["correct-obs"] && cs.Method == correct.None {
		return errors.New("--correct-obs needs --correct is or smc")
	}
	p, err := net.load()
	if err != nil {
		return err
	}
	// Each test observation keeps its mask draws and parameter samples
	// (measured with lingauss-k6 at the defaults: 336 kB per observation
	// of peak resident memory; this estimate gives 512 kB).
	perObs := float64(*maskS)*p.MaskDrawBytes() + float64(*thetaS)*p.JointSampleBytes()
	if err := memlimit.Check("--n", int64(*n), 0, perObs, memlimit.Available()); err != nil {
		return err
	}
	cfg := eval.Config{N: *n, Seed: *seed, Lambda: lam, MaskSamples: *maskS, ThetaSamples: *thetaS,
		KSDObs: *ksdObs, ISObs: *isObs, ISSamples: *isS, Subset: *subset, ClassModels: *classModels,
		PredObs: *predObs, Steps: *steps, Correct: cs, CorrectObs: *correctObs}
	// Zero means "skip" on the command line but "default" in Config.
	skip := func(v *int, flag int) {
		if flag == 0 {
			*v = -1
		}
	}
	skip(&cfg.KSDObs, *ksdObs)
	skip(&cfg.ISObs, *isObs)
	skip(&cfg.PredObs, *predObs)
	if !*quiet {
		cfg.Progress = stderr
	}
	rep, err := eval.Run(p, cfg)
	if err != nil {
		return err
	}
	lock, err := dirlock.Acquire(*out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := rep.WriteDir(*out); err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "wrote %s/report.json, summary.csv and figures (%.0f s)\n", *out, rep.Seconds)
	}
	return nil
}
