package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/dmri"
	"github.com/prismsbi/prism/internal/cputime"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/memlimit"
)

// fitRunSettings are the settings recorded in run.json (and, without the
// batch size and paths, in the key of the resumable state).
type fitRunSettings struct {
	dmri.FitSettings
	Checkpoint    string `json:"checkpoint,omitempty"`
	Model         string `json:"model,omitempty"`
	Family        string `json:"family"`
	WeightsSHA    string `json:"weights_sha256"`
	Models        int    `json:"models"`
	Sticks        int    `json:"sticks"`
	ResumedVoxels int    `json:"resumed_voxels"`
}

// fitStateKey identifies a fit for resuming: everything that changes the
// numbers (not the batch size, which does not).
type fitStateKey struct {
	Lambda     float64 `json:"lambda"`
	Samples    int     `json:"samples"`
	Steps      int     `json:"steps"`
	Solver     string  `json:"solver"`
	ESSSamples int     `json:"ess_samples"`
	Seed       uint64  `json:"seed"`
	Weights    string  `json:"weights_sha256"`
	Data       string  `json:"data_sha256"`
	Voxels     int     `json:"voxels"`
	Correct    string  `json:"correct,omitempty"`
	Particles  int     `json:"correct_particles,omitempty"`
	Mixture    bool    `json:"mixture,omitempty"`
	Refine     int     `json:"refine,omitempty"`
	RefineMALA int     `json:"refine_mala,omitempty"`
	Output     int     `json:"output_version"`
}

