package dmrifit

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
	"slices"
	"strings"
	"time"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/cputime"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/internal/quantile"
	"github.com/prismsbi/prism/posterior"
)

// RunConfig says where a fit writes and what it records besides the fit
// settings.
type RunConfig struct {
	// Tool names the program in run.json ("prism dmri fit", "prism demo"),
	// Version its version.
	Tool, Version string
	// Out is the output folder. It is locked (internal/dirlock) unless
	// Unlocked, for a caller that holds the lock of a folder above it.
	Out      string
	Unlocked bool
	// Fresh discards a partial state of an interrupted run in Out and the
	// maps of an earlier run; without it, earlier maps are an error and a
	// partial state with the same key is continued.
	Fresh bool
	// Checkpoint or Model names the network (run.json).
	Checkpoint, Model string
	// Log receives the run's one-line messages, prefixed "dmri fit: "
	// (nil: none); Progress draws
	// the progress (nil: none).
	Log      io.Writer
	Progress progress.Start
	// Started is when the command started (loading included; zero: now);
	// Timings are what it measured before Run ("load", "checkpoint").
	Started time.Time
	Timings map[string]float64
	// Shard, if not nil, fits only one part of the voxels into
	// Out/shards (ball-and-sticks families only; `prism dmri merge`).
	Shard *ShardConfig
}

// ShardConfig is one shard of a sharded fit: which, and the `dmri fit`
// arguments that `prism dmri merge` replays.
type ShardConfig struct {
	Shard   Shard
	FitArgs []string
}

// RunSummary is what Run reports to its caller; run.json has the rest.
type RunSummary struct {
	Info *RunInfo
	// Resumed voxels were fitted by an interrupted earlier run.
	Resumed int
	// MeanModelMass is the mean over voxels of Σ q(M | x, λ) over the
	// model list before renormalising.
	MeanModelMass float64
}

// RunSettings are the settings recorded in run.json of a ball-and-sticks
// fit.
type RunSettings struct {
	FitSettings
	Checkpoint    string `json:"checkpoint,omitempty"`
	Model         string `json:"model,omitempty"`
	Family        string `json:"family"`
	WeightsSHA    string `json:"weights_sha256"`
	Models        int    `json:"models"`
	Sticks        int    `json:"sticks"`
	ResumedVoxels int    `json:"resumed_voxels"`
}

// stateKey identifies a fit for resuming: everything that changes the
// numbers (not the batch size, which does not).
type stateKey struct {
	Lambda        float64 `json:"lambda"`
	Samples       int     `json:"samples"`
	Steps         int     `json:"steps"`
	Solver        string  `json:"solver"`
	ESSSamples    int     `json:"ess_samples"`
	Seed          uint64  `json:"seed"`
	Weights       string  `json:"weights_sha256"`
	Data          string  `json:"data_sha256"`
	Voxels        int     `json:"voxels"`
	Correct       string  `json:"correct,omitempty"`
	Particles     int     `json:"correct_particles,omitempty"`
	Always        int     `json:"correct_always,omitempty"`
	CorrectLambda float64 `json:"correct_lambda,omitempty"`
	Mixture       bool    `json:"mixture,omitempty"`
	Refine        int     `json:"refine,omitempty"`
	RefineMALA    int     `json:"refine_mala,omitempty"`
	Output        int     `json:"output_version"`
}

// StateKey is the key of the resumable state of a fit of scan with the
// settings s and a network whose weights hash (WeightsHash) is weights.
// The correction enters it only when there is one, so that uncorrected
// runs keep their keys.
func StateKey(s FitSettings, weights string, scan *Scan) ([]byte, error) {
	k := stateKey{Lambda: s.Lambda, Samples: s.Samples, Steps: s.Steps, Solver: s.Solver, ESSSamples: s.ESSSamples, Seed: s.Seed,
		Weights: weights, Data: scan.Hash(), Voxels: len(scan.Voxels), Mixture: s.Mixture, Refine: s.Refine, RefineMALA: s.RefineMALA, Output: OutputVersion}
	if c := correctKey(s.Correct); c != "" {
		k.Correct, k.Particles, k.Always, k.CorrectLambda = c, s.CorrectParticles, s.CorrectAlways, s.CorrectLambda
	}
	return json.Marshal(k)
}

