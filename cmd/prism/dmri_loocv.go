package main

import (
	"fmt"
	"io"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/posterior"
)

const loocvSynopsis = "--dwi FILE --bval FILE --bvec FILE [--mask FILE] [--checkpoint DIR | --model NAME] --out DIR [--volumes K] [--samples N]"

const loocvAbout = `Leave-one-volume-out cross-validation of the signal prediction (paper
Fig. 5b): each of K diffusion-weighted volumes (evenly spread; b0 volumes
are never held out, they normalise the signal) is left out in turn, the
methods are fitted to the remaining volumes, and they predict the left-out
b0-normalised signal. Methods: the diffusion tensor (package dti, OLS + WLS)
always; with --checkpoint/--model also the network's model-averaged
posterior predictive (M ~ q(M | x, λ), θ ~ q(θ | M, x); with --correct,
of the corrected posterior as in ` + "`dmri fit --correct`" + `). Writes per-voxel
LOOCV RMSE maps loo_rmse_dti and loo_rmse_network, wm_mask (FA ≥ --fa-wm of
the full-data tensor fit), loocv.json (median and mean over all and over
white-matter voxels, the share of voxels where the network is better) and
run.json.`

func runDMRILOOCV(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dmri loocv", loocvSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prism dmri loocv %s\n\n%s\n\nFlags:\n", loocvSynopsis, loocvAbout)
		fs.PrintDefaults()
	}
	var files dmrifit.ScanFiles
	scanFileFlags(fs, &files)
	net := addNetFlags(fs, "trained dMRI network to cross-validate besides the tensor (optional)")
	out := fs.String("out", "", "output folder (created if needed)")
	def := dmrifit.DefaultNetworkLOOSettings()
	set := def
	volumes := fs.Int("volumes", 16, "diffusion-weighted volumes held out in turn, evenly spread (0: all)")
	wls := fs.Int("wls-iter", dti.DefaultWLSIterations, "WLS iterations of the tensor fit after OLS")
	faWM := fs.Float64("fa-wm", 0.3, "white matter: voxels whose full-data tensor FA is at least this")
	fs.Float64Var(&set.Lambda, "lambda", def.Lambda, "model-prior parameter λ of q(M | x, λ)")
	fs.IntVar(&set.Samples, "samples", def.Samples, "joint posterior samples per voxel and held-out volume")
	fs.IntVar(&set.Steps, "steps", def.Steps, "probability-flow ODE steps per sample")
	fs.StringVar(&set.Solver, "solver", def.Solver, "ODE solver: ab2, heun or dpm2m")
	fs.Uint64Var(&set.Seed, "seed", def.Seed, "random seed")
	fs.IntVar(&set.BatchSize, "batch", def.BatchSize, "voxels per network call (results do not depend on it)")
	fs.StringVar(&set.Correct, "correct", "none", "model-selection networks (bszt, …): predict from the corrected posterior, as `dmri fit --correct`: none, is or smc")
	fs.IntVar(&set.CorrectParticles, "correct-particles", 0, "with --correct smc: particles per SMC run (0: as `dmri fit`)")
	fs.IntVar(&set.CorrectAlways, "correct-always", 0, "with --correct: also correct, in every voxel, the models with at most this many active compartments")
	fs.Float64Var(&set.CorrectLambda, "correct-lambda", 0, "with --correct: also correct the classes the network gives ≥ 1 % at this λ (0: off)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkScanArgs(fs, files, *out); err != nil {
		return err
	}
	if err := checkInputsExist(files, *net.checkpoint); err != nil {
		return err
	}
	switch {
	case *volumes < 0:
		return fmt.Errorf("--volumes %d: want ≥ 0", *volumes)
	case *wls < 0:
		return fmt.Errorf("--wls-iter %d: want ≥ 0", *wls)
	case !(*faWM >= 0 && *faWM <= 1):
		return fmt.Errorf("--fa-wm %v: want 0 ≤ FA ≤ 1", *faWM)
	case !(set.Lambda > 0 && set.Lambda < 1):
		return fmt.Errorf("--lambda %v: want 0 < λ < 1", set.Lambda)
	case set.Samples < 1 || set.Steps < 1 || set.BatchSize < 1:
		return fmt.Errorf("--samples, --steps and --batch must be ≥ 1")
	case set.Correct != "none" && !net.given():
		return fmt.Errorf("--correct %s needs a network (--checkpoint or --model)", set.Correct)
	case set.Correct == "none" && (set.CorrectLambda != 0 || set.CorrectAlways != 0 || set.CorrectParticles != 0):
		return fmt.Errorf("--correct-lambda, --correct-always and --correct-particles need --correct smc or is")
	}
	if set.Correct == "none" {
		set.Correct = "" // run.json records a correction only when there is one
	}

	start := time.Now()
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	nv := len(scan.Voxels)
	if nv == 0 {
		return fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", files.DWI, scan.MaskCount(), scan.MaskSource, dmrifit.SkipSummary(scan.Skipped))
	}
	held := dmrifit.HeldOutVolumes(scan.Design, *volumes)
	if len(held) == 0 {
		return fmt.Errorf("%s: no diffusion-weighted volume to hold out", files.Bval)
	}
	settings := dmrifit.LOOCVSettings{Volumes: len(held), WLS: *wls, FAWM: *faWM}
	if net.given() {
		post, err := net.load()
		if err != nil {
			return err
		}
		settings.Network, settings.Checkpoint, settings.Model = &set, *net.checkpoint, *net.model
		settings.Family, settings.WeightsSHA = post.Family().Name(), dmrifit.WeightsHash(post)
		return runLOOCV(scan, held, settings, post, *out, *quiet, start, stderr)
	}
	return runLOOCV(scan, held, settings, nil, *out, *quiet, start, stderr)
}

// runLOOCV runs dmrifit.RunLOOCV with the command's log and progress.
func runLOOCV(scan *dmrifit.Scan, held []int, set dmrifit.LOOCVSettings, post *posterior.Posterior, out string, quiet bool, start time.Time, stderr io.Writer) error {
	ctx, stop := interruptContext(stderr, "dmri loocv: stopping; nothing is written")
	defer stop()
	cfg := dmrifit.LOOCVConfig{Tool: "prism dmri loocv", Version: prismVersion(), Out: out, Log: stderr, Started: start}
	if !quiet {
		cfg.Progress = progress.To(stderr, "voxels")
	}
	_, err := dmrifit.RunLOOCV(ctx, scan, held, set, post, cfg)
	return err
}