func runDMRIFit(args []string, stdout, stderr io.Writer) error {
	def := dmri.DefaultFitSettings()
	fs := newFlagSet("dmri fit", "--dwi FILE --bval FILE --bvec FILE [--mask FILE] (--checkpoint DIR | --model NAME) --out DIR [--lambda L] [--samples N]", stderr)
	var files dmri.ScanFiles
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
	fs.IntVar(&s.BatchSize, "batch", def.BatchSize, "voxels per batch (results do not depend on it)")
	fs.StringVar(&s.Correct, "correct", "none", "correct the posterior of every model with the likelihood: none, is or smc (writes correct_* diagnostic maps; docs/posterior.md)")
	fs.IntVar(&s.CorrectParticles, "correct-particles", dmri.DefaultCorrectSettings(correct.SMC).Particles, "with --correct smc: particles per SMC run (4 runs per model and voxel)")
	fs.BoolVar(&s.Mixture, "mixture", false, "draw the samples' models from the whole model posterior (averaging over fibre counts) instead of from the models with the most probable number of sticks (docs/dmri.md)")
	fs.IntVar(&s.Refine, "refine", def.Refine, "independence Metropolis–Hastings steps that move each network sample towards the exact posterior of its model (proposal: a t-distributed Laplace approximation at the mode; 0: the network's samples as they are; docs/dmri.md)")
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

	// Everything is read and checked before the output folder is touched.
	start := time.Now()
	scan, err := dmri.LoadScan(files)
	if err != nil {
		return err
	}
	loadTime := time.Since(start).Seconds()
	if len(scan.Voxels) == 0 {
		return fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", files.DWI, scan.MaskCount(), scan.MaskSource, skipSummary(scan.Skipped))
	}
	// The sizes must fit in memory (estimate: dmri.FitBaseBytes etc.).
	avail := memlimit.Available()
	vox, nm := float64(len(scan.Voxels)), float64(scan.Design.N)
	if err := memlimit.Check("--samples", int64(s.Samples), dmri.FitBaseBytes+dmri.FitBatchBytes*float64(s.BatchSize)*nm, dmri.FitSampleBytes*vox, avail); err != nil {
		return fmt.Errorf("%s: %w", files.DWI, err)
	}
	if err := memlimit.Check("--batch", int64(s.BatchSize), dmri.FitBaseBytes+dmri.FitSampleBytes*vox*float64(s.Samples), dmri.FitBatchBytes*nm, avail); err != nil {
		return fmt.Errorf("%s: %w", files.DWI, err)
	}
	ckStart := time.Now()
	post, err := net.load()
	if err != nil {
		return err
	}
	if !dmri.BallAndSticks(post.Family()) {
		// Other dMRI families (bszt, bszt-conv): model-selection maps.
		return runSelectFit(selectRun{files: files, out: *out, fresh: *fresh, quiet: *quiet, shard: *shard,
			net: net, scan: scan, set: s, start: start, load: loadTime, ckStart: ckStart, post: post}, stderr)
	}
	fitter, err := dmri.NewFitter(post, s)
	if err != nil {
		return fmt.Errorf("%s: %w", net.source(), err)
	}
	weights := dmri.WeightsHash(post)
	ckTime := time.Since(ckStart).Seconds()

	key, err := json.Marshal(fitStateKey{Lambda: s.Lambda, Samples: s.Samples, Steps: s.Steps, Solver: s.Solver,
		ESSSamples: s.ESSSamples, Seed: s.Seed, Weights: weights, Data: scanHash(scan), Voxels: len(scan.Voxels),
		Correct: correctKey(s.Correct), Particles: correctParticlesKey(s), Mixture: s.Mixture, Refine: s.Refine, RefineMALA: s.RefineMALA, Output: dmri.OutputVersion})
	if err != nil {
		return err
	}
	if *shard != "" {
		// Shards of one scan run concurrently into --out/shards, each with
		// its own state file; the merge replays this command unsharded.
		return runFitShard(shardRun{spec: *shard, count: *shards, flags: fs, out: *out, fresh: *fresh, quiet: *quiet,
			key: key, fitter: fitter, scan: scan}, stderr)
	}
	lock, err := dirlock.Acquire(*out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := dmri.PrepareOutput(*out, *fresh); err != nil {
		return err
	}
	st, err := dmri.OpenFitState(filepath.Join(*out, dmri.StateFile), key, fitter.Shape(), *fresh)
	if err != nil {
		return err
	}
	defer st.Close()
	resumed := st.Done

	info := dmri.NewRunInfo("prism dmri fit", scan)
	info.Version, info.GoVersion, info.Started = prismVersion(), runtime.Version(), start.UTC().Format(time.RFC3339)
	info.Settings = fitRunSettings{FitSettings: s, Checkpoint: *net.checkpoint, Model: *net.model, Family: post.Family().Name(), WeightsSHA: weights,
		Models: len(fitter.Models), Sticks: fitter.Sticks, ResumedVoxels: resumed}
	info.Workers = runtime.GOMAXPROCS(0)
	info.Timings["load"] = loadTime
	info.Timings["checkpoint"] = ckTime
	nv := len(scan.Voxels)
	fmt.Fprintf(stderr, "dmri fit: %d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s\n",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), skipSummary(scan.Skipped))
	fmt.Fprintf(stderr, "dmri fit: %s network %.12s…, %d models, λ %v, %d samples × %d %s steps, ESS from %d samples\n",
		post.Family().Name(), weights, len(fitter.Models), s.Lambda, s.Samples, s.Steps, s.Solver, s.ESSSamples)
	if resumed > 0 {
		fmt.Fprintf(stderr, "dmri fit: continuing an interrupted run: %d of %d voxels already done\n", resumed, nv)
	}

	ctx, stop := interruptContext(stderr, "dmri fit: stopping after this batch; rerun the same command to continue")
	defer stop()

	fitStart := time.Now()
	cpuStart := cpuSeconds()
	var progress func(int)
	var bar *progressBar
	if !*quiet {
		bar = newProgressBar(stderr, isTerminal(stderr), "dmri fit", nv, resumed, fitStart)
		progress = bar.update
	}
	all, err := fitter.Fit(ctx, scan, st, progress)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted; %s keeps the finished batches", filepath.Join(*out, dmri.StateFile))
		}
		return err
	}
	fitTime := time.Since(fitStart).Seconds()
	info.Timings["fit"] = fitTime
	info.Timings["fit_cpu"] = cpuSeconds() - cpuStart
	if nv > resumed {
		info.VoxelsPerSecond = float64(nv-resumed) / fitTime
	}
	var lowMass int
	for _, m := range all.ModelMass {
		if m < 0.5 {
			lowMass++
		}
	}
	writeStart := time.Now()
	if err := fitter.WriteFit(*out, scan, all); err != nil {
		return err
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(start).Seconds()
	extra := fitRunExtra{RunInfo: info, ModelMassBelowHalf: lowMass, MeanModelMass: meanF32(all.ModelMass), MedianESS: medianF32(all.ESS)}
	if correctKey(s.Correct) != "" {
		failed := 0
		for _, f := range all.CorrFailed {
			if f == 1 {
				failed++
			}
		}
		extra.CorrectFailedVoxels = &failed
		extra.MedianCorrectESS, extra.MedianCorrectLogZSE = medianF32(all.CorrESS), medianF32(all.CorrLogZSE)
		if failed > 0 {
			fmt.Fprintf(stderr, "dmri fit: --correct %s failed its diagnostics in %d of %d voxels (correct_failed map)\n", s.Correct, failed, nv)
		}
	}
	if err := dmri.WriteJSON(filepath.Join(*out, "run.json"), extra); err != nil {
		return err
	}
	if err := st.Remove(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri fit: %d voxels in %.1f s (%.1f voxels/s), total %.1f s; wrote %s\n",
		nv-resumed, fitTime, info.VoxelsPerSecond, info.Timings["total"], *out)
	return nil
}

