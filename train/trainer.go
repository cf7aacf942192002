package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/cputime"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/network"
)

// Options are the settings of one invocation that do not influence the
// numbers a run computes.
type Options struct {
	// Progress receives a progress line (step, samples/s, losses, ETA)
	// every ProgressInterval; nil disables it. With ProgressTTY the line is
	// redrawn in place with a carriage return, otherwise a new line is
	// written each time.
	Progress         io.Writer
	ProgressInterval time.Duration
	ProgressTTY      bool
	// Stop, when closed, ends training gracefully after the current step
	// with a final checkpoint (cancelling Run's context instead aborts
	// without one, like a crash).
	Stop <-chan struct{}
	// AfterStep, if set, is called after every completed step (after any
	// checkpoint of that step). Tests use it to interrupt runs.
	AfterStep func(step int64)
}

// maxRestores bounds the restores after non-finite losses that may happen
// without an intervening checkpoint before training gives up.
const maxRestores = 5

// Trainer runs on-line training for one output directory.
type Trainer struct {
	cfg     Config
	f       family.Family
	net     *network.Net
	params  *engine.ParamStore
	opt     *optim.Optimizer
	dir     string
	lock    *dirlock.Lock // held on dir from New or Resume until Close
	state   State
	streams []stream
	val     []valStream
	opts    Options

	g, vg *engine.Graph
	// reps are the data-parallel replicas (Config.Replicas); reps[0] is
	// net itself with graph g.
	reps   []replica
	backup []float32 // raw parameter values while validating with the EMA
	log    *os.File
	logW   *bufio.Writer

	// fault, if set (tests only), makes the gradient of the given step
	// non-finite, to exercise the restore-and-skip path.
	fault func(step int64) bool
}

// Result summarises one Run.
type Result struct {
	Step          int64         // optimiser steps taken in total
	StepsThisRun  int64         // steps taken by this Run
	Samples       int64         // simulations consumed by this Run
	Elapsed       time.Duration // wall time of the loop
	SamplesPerSec float64       // after the first step (which includes warm-up)
	WaitShare     float64       // share of the loop's wall time spent waiting for data
	// CPUTime is the process's CPU time (all threads) during the loop and
	// SamplesPerCPUSec the samples per CPU-second after the first step:
	// on a machine shared with other work, SamplesPerCPUSec × cores
	// estimates the throughput the machine would reach alone.
	CPUTime          time.Duration
	SamplesPerCPUSec float64
	Stopped          string // "steps", "minutes" or "stop"
	// Dropped counts the simulations whose observation was NaN or
	// infinite and that were redrawn from the prior (external simulators;
	// also per log line as dropped_samples in log.jsonl).
	Dropped int64
}