// Hash is the SHA-256 of the preprocessed scan the network sees: design,
// fitted voxel indices and normalised signals.
func (s *Scan) Hash() string {
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

// CheckMemory checks that a fit of scan with the settings s fits in the
// available memory (internal/memlimit, estimates FitBaseBytes etc.).
func CheckMemory(scan *Scan, s FitSettings) error {
	avail := memlimit.Available()
	vox, nm := float64(len(scan.Voxels)), float64(scan.Design.N)
	if err := memlimit.Check("--samples", int64(s.Samples), FitBaseBytes+FitBatchBytes*float64(s.BatchSize)*nm, FitSampleBytes*vox, avail); err != nil {
		return fmt.Errorf("%s: %w", scan.Files.DWI, err)
	}
	if err := memlimit.Check("--batch", int64(s.BatchSize), FitBaseBytes+FitSampleBytes*vox*float64(s.Samples), FitBatchBytes*nm, avail); err != nil {
		return fmt.Errorf("%s: %w", scan.Files.DWI, err)
	}
	return nil
}

// run is one Run: the configuration and the record it builds.
type run struct {
	cfg   RunConfig
	scan  *Scan
	post  *posterior.Posterior
	set   FitSettings
	info  *RunInfo
	start time.Time
}

// logf writes one message line to the run's log.
func (r *run) logf(format string, a ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "dmri fit: "+format+"\n", a...)
	}
}

// Run fits post to every voxel of scan with the settings s and writes the
// maps and run.json into cfg.Out: the BedpostX layout and the model maps
// for a ball-and-sticks family (Fitter), the model-selection maps for
// another dMRI family (SelectFitter). It locks the folder, keeps finished
// batches of a ball-and-sticks fit in a resumable state (StateFile, keyed
// by StateKey: settings, weights and data hashes) so that an interrupted
// run continues, and records the inputs, settings, hashes and timings in
// run.json. With cfg.Shard it fits one shard instead (its own state and
// ShardRecord in Out/shards; PrepareMerge joins them). A cancelled ctx
// stops after the current batch.
func Run(ctx context.Context, scan *Scan, post *posterior.Posterior, s FitSettings, cfg RunConfig) (*RunSummary, error) {
	if len(scan.Voxels) == 0 {
		return nil, fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", scan.Files.DWI, scan.MaskCount(), scan.MaskSource, SkipSummary(scan.Skipped))
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	timings := map[string]float64{}
	for k, v := range cfg.Timings {
		timings[k] = v
	}
	cfg.Timings = timings
	s = s.ResolveCorrect(BallAndSticks(post.Family()))
	if err := s.CheckScope(post.Family()); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, scan: scan, post: post, set: s, start: cfg.Started}
	if !BallAndSticks(post.Family()) {
		if cfg.Shard != nil {
			return nil, fmt.Errorf("--shard: sharded fits are only available for ball-and-sticks families (b3s); %s is fitted in one run", post.Family().Name())
		}
		return r.selection(ctx)
	}
	return r.ballAndSticks(ctx)
}

// begin locks the output folder, prepares it and starts the run.json
// record; the returned function releases the lock.
func (r *run) begin(settings any) (func(), error) {
	release := func() {}
	if !r.cfg.Unlocked {
		lock, err := dirlock.Acquire(r.cfg.Out)
		if err != nil {
			return nil, err
		}
		release = func() { lock.Release() }
	}
	if err := PrepareOutput(r.cfg.Out, r.cfg.Fresh); err != nil {
		release()
		return nil, err
	}
	info := NewRunInfo(r.cfg.Tool, r.scan)
	info.Version, info.GoVersion, info.Started = r.cfg.Version, runtime.Version(), r.start.UTC().Format(time.RFC3339)
	info.Settings, info.Workers = settings, runtime.GOMAXPROCS(0)
	for k, v := range r.cfg.Timings {
		info.Timings[k] = v
	}
	r.info = info
	s := r.scan
	r.logf("%d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s",
		s.Nx, s.Ny, s.Nz, s.Design.N, s.MaskCount(), s.MaskSource, len(s.Voxels), s.SkippedTotal(), SkipSummary(s.Skipped))
	return release, nil
}

