package main

import (
	"io"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/progress"
)

// runDMRIFit is `prism dmri fit`: flags over dmrifit.Run.
func runDMRIFit(args []string, stdout, stderr io.Writer) error {
	def := dmrifit.DefaultFitSettings()
	fs := newFlagSet("dmri fit", "--dwi FILE --bval FILE --bvec FILE [--mask FILE] (--checkpoint DIR | --model NAME) --out DIR [--lambda L] [--samples N]", stderr)
	var files dmrifit.ScanFiles
	scanFileFlags(fs, &files)
	net := addNetFlags(fs, "trained dMRI network: a ball-and-sticks family (b3s) for BedpostX-style maps, or another dMRI family (bszt) for model-selection maps")
	out := fs.String("out", "", "output folder (BedpostX layout, prism maps, run.json)")
	s := def
	fs.Float64Var(&s.Lambda, "lambda", def.Lambda, "model-prior parameter λ of q(M | x, λ)")
	fs.IntVar(&s.Samples, "samples", def.Samples, "joint posterior samples per voxel (model, then parameters)")
	fs.IntVar(&s.Steps, "steps", def.Steps, "probability-flow ODE steps per sample")
	fs.StringVar(&s.Solver, "solver", def.Solver, "ODE solver: ab2, heun or dpm2m (docs/posterior.md)")
	fs.IntVar(&s.ESSSamples, "ess-samples", def.ESSSamples, "importance samples per voxel under its MAP model for the ESS map (0: no ess map)")
	fs.Uint64Var(&s.Seed, "seed", def.Seed, "random seed")
	fs.IntVar(&s.BatchSize, "batch", def.BatchSize, "voxels per batch (results do not depend on it, bit for bit)")
	fs.StringVar(&s.Correct, "correct", def.Correct, "correct the posterior of every model with the likelihood: auto (smc for ball-and-sticks networks, none for model-selection networks), none, is or smc (writes correct_* diagnostic maps; docs/dmri.md)")
	fs.IntVar(&s.CorrectParticles, "correct-particles", 0, "with --correct smc: particles per SMC run, one run per model class and voxel (0: 20 for ball-and-sticks fits, 64 for model-selection fits)")
	fs.IntVar(&s.CorrectAlways, "correct-always", 0, "model-selection fits with --correct: also correct, in every voxel, the models with at most this many active compartments (0: only the classes the network gives ≥ 1 %; docs/dmri.md)")
	fs.Float64Var(&s.CorrectLambda, "correct-lambda", 0, "model-selection fits with --correct: also correct the classes the network gives ≥ 1 % at this λ (e.g. 0.99: the network's ranking by fit to the data; 0: off; docs/dmri.md)")
	fs.BoolVar(&s.Mixture, "mixture", false, "draw the samples' models from the whole model posterior (averaging over fibre counts) instead of from the models with the most probable number of sticks (docs/dmri.md)")
	fs.IntVar(&s.Refine, "refine", def.Refine, "with --correct none: independence Metropolis–Hastings steps that move each network sample towards the exact posterior of its model (proposal: a t-distributed Laplace approximation at the mode; 0: the network's samples as they are; docs/dmri.md)")
	fs.IntVar(&s.RefineMALA, "refine-mala", def.RefineMALA, "preconditioned MALA steps after the --refine steps (0: none)")
	fresh := fs.Bool("fresh", false, "start afresh: discard a partial state left in --out by an interrupted run instead of continuing it, and remove the maps of an earlier run (without it, a folder holding them is an error)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	shard := fs.String("shard", "", "fit only part I of N of the voxels (I/N, 0-based; or auto: from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX) into --out/shards; join with `prism dmri merge` (docs/cohorts.md)")
	shards := fs.Int("shards", 0, "number of shards N for --shard auto in a Kubernetes Indexed Job (its completions)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkScanArgs(fs, files, *out); err != nil {
		return err
	}
	if !net.given() {
		return errNoNetwork
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if err := checkInputsExist(files, *net.checkpoint); err != nil {
		return err
	}
	cfg := dmrifit.RunConfig{Tool: "prism dmri fit", Version: prismVersion(), Out: *out, Fresh: *fresh,
		Checkpoint: *net.checkpoint, Model: *net.model, Log: stderr, Started: time.Now()}
	if !*quiet {
		cfg.Progress = progress.To(stderr, "voxels")
	}
	if *shard != "" {
		sh, err := resolveShard(*shard, *shards)
		if err != nil {
			return err
		}
		// Shards of one scan run concurrently into --out/shards, each with
		// its own state file; the merge replays this command unsharded.
		fitArgs, err := mergeArgs(fs)
		if err != nil {
			return err
		}
		cfg.Shard = &dmrifit.ShardConfig{Shard: sh, FitArgs: fitArgs}
	}

	// Everything is read and checked before the output folder is touched.
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	if len(scan.Voxels) > 0 {
		if err := dmrifit.CheckMemory(scan, s); err != nil {
			return err
		}
	}
	load := time.Since(cfg.Started).Seconds()
	ckStart := time.Now()
	post, err := net.load()
	if err != nil {
		return err
	}
	cfg.Timings = map[string]float64{"load": load, "checkpoint": time.Since(ckStart).Seconds()}
	msg := "dmri fit: stopping after this batch; rerun the same command to continue"
	if !dmrifit.BallAndSticks(post.Family()) {
		msg = "dmri fit: stopping; nothing is written"
	}
	ctx, stop := interruptContext(stderr, msg)
	defer stop()
	_, err = dmrifit.Run(ctx, scan, post, s, cfg)
	return err
}