// New prepares a fresh run of cfg in dir, which must not exist or be
// empty, and writes its step-0 checkpoint. The trainer holds a lock on
// dir (internal/dirlock) until Close, so that no other process writes
// into the run.
func New(cfg Config, dir string, opts Options) (_ *Trainer, err error) {
	f, err := cfg.LookupFamily()
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if err := cfg.Validate(f); err != nil {
		return nil, err
	}
	if err := checkFreshDir(dir); err != nil {
		return nil, err
	}
	lock, undo, err := lockRunDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	t, err := build(cfg, f, dir, opts)
	if err != nil {
		return nil, err
	}
	t.lock = lock
	if err := t.checkMemory(); err != nil {
		t.Close()
		return nil, err
	}
	var initStep int64
	if cfg.InitFrom != "" {
		if initStep, err = t.initFrom(cfg.InitFrom); err != nil {
			t.Close()
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Close()
		return nil, fmt.Errorf("train: %w", err)
	}
	t.state = State{FormatVersion: FormatVersion, Next: make([]uint64, len(t.streams)),
		Validation: []ValRecord{}, Skipped: []Skip{}}
	if err := t.openLog(0); err != nil {
		t.Close()
		return nil, err
	}
	if cfg.InitFrom != "" {
		t.writeLog(map[string]any{"step": 0, "event": "init", "detail": fmt.Sprintf("EMA weights of %s at step %d", cfg.InitFrom, initStep)})
	}
	if err := t.checkpoint(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// initFrom loads the EMA weights of the latest checkpoint in dir into the
// network (and the optimiser's EMA), for Config.InitFrom, and returns that
// checkpoint's step. The source network must have the same configuration
// and therefore the same tensors.
func (t *Trainer) initFrom(dir string) (int64, error) {
	if st, err := os.Stat(dir); err == nil && st.Mode().IsRegular() {
		return t.initFromWeights(dir)
	}
	ck, err := loadCheckpoint(dir)
	if err != nil {
		return 0, fmt.Errorf("train: init_from: %w", err)
	}
	if !network.SameFor(t.f, ck.cfg.Network, t.cfg.Network) {
		return 0, fmt.Errorf("train: init_from %s: its network configuration %+v differs from this run's %+v", dir, ck.cfg.Network, t.cfg.Network)
	}
	if err := t.params.Assign(ck.tensors, optim.EMAPrefix); err != nil {
		return 0, fmt.Errorf("train: init_from %s: %w", dir, err)
	}
	t.opt.ResetEMA()
	return ck.state.Step, nil
}

// initFromWeights is initFrom for a weights file (prism.kind "weights":
// `prism export`'s output or a checkpoint's ema.safetensors, parameters
// under their bare names, the training configuration in prism.config). It
// returns 0: such a file records no step.
func (t *Trainer) initFromWeights(path string) (int64, error) {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return 0, fmt.Errorf("train: init_from: %w", err)
	}
	h, err := checkpoint.ParseHeader(meta)
	if err != nil {
		return 0, fmt.Errorf("train: init_from %s: %w", path, err)
	}
	if h.Kind != checkpoint.KindWeights {
		return 0, fmt.Errorf("train: init_from %s: prism.kind is %q, want %q (or pass a training directory)", path, h.Kind, checkpoint.KindWeights)
	}
	if !network.SameFor(t.f, h.Network, t.cfg.Network) {
		return 0, fmt.Errorf("train: init_from %s: its network configuration %+v differs from this run's %+v", path, h.Network, t.cfg.Network)
	}
	if err := t.params.Assign(ts, ""); err != nil {
		return 0, fmt.Errorf("train: init_from %s: %w", path, err)
	}
	t.opt.ResetEMA()
	return 0, nil
}

// checkFreshDir checks that dir does not exist or is empty.
func checkFreshDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("train: output directory: %w", err)
	case checkpoint.IsRunDir(dir):
		return fmt.Errorf("train: %s already holds a training checkpoint; resume it with --resume %s or choose another output directory", dir, dir)
	case len(entries) > 1 || (len(entries) == 1 && entries[0].Name() != dirlock.FileName):
		return fmt.Errorf("train: output directory %s exists and is not empty (and holds no checkpoint)", dir)
	}
	return nil
}