// setUp builds the run's fitter with newFitter (NewFitter or
// NewSelectFitter) and returns it with the network's weights hash, which
// counts with the network's loading in the "checkpoint" timing, and the
// run's resumable-state key (StateKey).
func setUp[F any](r *run, newFitter func(*posterior.Posterior, FitSettings) (F, error)) (F, string, []byte, error) {
	start := time.Now()
	ft, err := newFitter(r.post, r.set)
	if err != nil {
		return ft, "", nil, fmt.Errorf("%s: %w", r.source(), err)
	}
	weights := WeightsHash(r.post)
	r.cfg.Timings["checkpoint"] += time.Since(start).Seconds()
	key, err := StateKey(r.set, weights, r.scan)
	return ft, weights, key, err
}

// massSummary summarises the model posterior's normalisation in run.json:
// the mean over voxels of Σ q(M | x, λ) over the model list before
// renormalising (the rest went to masks outside the prior's support), and
// the number of voxels where it is below 0.5.
type massSummary struct {
	MeanModelMass      float64 `json:"mean_model_mass"`
	ModelMassBelowHalf int     `json:"voxels_model_mass_below_half"`
}

func summariseMass(mass []float32) massSummary {
	return massSummary{MeanModelMass: meanF32(mass), ModelMassBelowHalf: belowHalf(mass)}
}

// fitAndWrite runs fit with the progress of the scan's voxels, resumed
// of them taken from the run's state file (StateFile), records its
// timings and writes its result with write; it returns the result and
// when the writing began. A cancelled fit returns an error saying that
// the state file keeps the finished batches, wrapping context.Canceled.
func fitAndWrite[R any](r *run, resumed int, fit func(progress func(done int)) (R, error), write func(R) error) (R, time.Time, error) {
	nv := len(r.scan.Voxels)
	if resumed > 0 {
		r.logf("continuing an interrupted run: %d of %d voxels already done", resumed, nv)
	}
	fitStart, cpuStart := time.Now(), cpuSeconds()
	bar := progress.Begin(r.cfg.Progress, "dmri fit", nv, resumed)
	all, err := fit(bar.Update)
	bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = interruptedError{"interrupted; " + filepath.Join(r.cfg.Out, StateFile) + " keeps the finished batches", err}
		}
		return all, time.Time{}, err
	}
	fitTime := time.Since(fitStart).Seconds()
	r.info.Timings["fit"] = fitTime
	r.info.Timings["fit_cpu"] = cpuSeconds() - cpuStart
	if nv > resumed {
		r.info.VoxelsPerSecond = float64(nv-resumed) / fitTime
	}
	writeStart := time.Now()
	return all, writeStart, write(all)
}

// finish writes run.json (record) after the maps, whose writing began at
// writeStart, reports the run of n voxels and deletes its finished state
// file st.
func (r *run) finish(record any, writeStart time.Time, n int, st *recordFile) error {
	r.info.Timings["write"] = time.Since(writeStart).Seconds()
	r.info.Timings["total"] = time.Since(r.start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(r.cfg.Out, "run.json"), record); err != nil {
		return err
	}
	r.logf("%d voxels in %.1f s (%.1f voxels/s), total %.1f s; wrote %s",
		n, r.info.Timings["fit"], r.info.VoxelsPerSecond, r.info.Timings["total"], r.cfg.Out)
	return st.Remove()
}

// fitRecord is run.json of a ball-and-sticks fit: the common record plus
// summaries of the model posterior's normalisation and the ESS.
type fitRecord struct {
	*RunInfo
	massSummary
	MedianESS float64 `json:"median_ess,omitempty"`
	correctionSummary
}

// correctionSummary is run.json's summary of a correction (--correct):
// the voxels whose correction failed its diagnostics, and the medians of
// the correct_ess and correct_logz_se maps.
type correctionSummary struct {
	CorrectFailedVoxels *int    `json:"correct_failed_voxels,omitempty"`
	MedianCorrectESS    float64 `json:"median_correct_ess,omitempty"`
	MedianCorrectLogZSE float64 `json:"median_correct_logz_se,omitempty"`
}

