package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/atomicfile"
)

const selectPhantomSynopsis = "(--checkpoint DIR | --model NAME) --bval FILE --bvec FILE [--per-class N] [--snr S] [--lambda L] [--seed S] [--correct smc] [--json FILE]"

// selectPhantomReport is the --json output.
type selectPhantomReport struct {
	Family   string  `json:"family"`
	Network  string  `json:"network"`
	Protocol string  `json:"protocol"`
	SNR      float64 `json:"snr"`
	Lambda   float64 `json:"lambda"`
	Seed     uint64  `json:"seed"`
	// Correct is the correction of the model posterior ("" for none),
	// with its particles and CorrectAlways (FitSettings).
	Correct          string                  `json:"correct,omitempty"`
	CorrectParticles int                     `json:"correct_particles,omitempty"`
	CorrectAlways    int                     `json:"correct_always,omitempty"`
	CorrectLambda    float64                 `json:"correct_lambda,omitempty"`
	Classes          []dmrifit.PhantomResult `json:"classes"`
	Overall          float64                 `json:"right_overall"`
}

func runDMRISelectPhantom(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dmri select-phantom", selectPhantomSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prism dmri select-phantom %s\n\n%s\n\nFlags:\n", selectPhantomSynopsis,
			"Simulates voxels of known compartments (ball+stick, ball+zeppelin, ball+2 sticks,\n"+
				"tensor only; white-matter-like parameters, Rician noise, b0-normalised) on the\n"+
				"protocol of --bval/--bvec and reports, per class, the fraction whose most\n"+
				"probable model class under the network's q(M | x, λ) is the true one, or\n"+
				"with --correct under the corrected model posterior of `dmri fit --correct`\n"+
				"(docs/dmri.md, \"Model-selection phantom\").")
		fs.PrintDefaults()
	}
	net := addNetFlags(fs, "trained network of a family with ball, stick, zeppelin and tensor compartments (bszt)")
	bval := fs.String("bval", "", "FSL b-values of the protocol to simulate")
	bvec := fs.String("bvec", "", "FSL b-vectors of the protocol to simulate")
	per := fs.Int("per-class", 200, "voxels per phantom class")
	snr := fs.Float64("snr", 40, "signal-to-noise ratio of the b0 signal (Rician noise σ = 1/SNR)")
	lambda := fs.Float64("lambda", 0.3, "model-prior parameter λ of q(M | x, λ)")
	seed := fs.Uint64("seed", 1, "random seed of the phantom")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	fit := dmrifit.DefaultFitSettings()
	fs.StringVar(&fit.Correct, "correct", "none", "classify with the corrected model posterior, as `dmri fit --correct`: none, is or smc")
	fs.IntVar(&fit.CorrectParticles, "correct-particles", 0, "with --correct smc: particles per SMC run, one run per model class and voxel (0: dmrifit.SelectParticles, 64)")
	fs.IntVar(&fit.CorrectAlways, "correct-always", 0, "with --correct: also correct, in every voxel, the models with at most this many active compartments (0: only the classes the network gives ≥ 1 %)")
	fs.Float64Var(&fit.CorrectLambda, "correct-lambda", 0, "with --correct: also correct the classes the network gives ≥ 1 % at this λ (0: off)")
	fs.IntVar(&fit.Samples, "samples", 4, "with --correct: joint samples drawn per voxel (not used by the report)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	switch {
	case !net.given():
		return errNoNetwork
	case *bval == "" || *bvec == "":
		return fmt.Errorf("--bval and --bvec are required (the protocol to simulate)")
	case *per < 1:
		return fmt.Errorf("--per-class %d: want ≥ 1", *per)
	case !(*snr > 0):
		return fmt.Errorf("--snr %v: want > 0", *snr)
	case !(*lambda > 0 && *lambda < 1):
		return fmt.Errorf("--lambda %v: want 0 < λ < 1", *lambda)
	}
	post, err := net.load()
	if err != nil {
		return err
	}
	td, ok := post.Family().(family.TableDesigner)
	if !ok {
		return fmt.Errorf("%s: %s is not a dMRI family", net.source(), post.Family().Name())
	}
	d, err := td.DesignFromTable(*bval, *bvec)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", *bval, *bvec, err)
	}
	fit.Lambda, fit.Seed = *lambda, *seed
	fit = fit.ResolveCorrect(false)
	res, err := dmrifit.SelectionPhantom(post, d, *per, *snr, *lambda, *seed, &fit)
	if err != nil {
		return fmt.Errorf("%s: %w", net.source(), err)
	}
	rep := selectPhantomReport{Family: post.Family().Name(), Network: net.source(), Protocol: *bval, SNR: *snr, Lambda: *lambda, Seed: *seed, Classes: res}
	if fit.Correct != "none" && fit.Correct != "" {
		rep.Correct, rep.CorrectParticles, rep.CorrectAlways, rep.CorrectLambda = fit.Correct, fit.CorrectParticles, fit.CorrectAlways, fit.CorrectLambda
		for _, r := range res {
			fmt.Fprintf(stderr, "%s: --correct %s over %.1f model classes per voxel, failed in %d of %d voxels\n", r.Class, fit.Correct, r.CorrectClasses, r.CorrectFailed, r.N)
		}
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "class\tvoxels\tright (all classes)\tright (phantom classes)\tmean P(true class)\tmost often predicted\n")
	for _, r := range res {
		top, n := "", 0
		for s, k := range r.Predicted {
			if k > n || (k == n && s < top) {
				top, n = s, k
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f ± %.3f\t%.3f\t%.3f\t%s (%d)\n", r.Class, r.N, r.Right, r.RightSE, r.RightAmong, r.MeanProb, top, n)
		rep.Overall += r.Right / float64(len(res))
	}
	fmt.Fprintf(tw, "all\t%d\t%.3f\t\t\t\n", *per*len(res), rep.Overall)
	if err := tw.Flush(); err != nil {
		return err
	}
	if *jsonOut != "" {
		if err := atomicfile.WriteJSON(*jsonOut, rep); err != nil {
			return err
		}
	}
	return nil
}