// lockRunDir takes the run folder's lock (creating the folder if needed)
// and returns undo, which a failed start calls so that it leaves nothing
// behind: not the lock, and not the folder if it did not exist before.
func lockRunDir(dir string) (*dirlock.Lock, func(), error) {
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	lock, err := dirlock.Acquire(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	undo := func() {
		lock.Release()
		if created {
			os.RemoveAll(dir)
		}
	}
	return lock, undo, nil
}

// Resume continues the run checkpointed in src. Output goes to dst: src
// itself when dst is "" or names the same directory, otherwise a fresh
// directory that starts with a copy of the checkpoint. adjust, if not nil,
// may change the fields of the stored configuration that do not influence
// the computed numbers (Steps, Minutes, checkpoint and log intervals,
// Prefetch, SimWorkers); changing anything else is an error.
func Resume(src, dst string, adjust func(*Config), opts Options) (t *Trainer, err error) {
	fork := dst != "" && !sameDir(src, dst)
	dir := src
	if fork {
		if err := checkFreshDir(dst); err != nil {
			return nil, err
		}
		dir = dst
	} else if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	// Lock the folder written to before reading the checkpoint, so that a
	// second resume of the same run fails instead of racing the first.
	lock, undo, err := lockRunDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	ck, err := loadCheckpoint(src)
	if err != nil {
		return nil, err
	}
	cfg := ck.cfg
	if adjust != nil {
		adjust(&cfg)
		if err := sameNumerics(&ck.cfg, &cfg); err != nil {
			return nil, err
		}
		recordScheduleChange(&ck.cfg.Optimizer, &cfg.Optimizer, ck.state.Step)
	}
	f, err := cfg.LookupFamily()
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := cfg.Validate(f); err != nil {
		return nil, err
	}
	if len(ck.state.Next) != len(cfg.streams()) {
		return nil, fmt.Errorf("train: checkpoint state has %d stream positions for %d design streams", len(ck.state.Next), len(cfg.streams()))
	}
	t, err = build(cfg, f, dir, opts)
	if err != nil {
		return nil, err
	}
	t.lock = lock
	if err := t.checkMemory(); err != nil {
		t.Close()
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Close()
		return nil, fmt.Errorf("train: %w", err)
	}
	if err := t.restore(ck); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.openLog(t.state.Step); err != nil {
		t.Close()
		return nil, err
	}
	if fork {
		if err := t.checkpoint(); err != nil {
			t.Close()
			return nil, err
		}
	} else if err := checkpoint.CleanStale(dir, checkpoint.Name(t.state.Step)); err != nil {
		t.Close()
		return nil, err
	}
	t.logEvent("resume", fmt.Sprintf("from %s at step %d", src, t.state.Step))
	return t, nil
}

func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// sameNumerics reports an error if b differs from a in a field that
// influences the computed weights.
func sameNumerics(a, b *Config) error {
	strip := func(c Config) ([]byte, error) {
		c.Steps, c.Minutes, c.CPUMinutes, c.CheckpointMinutes, c.CheckpointEvery, c.LogEvery = 0, 0, 0, 0, 0, 0
		c.Prefetch, c.SimWorkers, c.Replicas = 0, 0, 0
		c.Optimizer.Schedule, c.Optimizer.EarlierSchedules = Schedule{}, nil
		c.Proposal, c.LambdaTrain = nil, nil
		return json.Marshal(c)
	}
	ja, err := strip(*a)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	jb, err := strip(*b)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if !bytes.Equal(ja, jb) {
		return errors.New("train: a resumed run keeps its configuration; only steps, minutes, checkpoint and log intervals, prefetch, sim_workers, replicas, the learning-rate schedule, the fraction proposal and lambda_train may change")
	}
	return nil
}

// build creates the network, optimiser, streams and validation set.
func build(cfg Config, f family.Family, dir string, opts Options) (*Trainer, error) {
	net, err := network.New(f, cfg.Network, deriveSeed(cfg.Seed, tagInit))
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var rho family.LambdaDist
	if cfg.LambdaTrain != nil {
		rho = *cfg.LambdaTrain
	}
	params := net.Params()
	opt, err := optim.New(params.OptimParams(), cfg.Optimizer.optim())
	if err != nil {
		return nil, fmt.Errorf("train: optimizer: %w", err)
	}
	t := &Trainer{cfg: cfg, f: f, net: net, params: params, opt: opt, dir: dir, opts: opts,
		g: engine.NewGraph(), vg: engine.NewGraph(), backup: make([]float32, params.NumValues())}
	t.reps = []replica{{net: net, g: t.g}}
	for range cfg.replicas() - 1 {
		r, err := net.Replica()
		if err != nil {
			opt.Close()
			return nil, fmt.Errorf("train: %w", err)
		}
		t.reps = append(t.reps, replica{net: r, g: engine.NewGraph()})
	}
	if t.opts.ProgressInterval <= 0 {
		t.opts.ProgressInterval = time.Second
	}
	for j, name := range cfg.streams() {
		ds, err := f.Designs(name)
		if err != nil {
			opt.Close()
			return nil, fmt.Errorf("train: designs: %w", err)
		}
		t.streams = append(t.streams, stream{
			name:      name,
			sim:       family.SimOptions{Seed: deriveSeed(cfg.Seed, tagTrainSim+uint64(j)), Lambda: math.NaN(), LambdaDist: rho, Designs: ds, Proposal: cfg.Proposal},
			noiseSeed: deriveSeed(cfg.Seed, tagTrainNoi+uint64(j)),
		})
	}
	// The validation batches are built while the network still weighs
	// its λ quadrature for U(0, 1): validation measures the loss under the
	// prior itself, whatever lambda_train is, so that runs with and
	// without it compare.
	if cfg.Validation.Size > 0 {
		if t.val, err = buildValidation(f, net, &cfg, t.streams); err != nil {
			opt.Close()
			return nil, err
		}
	}
	for _, r := range t.reps { // reps[0] is net
		if err := r.net.SetTrainingLambda(rho); err != nil {
			opt.Close()
			return nil, fmt.Errorf("train: lambda_train: %w", err)
		}
	}
	return t, nil
}

// restore loads weights, optimiser state and training state.
func (t *Trainer) restore(ck *runCheckpoint) error {
	if err := t.params.Assign(ck.tensors, ""); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := t.opt.Restore(ck.tensors); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if t.opt.StepCount() != ck.state.Step {
		return fmt.Errorf("train: checkpoint: optimiser step %d disagrees with state step %d", t.opt.StepCount(), ck.state.Step)
	}
	t.state = ck.state
	if t.state.Validation == nil {
		t.state.Validation = []ValRecord{}
	}
	if t.state.Skipped == nil {
		t.state.Skipped = []Skip{}
	}
	return nil
}

// Config returns the run's configuration.
func (t *Trainer) Config() Config { return t.cfg }

// Net returns the network (its parameters hold the raw, non-EMA weights).
func (t *Trainer) Net() *network.Net { return t.net }

// Step returns the number of optimiser steps taken.
func (t *Trainer) Step() int64 { return t.state.Step }

// State returns a copy of the training state.
func (t *Trainer) State() State {
	s := t.state
	s.Next = append([]uint64(nil), s.Next...)
	s.Validation = append([]ValRecord(nil), s.Validation...)
	s.Skipped = append([]Skip(nil), s.Skipped...)
	return s
}

// Close releases the optimiser's workers, the log file and the run
// folder's lock.
func (t *Trainer) Close() error {
	t.opt.Close()
	if c, ok := t.f.(io.Closer); ok {
		c.Close() // an external simulator's worker processes
	}
	defer t.lock.Release()
	if t.log == nil {
		return nil
	}
	err := t.logW.Flush()
	if cerr := t.log.Close(); err == nil {
		err = cerr
	}
	t.log = nil
	return err
}

func (t *Trainer) checkpoint() error {
	if err := t.logW.Flush(); err != nil {
		return fmt.Errorf("train: log: %w", err)
	}
	return saveCheckpoint(t.dir, &t.cfg, &t.state, t.params.Tensors(), t.opt)
}

// Run trains until the configured number of steps or minutes is reached or
// opts.Stop is closed, then writes a final checkpoint. If ctx is cancelled,
// Run returns ctx.Err() at once without a checkpoint (as a crash would;
// resuming continues from the last committed checkpoint).
func (t *Trainer) Run(ctx context.Context) (Result, error) {
	cfg := &t.cfg
	nstreams := len(t.streams)
	start := time.Now()
	cpu0 := cputime.Duration()
	var warmCPU time.Duration
	var deadline time.Time
	if cfg.Minutes > 0 {
		deadline = start.Add(time.Duration(cfg.Minutes * float64(time.Minute)))
	}
	ckptEvery := time.Duration(cfg.CheckpointMinutes * float64(time.Minute))
	lastCkpt := start
	restores := 0
	firstStep := t.state.Step

	pf := newPrefetcher(t.f, t.net, t.streams, cfg.BatchSize, len(t.reps), t.state.Next, cfg.SimWorkers, cfg.Prefetch)
	defer func() { pf.close() }()
	var waitedBefore time.Duration // waits of closed prefetchers

	var (
		res                      Result
		warm                     time.Time // end of this run's first step
		acc                      lossAcc
		lastLog                  = start
		lastLogWait              time.Duration
		lastProgress             time.Time
		lastLoss, lastML, lastPL float64
	)
	res.Stopped = "steps"
	for {
		if cfg.Steps > 0 && t.state.Step >= int64(cfg.Steps) {
			res.Stopped = "steps"
			break
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			res.Stopped = "minutes"
			break
		}
		if cfg.CPUMinutes > 0 && (cputime.Duration()-cpu0).Minutes() >= cfg.CPUMinutes {
			res.Stopped = "cpu_minutes"
			break
		}
		if t.stopRequested() {
			res.Stopped = "stop"
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		grp, err := pf.nextGroup(ctx)
		if err != nil {
			return res, err
		}
		if grp.err != nil {
			return res, fmt.Errorf("train: step %d: %w", t.state.Step+1, grp.err)
		}

		loss, ml, pl, finite := t.gradients(grp)
		if finite && t.fault != nil && t.fault(t.state.Step+1) {
			t.params.All()[0].Grad[0] = float32(math.NaN())
		}
		var stepErr error
		if !finite {
			stepErr = errors.New("non-finite loss")
		} else if stepErr = t.opt.SetLR(cfg.Optimizer.LR * cfg.Optimizer.Schedule.Factor(t.state.Step+1)); stepErr == nil {
			stepErr = t.opt.Step()
		}
		if stepErr != nil {
			restores++
			if restores > maxRestores {
				return res, fmt.Errorf("train: step %d: %w; %d restores without progress, giving up", t.state.Step+1, stepErr, maxRestores)
			}
			starts := append([]uint64(nil), grp.starts...)
			waitedBefore += pf.waited
			pf.close()
			if err := t.skipBatch(t.state.Step+1, starts, stepErr); err != nil {
				return res, err
			}
			pf = newPrefetcher(t.f, t.net, t.streams, cfg.BatchSize, len(t.reps), t.state.Next, cfg.SimWorkers, cfg.Prefetch)
			continue
		}
		for j := range t.state.Next {
			t.state.Next[j] = grp.starts[j] + uint64(cfg.BatchSize)
		}
		acc.dropped += grp.dropped
		res.Dropped += int64(grp.dropped)
		pf.release(grp)
		t.state.Step++
		res.StepsThisRun++
		res.Samples += int64(cfg.BatchSize * nstreams)
		if warm.IsZero() {
			warm, warmCPU = time.Now(), cputime.Duration()
		}
		acc.add(loss, ml, pl)
		lastLoss, lastML, lastPL = loss, ml, pl

		if t.state.Step%int64(cfg.LogEvery) == 0 {
			now := time.Now()
			waited := waitedBefore + pf.waited
			dt := now.Sub(lastLog).Seconds()
			t.logTrain(acc, now.Sub(start).Seconds(), (cputime.Duration() - cpu0).Seconds(), float64(acc.n*cfg.BatchSize*nstreams)/dt,
				(waited-lastLogWait).Seconds()/dt)
			acc = lossAcc{}
			lastLog, lastLogWait = now, waited
		}
		if cfg.Validation.Every > 0 && t.state.Step%int64(cfg.Validation.Every) == 0 {
			rec := t.validate()
			t.state.Validation = append(t.state.Validation, rec)
			t.logVal(rec)
		}
		if (cfg.CheckpointEvery > 0 && t.state.Step%int64(cfg.CheckpointEvery) == 0) || time.Since(lastCkpt) >= ckptEvery {
			if err := t.checkpoint(); err != nil {
				return res, err
			}
			lastCkpt = time.Now()
			restores = 0
		}
		if t.opts.AfterStep != nil {
			t.opts.AfterStep(t.state.Step)
		}
		if t.opts.Progress != nil && time.Since(lastProgress) >= t.opts.ProgressInterval {
			lastProgress = time.Now()
			t.progress(start, deadline, firstStep, warm, res.Samples, waitedBefore+pf.waited, lastLoss, lastML, lastPL)
		}
	}
	if acc.n > 0 {
		now := time.Now()
		waited := waitedBefore + pf.waited
		dt := now.Sub(lastLog).Seconds()
		t.logTrain(acc, now.Sub(start).Seconds(), (cputime.Duration() - cpu0).Seconds(), float64(acc.n*cfg.BatchSize*nstreams)/dt, (waited-lastLogWait).Seconds()/dt)
	}
	res.Elapsed = time.Since(start)
	res.Step = t.state.Step
	res.WaitShare = (waitedBefore + pf.waited).Seconds() / res.Elapsed.Seconds()
	res.CPUTime = cputime.Duration() - cpu0
	if res.StepsThisRun > 1 {
		n := float64((res.StepsThisRun - 1) * int64(cfg.BatchSize*nstreams))
		res.SamplesPerSec = n / time.Since(warm).Seconds()
		if cpu := (cputime.Duration() - warmCPU).Seconds(); cpu > 0 {
			res.SamplesPerCPUSec = n / cpu
		}
	}
	if err := t.checkpoint(); err != nil {
		return res, err
	}
	t.logEvent("end", fmt.Sprintf("stopped by %s; %.1f samples/s, %.1f samples per CPU-second; waited for data %.2f%% of the time",
		res.Stopped, res.SamplesPerSec, res.SamplesPerCPUSec, 100*res.WaitShare))
	if t.opts.Progress != nil {
		t.progress(start, deadline, firstStep, warm, res.Samples, waitedBefore+pf.waited, lastLoss, lastML, lastPL)
		fmt.Fprintln(t.opts.Progress)
	}
	return res, t.logW.Flush()
}

func (t *Trainer) stopRequested() bool {
	if t.opts.Stop == nil {
		return false
	}
	select {
	case <-t.opts.Stop:
		return true
	default:
		return false
	}
}

// skipBatch handles a non-finite loss or gradient at step: it restores the
// committed checkpoint and moves every stream past the offending batch.
func (t *Trainer) skipBatch(step int64, starts []uint64, cause error) error {
	ck, err := loadCheckpoint(t.dir)
	if err != nil {
		return fmt.Errorf("train: step %d: %v; restoring the last checkpoint: %w", step, cause, err)
	}
	skipped := append(t.state.Skipped, Skip{Step: step, RestoredStep: ck.state.Step, Start: starts, Reason: cause.Error()})
	if err := t.restore(ck); err != nil {
		return fmt.Errorf("train: step %d: %v; restoring the last checkpoint: %w", step, cause, err)
	}
	t.state.Skipped = skipped
	for j := range t.state.Next {
		t.state.Next[j] = starts[j] + uint64(t.cfg.BatchSize)
	}
	t.logEvent("nonfinite", fmt.Sprintf("step %d: %v; restored the checkpoint of step %d and skipped samples from %v", step, cause, ck.state.Step, starts))
	return nil
}

// lossAcc averages training losses over a log interval.
type lossAcc struct {
	n                 int
	loss, mask, param float64
	dropped           int // simulations dropped and redrawn (external simulators)
}

func (a *lossAcc) add(l, m, p float64) {
	a.n++
	a.loss += l
	a.mask += m
	a.param += p
}

// openLog opens log.jsonl for appending, first dropping lines of steps
// after step (written after the checkpoint being resumed).
func (t *Trainer) openLog(step int64) error {
	path := filepath.Join(t.dir, checkpoint.LogFile)
	if data, err := os.ReadFile(path); err == nil {
		var kept []byte
		for line := range bytes.Lines(data) {
			var rec struct {
				Step int64 `json:"step"`
			}
			if json.Unmarshal(line, &rec) != nil || rec.Step > step {
				continue
			}
			kept = append(kept, line...)
		}
		if err := checkpoint.WriteFile(path, kept); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("train: log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("train: log: %w", err)
	}
	t.log, t.logW = f, bufio.NewWriter(f)
	return nil
}

func (t *Trainer) writeLog(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // only finite floats and strings are logged
	}
	// Flushed per line (a line every LogEvery steps), so that the log can
	// be followed while training runs.
	t.logW.Write(append(b, '\n'))
	t.logW.Flush()
}

func (t *Trainer) logTrain(a lossAcc, elapsed, cpu, rate, wait float64) {
	n := float64(a.n)
	t.writeLog(struct {
		Step      int64   `json:"step"`
		Loss      float64 `json:"loss"`
		MaskLoss  float64 `json:"mask_loss"`
		ParamLoss float64 `json:"param_loss"`
		Elapsed   float64 `json:"elapsed_s"`
		CPU       float64 `json:"cpu_s"`
		Rate      float64 `json:"samples_per_s"`
		Wait      float64 `json:"data_wait"`
		Dropped   int     `json:"dropped_samples,omitempty"`
	}{t.state.Step, a.loss / n, a.mask / n, a.param / n, elapsed, cpu, rate, wait, a.dropped})
}

func (t *Trainer) logVal(r ValRecord) {
	t.writeLog(struct {
		Step      int64   `json:"step"`
		Loss      float64 `json:"val_loss"`
		MaskLoss  float64 `json:"val_mask_loss"`
		ParamLoss float64 `json:"val_param_loss"`
	}{r.Step, r.Loss, r.MaskLoss, r.ParamLoss})
}

func (t *Trainer) logEvent(event, detail string) {
	t.writeLog(struct {
		Step   int64  `json:"step"`
		Event  string `json:"event"`
		Detail string `json:"detail"`
	}{t.state.Step, event, detail})
}

// progress writes the progress line.
func (t *Trainer) progress(start, deadline time.Time, firstStep int64, warm time.Time, samples int64, waited time.Duration, loss, ml, pl float64) {
	now := time.Now()
	steps := t.state.Step - firstStep
	rate := 0.0
	if steps > 1 {
		rate = float64(samples-samples/steps) / now.Sub(warm).Seconds()
	}
	eta := time.Duration(-1)
	if t.cfg.Steps > 0 && steps > 1 {
		perStep := now.Sub(warm) / time.Duration(steps-1)
		eta = time.Duration(int64(t.cfg.Steps)-t.state.Step) * perStep
	}
	if !deadline.IsZero() {
		if left := deadline.Sub(now); eta < 0 || left < eta {
			eta = max(left, 0)
		}
	}
	total := "?"
	if t.cfg.Steps > 0 {
		total = fmt.Sprint(t.cfg.Steps)
	}
	etaStr := "?"
	if eta >= 0 {
		etaStr = eta.Round(time.Second).String()
	}
	val := ""
	if n := len(t.state.Validation); n > 0 {
		val = fmt.Sprintf("  val %.4g", t.state.Validation[n-1].Loss)
	}
	line := fmt.Sprintf("step %d/%s  %.0f samples/s  loss %.4g (mask %.4g, θ %.4g)%s  data wait %.1f%%  ETA %s",
		t.state.Step, total, rate, loss, ml, pl, val, 100*waited.Seconds()/now.Sub(start).Seconds(), etaStr)
	if t.opts.ProgressTTY {
		fmt.Fprintf(t.opts.Progress, "\r%-110s", line)
	} else {
		fmt.Fprintln(t.opts.Progress, line)
	}
}