// summariseCorrection summarises the correction maps of nv voxels and
// logs how many failed.
func (r *run) summariseCorrection(failedMap, ess, logZSE []float32) correctionSummary {
	failed := 0
	for _, f := range failedMap {
		if f == 1 {
			failed++
		}
	}
	if failed > 0 {
		r.logf("--correct %s failed its diagnostics in %d of %d voxels (correct_failed map)", r.set.Correct, failed, len(failedMap))
	}
	return correctionSummary{CorrectFailedVoxels: &failed, MedianCorrectESS: medianF32(ess), MedianCorrectLogZSE: medianF32(logZSE)}
}

// ballAndSticks is Run for a ball-and-sticks family.
func (r *run) ballAndSticks(ctx context.Context) (*RunSummary, error) {
	s, scan := r.set, r.scan
	fitter, weights, key, err := setUp(r, NewFitter)
	if err != nil {
		return nil, err
	}
	if r.cfg.Shard != nil {
		return nil, r.shard(ctx, fitter, key)
	}
	release, err := r.begin(nil)
	if err != nil {
		return nil, err
	}
	defer release()
	st, err := OpenFitState(filepath.Join(r.cfg.Out, StateFile), key, fitter.Shape(), r.cfg.Fresh)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	resumed, nv := st.Done(), len(scan.Voxels)
	r.info.Settings = RunSettings{FitSettings: s, Checkpoint: r.cfg.Checkpoint, Model: r.cfg.Model, Family: r.post.Family().Name(), WeightsSHA: weights,
		Models: len(fitter.Models), Sticks: fitter.Sticks, ResumedVoxels: resumed}
	r.logf("%s network %.12s…, %d models, λ %v, %d samples × %d %s steps, ESS from %d samples",
		r.post.Family().Name(), weights, len(fitter.Models), s.Lambda, s.Samples, s.Steps, s.Solver, s.ESSSamples)

	all, writeStart, err := fitAndWrite(r, resumed,
		func(progress func(int)) (*Result, error) { return fitter.Fit(ctx, scan, st, progress) },
		func(all *Result) error { return fitter.WriteFit(r.cfg.Out, scan, all) })
	if err != nil {
		return nil, err
	}
	rec := fitRecord{RunInfo: r.info, massSummary: summariseMass(all.ModelMass), MedianESS: medianF32(all.ESS)}
	if correctKey(s.Correct) != "" {
		rec.correctionSummary = r.summariseCorrection(all.CorrFailed, all.CorrESS, all.CorrLogZSE)
	}
	if err := r.finish(rec, writeStart, nv-resumed, st.recordFile); err != nil {
		return nil, err
	}
	return &RunSummary{Info: r.info, Resumed: resumed, MeanModelMass: rec.MeanModelMass}, nil
}

// source names the network in messages: the checkpoint path or
// "model:NAME".
func (r *run) source() string {
	if r.cfg.Checkpoint != "" {
		return r.cfg.Checkpoint
	}
	return "model:" + r.cfg.Model
}

// selectionSettings are the settings recorded in run.json of a
// model-selection fit.
type selectionSettings struct {
	FitSettings
	Checkpoint string `json:"checkpoint,omitempty"`
	Model      string `json:"model,omitempty"`
	Family     string `json:"family"`
	WeightsSHA string `json:"weights_sha256"`
	Models     int    `json:"models"`
	// ModelDraws is set when the models are too many to list and the
	// model posterior is sampled (SelectFitter, ModelDraws per voxel).
	ModelDraws int `json:"model_draws,omitempty"`
	Classes    int `json:"classes"`
	Sticks     int `json:"bedpostx_sticks"`
	// ResumedVoxels is the number of voxels taken from an interrupted
	// run's state.
	ResumedVoxels int `json:"resumed_voxels,omitempty"`
}

// selectionRecord is run.json of a model-selection fit.
type selectionRecord struct {
	*RunInfo
	massSummary
	MedianPPRMSE float64 `json:"median_pp_rmse"`
	// With a correction, as fitRecord's, and the mean number of model
	// classes corrected per voxel.
	correctionSummary
	MeanCorrectClasses float64 `json:"mean_correct_classes,omitempty"`
}