// fitRunExtra is run.json of `dmri fit`: the common record plus summaries
// of the model posterior's normalisation and the ESS.
type fitRunExtra struct {
	*dmri.RunInfo
	// MeanModelMass is the mean over voxels of Σ q(M | x, λ) over the
	// model list before renormalising (the rest went to masks outside
	// the prior's support); ModelMassBelowHalf counts voxels below 0.5.
	MeanModelMass      float64 `json:"mean_model_mass"`
	ModelMassBelowHalf int     `json:"voxels_model_mass_below_half"`
	MedianESS          float64 `json:"median_ess,omitempty"`
	// With --correct: voxels whose correction failed its diagnostics, and
	// the medians of the correct_ess and correct_logz_se maps.
	CorrectFailedVoxels *int    `json:"correct_failed_voxels,omitempty"`
	MedianCorrectESS    float64 `json:"median_correct_ess,omitempty"`
	MedianCorrectLogZSE float64 `json:"median_correct_logz_se,omitempty"`
}

// scanHash is the SHA-256 of the preprocessed scan the network sees:
// design, fitted voxel indices and normalised signals.
func scanHash(s *dmri.Scan) string {
	h := sha256.New()
	var buf [8]byte
	put := func(x float64) {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(x))
		h.Write(buf[:])
	}
	for _, c := range s.Design.Cov {
		put(c)
	}
	for _, v := range s.Voxels {
		put(float64(v))
	}
	for _, x := range s.Signal {
		put(x)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func meanF32(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s / float64(len(x))
}

func medianF32(x []float32) float64 {
	var v []float64
	for _, a := range x {
		if !math.IsNaN(float64(a)) {
			v = append(v, float64(a))
		}
	}
	if len(v) == 0 {
		return 0
	}
	return quickMedian(v)
}

func quickMedian(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// progressBar draws "[#####.....] 45% 1000/2218 voxels, 12.3 voxels/s,
// ETA 1m40s" on stderr: redrawn in place on a terminal, otherwise one
// line every 10 % or 30 s.
type progressBar struct {
	mu         sync.Mutex
	w          io.Writer
	tty        bool
	name       string
	total      int
	resumed    int
	start      time.Time
	lastLine   time.Time
	lastDecile int
	drawn      bool
}

func newProgressBar(w io.Writer, tty bool, name string, total, resumed int, start time.Time) *progressBar {
	return &progressBar{w: w, tty: tty, name: name, total: total, resumed: resumed, start: start, lastDecile: -1}
}

func (p *progressBar) update(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	rate := float64(done-p.resumed) / el.Seconds()
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	const width = 30
	fill := done * width / p.total
	line := fmt.Sprintf("%s: [%s%s] %3d%% %d/%d voxels, %.1f voxels/s, elapsed %s, ETA %s", p.name,
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), done*100/p.total, done, p.total,
		rate, el.Round(time.Second), eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.drawn = true
		return
	}
	decile := done * 10 / p.total
	if decile > p.lastDecile || time.Since(p.lastLine) > 30*time.Second || done == p.total {
		p.lastDecile, p.lastLine = decile, time.Now()
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressBar) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// cpuSeconds is the process CPU time in seconds for run.json (0 where unreadable).
func cpuSeconds() float64 {
	s, _ := cputime.Seconds()
	return s
}

// correctKey and correctParticlesKey put the correction into the state key
// only when there is one, so that uncorrected runs keep their keys.
func correctKey(m string) string {
	if m == "none" {
		return ""
	}
	return m
}

func correctParticlesKey(s dmri.FitSettings) int {
	if correctKey(s.Correct) == "" {
		return 0
	}
	return s.CorrectParticles
}
