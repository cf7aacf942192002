package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/train"
)

func init() {
	register("train", "train a PRISM network on simulations of a family (checkpoints, --resume)", runTrain)
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("train", "--family F [--config FILE.yaml] [--minutes M | --steps N] [--lr R] [--lr-schedule S] --out DIR [--seed S] [--init-from DIR]\n       prism train --resume DIR [--minutes M | --steps N] [--lr-schedule S] [--proposal P] [--lambda-train R] [--out DIR2]", stderr)
	famName := fs.String("family", "", "model family (see 'prism families'); may be omitted when the config names it")
	specPath := addSpecFlag(fs)
	configPath := fs.String("config", "", "training configuration (YAML, see configs/ and docs/training.md); default: the family's defaults")
	minutes := fs.Float64("minutes", 0, "train for this many minutes of wall time (replaces the config's steps/minutes)")
	steps := fs.Int("steps", 0, "train until this total step count (replaces the config's steps/minutes)")
	cpuMinutes := fs.Float64("cpu-minutes", 0, "also stop after this many minutes of process CPU time (all threads) in this invocation: an equal compute budget on a shared machine")
	out := fs.String("out", "", "output directory for checkpoints and log.jsonl (must not exist or be empty)")
	resume := fs.String("resume", "", "continue the run checkpointed in this directory (writes there unless --out is given)")
	seed := fs.Uint64("seed", 0, "random seed (overrides the config's); the same seed and config give identical checkpoints")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	proposal := fs.String("proposal", "", "training proposal SCALE:MIX for families with mixing fractions: with probability MIX the fraction latents are drawn with standard deviation SCALE, losses weighted by p/r (replaces the config's; allowed with --resume, to fine-tune)")
	lambdaTrain := fs.String("lambda-train", "", "distribution of the training simulations' λ, MIX:POWER: with probability MIX λ ~ Beta(POWER, 1), else U(0, 1); \"uniform\" for the paper's U(0, 1). Moves training towards many-component masks without changing the learnt posterior (docs/training.md); replaces the config's lambda_train, allowed with --resume")
	initFrom := fs.String("init-from", "", "start from the EMA weights of the latest checkpoint in this training directory, or from a weights file (prism export), instead of random weights (same network configuration, the training noise distribution aside; e.g. to fine-tune on another family with the same components)")
	replicas := fs.Int("replicas", 0, "data-parallel replicas: each step's batch is split into this many shards trained concurrently, one per core (same results up to rounding; replaces the config's; allowed with --resume)")
	lr := fs.Float64("lr", 0, "base learning rate of a new run (replaces the config's optimizer.lr; the checkpoint records both, so `prism models` names this flag), e.g. a lower peak for a warm start")
	schedule := fs.String("lr-schedule", "", "learning-rate decay KIND:START:STEPS:FINAL (KIND cosine or linear: from step START the rate falls to FINAL×lr over STEPS steps; replaces the config's; allowed with --resume, to anneal a run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["spec"] && *resume != "" {
		return errors.New("--spec cannot be combined with --resume: the checkpoint stores its spec")
	}
	specFamily, err := applySpec(*specPath, famName)
	if err != nil {
		return err
	}
	if set["minutes"] && set["steps"] {
		return errors.New("give --minutes or --steps, not both")
	}
	if set["minutes"] && !(*minutes > 0) {
		return fmt.Errorf("--minutes %v must be positive", *minutes)
	}
	if set["cpu-minutes"] && !(*cpuMinutes > 0) {
		return fmt.Errorf("--cpu-minutes %v must be positive", *cpuMinutes)
	}
	if set["steps"] && *steps <= 0 {
		return fmt.Errorf("--steps %d must be positive", *steps)
	}
	if set["replicas"] && *replicas <= 0 {
		return fmt.Errorf("--replicas %d must be positive", *replicas)
	}
	ov := train.Overrides{Replicas: *replicas, Minutes: *minutes, Steps: *steps, CPUMinutes: *cpuMinutes}
	if set["lr-schedule"] {
		sched, err := train.ParseSchedule(*schedule)
		if err != nil {
			return fmt.Errorf("--lr-schedule: %w", err)
		}
		ov.Schedule = &sched
	}
	if set["proposal"] {
		if ov.Proposal, err = train.ParseProposal(*proposal); err != nil {
			return fmt.Errorf("--proposal: %w", err)
		}
		ov.SetProposal = true
	}
	if set["lambda-train"] {
		if ov.LambdaTrain, err = train.ParseLambdaTrain(*lambdaTrain); err != nil {
			return fmt.Errorf("--lambda-train: %w", err)
		}
		ov.SetLambdaTrain = true
	}
	limit := ov.Apply

	opts := train.Options{}
	if !*quiet {
		opts.Progress = stderr
		opts.ProgressTTY = isTerminal(stderr)
		if !opts.ProgressTTY {
			opts.ProgressInterval = 30 * time.Second
		}
	}
	stop, ctx, release := stepInterrupt(stderr, "\nprism train: stopping after this step (interrupt again to abort without a checkpoint)")
	defer release()
	opts.Stop = stop

	var tr *train.Trainer
	if *resume != "" {
		if set["config"] || set["seed"] || set["init-from"] || set["lr"] {
			return errors.New("--config, --seed, --init-from and --lr cannot be combined with --resume: a resumed run keeps the configuration stored in its checkpoint")
		}
		tr, err = train.Resume(*resume, *out, limit, opts)
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		if *famName != "" && *famName != tr.Config().Family {
			tr.Close()
			return fmt.Errorf("--family %s, but the checkpoint in %s is for %s", *famName, *resume, tr.Config().Family)
		}
	} else {
		if *out == "" {
			return errors.New("--out is required (or --resume DIR to continue a run)")
		}
		var cfg train.Config
		if *configPath != "" {
			if cfg, err = train.LoadConfig(*configPath, *famName); err != nil {
				return fmt.Errorf("--config: %w", err)
			}
		} else {
			if *famName == "" {
				return errors.New("--family is required (see `prism families`) unless --config names the family")
			}
			f, err := family.Lookup(*famName)
			if err != nil {
				return fmt.Errorf("--family: %w", err)
			}
			cfg = train.DefaultConfig(f)
		}
		if specFamily != nil {
			storeSpec(&cfg, specFamily)
		}
		if set["seed"] {
			cfg.Seed = *seed
		}
		if set["init-from"] {
			cfg.InitFrom = *initFrom
		}
		if set["lr"] {
			if err := cfg.SetLR(*lr); err != nil {
				return fmt.Errorf("--lr: %w", err)
			}
		}
		limit(&cfg)
		if cfg.Steps == 0 && cfg.Minutes == 0 && cfg.CPUMinutes == 0 {
			return errors.New("give --minutes or --steps (or --cpu-minutes; the config sets none)")
		}
		if tr, err = train.New(cfg, *out, opts); err != nil {
			return err
		}
	}
	defer tr.Close()
	dir := *resume
	if *out != "" {
		dir = *out
	}
	cfg := tr.Config()
	fmt.Fprintf(stderr, "prism train: %s, %d parameters, batch %d × %d stream(s) on %d replica(s), from step %d, output %s\n",
		cfg.Family, tr.Net().Params().NumValues(), cfg.BatchSize, max(1, len(cfg.Designs)), max(1, cfg.Replicas), tr.Step(), dir)
	res, err := tr.Run(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("aborted at step %d; resume from the last checkpoint with --resume %s", tr.Step(), dir)
		}
		return err
	}
	fmt.Fprintf(stdout, "trained to step %d (%d steps this run in %s: %.0f samples/s, %.0f samples per CPU-second, waited for data %.1f%% of the time); checkpoint %s\n",
		res.Step, res.StepsThisRun, res.Elapsed.Round(time.Second), res.SamplesPerSec, res.SamplesPerCPUSec, 100*res.WaitShare,
		filepath.Join(dir, latestCheckpoint(dir)))
	if res.Dropped > 0 {
		fmt.Fprintf(stderr, "prism train: %d simulations gave NaN or infinite observations and were redrawn from the prior (dropped_samples in log.jsonl)\n", res.Dropped)
	}
	return nil
}

// latestCheckpoint is the name of dir's committed checkpoint ("" if none).
func latestCheckpoint(dir string) string {
	name, _ := checkpoint.Latest(dir)
	return name
}