// selection is Run for a dMRI family that is not ball-and-sticks: the
// model-selection maps of SelectFitter, with finished batches kept in a
// resumable state (StateFile, keyed as the ball-and-sticks fit's) so that
// an interrupted run continues.
func (r *run) selection(ctx context.Context) (*RunSummary, error) {
	s, scan := r.set, r.scan
	ft, weights, key, err := setUp(r, NewSelectFitter)
	if err != nil {
		return nil, err
	}
	settings := selectionSettings{FitSettings: s, Checkpoint: r.cfg.Checkpoint, Model: r.cfg.Model, Family: ft.Family().Name(),
		WeightsSHA: weights, Models: len(ft.Models), Classes: len(ft.Classes), Sticks: len(ft.Sticks)}
	if ft.sampled {
		settings.ModelDraws = max(ModelDraws, s.Samples)
	}
	release, err := r.begin(settings)
	if err != nil {
		return nil, err
	}
	defer release()
	a := ft.NewSelection(scan)
	st, err := OpenSelectState(filepath.Join(r.cfg.Out, StateFile), key, a, r.cfg.Fresh)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	resumed, nv := st.Done(), len(scan.Voxels)
	settings.ResumedVoxels = resumed
	r.info.Settings = settings
	over := fmt.Sprintf("over %d models", len(ft.Models))
	if ft.sampled {
		over = fmt.Sprintf("from %d draws of q(M | x, λ) per voxel (2^%d masks, too many to list)", settings.ModelDraws, len(ft.Family().Components()))
	}
	r.logf("%s network %.12s…, model selection %s (%d component classes), λ %v, %d samples × %d %s steps",
		ft.Family().Name(), weights, over, len(ft.Classes), s.Lambda, s.Samples, s.Steps, s.Solver)
	if c := correctKey(s.Correct); c != "" {
		r.logf("--correct %s: %d particles per model class, classes with q ≥ %v and the MAP model's, and every model of ≤ %d compartments (--correct-always)",
			c, ft.cs.Particles, CorrectMinQ, s.CorrectAlways)
		if s.CorrectLambda > 0 {
			r.logf("--correct %s: also the classes with q ≥ %v at λ %v (--correct-lambda)", c, CorrectMinQ, s.CorrectLambda)
		}
	}

	all, writeStart, err := fitAndWrite(r, resumed,
		func(progress func(int)) (*Selection, error) { return ft.Fit(ctx, scan, a, st, progress) },
		func(all *Selection) error { return ft.WriteSelection(r.cfg.Out, scan, all) })
	if err != nil {
		return nil, err
	}
	rec := selectionRecord{RunInfo: r.info, massSummary: summariseMass(all.ModelMass), MedianPPRMSE: medianF32(all.PPRMSE)}
	if all.CorrFailed != nil {
		rec.correctionSummary = r.summariseCorrection(all.CorrFailed, all.CorrESS, all.CorrLogZSE)
		rec.MeanCorrectClasses = meanF32(all.CorrClasses)
	}
	if err := r.finish(rec, writeStart, nv-resumed, st.recordFile); err != nil {
		return nil, err
	}
	return &RunSummary{Info: r.info, Resumed: resumed, MeanModelMass: rec.MeanModelMass}, nil
}

// interruptedError says what an interrupted run left (msg) and wraps the
// cancellation (err), so that callers can test for context.Canceled.
type interruptedError struct {
	msg string
	err error
}

func (e interruptedError) Error() string { return e.msg }
func (e interruptedError) Unwrap() error { return e.err }

// correctKey is the correction method, "" for none.
func correctKey(m string) string {
	if m == "none" {
		return ""
	}
	return m
}

// SkipSummary lists the skipped voxels by reason, " (reason: n, …)", or
// "" when none was skipped.
func SkipSummary(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// belowHalf counts the voxels whose model mass is below 0.5.
func belowHalf(mass []float32) int {
	n := 0
	for _, m := range mass {
		if m < 0.5 {
			n++
		}
	}
	return n
}

func meanF32(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s / float64(len(x))
}

// medianF32 is the median of the non-NaN values of x, 0 when there is none
// (run.json has no NaN).
func medianF32(x []float32) float64 {
	v := make([]float64, len(x))
	for i, a := range x {
		v[i] = float64(a)
	}
	if m := quantile.Median(v); !math.IsNaN(m) {
		return m
	}
	return 0
}

// cpuSeconds is the process CPU time in seconds for run.json (0 where
// unreadable).
func cpuSeconds() float64 {
	s, _ := cputime.Seconds()
	return s
}
