package dmrifit

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/progress"
)

// VoxelChain is the ball-and-sticks samples of one voxel drawn by a
// per-voxel sampler (package mcmc): per stick i, F[i], Theta[i] and
// Phi[i] hold one value per sample, as D, DStd and S0 do.
type VoxelChain struct {
	F, Theta, Phi [][]float64
	D, DStd, S0   []float64
}

// Sampler draws the samples of the voxels with the given stream ids
// (one per fitted voxel, in order) on workers goroutines, calls emit
// once per voxel (concurrently; err if its sampler failed) and progress
// with the number of voxels done. `prism dmri mcmc` wraps mcmc.RunVoxels.
type Sampler func(ids []uint64, workers int, emit func(v int, c VoxelChain, err error), progress func(done int)) error

// SamplerConfig configures RunSampler; Tool, Version, Out, Log (lines
// prefixed "dmri mcmc: "), Progress, Started and Timings are as in
// RunConfig.
type SamplerConfig struct {
	Tool, Version string
	Out           string
	Log           io.Writer
	Progress      progress.Start
	Started       time.Time
	Timings       map[string]float64
	// Fibres sticks and Samples samples per voxel; Settings are recorded
	// in run.json and Describe (one line) in the log; Workers (≤ 0: all
	// cores) sample in parallel.
	Fibres, Samples, Workers int
	Settings                 any
	Describe                 string
}

// RunSampler samples every voxel of scan with sample and writes the
// BedpostX layout (WriteBedpostX) and run.json into cfg.Out, locked. A
// voxel whose sampler fails keeps zero samples and is counted as skipped
// in run.json, by the sampler's error.
func RunSampler(scan *Scan, sample Sampler, cfg SamplerConfig) error {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "dmri mcmc: "+format+"\n", a...)
		}
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	lock, err := dirlock.Acquire(cfg.Out)
	if err != nil {
		return err
	}
	defer lock.Release()
	info := NewRunInfo(cfg.Tool, scan)
	info.Version, info.GoVersion, info.Started = cfg.Version, runtime.Version(), cfg.Started.UTC().Format(time.RFC3339)
	info.Settings, info.Workers = cfg.Settings, cfg.Workers
	for k, v := range cfg.Timings {
		info.Timings[k] = v
	}
	nv := len(scan.Voxels)
	logf("%d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), SkipSummary(scan.Skipped))
	if cfg.Describe != "" {
		logf("%s", cfg.Describe)
	}
	if nv == 0 {
		return fmt.Errorf("no voxel to fit")
	}
	post, err := NewStickSamples(scan.Voxels, cfg.Fibres, cfg.Samples)
	if err != nil {
		return err
	}
	ids := make([]uint64, nv)
	for v, i := range scan.Voxels {
		ids[v] = uint64(i)
	}
	var mu sync.Mutex
	failed := map[string]int{}
	fitStart := time.Now()
	bar := progress.Begin(cfg.Progress, "dmri mcmc", nv, 0)
	S := cfg.Samples
	err = sample(ids, cfg.Workers, func(v int, c VoxelChain, err error) {
		if err != nil {
			// Leave the voxel's samples at zero and report it.
			mu.Lock()
			failed["sampler: "+err.Error()]++
			mu.Unlock()
			return
		}
		for k := range S {
			o := v*S + k
			post.D[o], post.DStd[o], post.S0[o] = float32(c.D[k]), float32(c.DStd[k]), float32(c.S0[k])
			for i := range cfg.Fibres {
				post.F[i][o], post.Theta[i][o], post.Phi[i][o] = float32(c.F[i][k]), float32(c.Theta[i][k]), float32(c.Phi[i][k])
			}
		}
	}, bar.Update)
	bar.Finish()
	if err != nil {
		return err
	}
	fitTime := time.Since(fitStart).Seconds()
	info.Timings["fit"] = fitTime
	info.VoxelsPerSecond = float64(nv) / fitTime
	for k, n := range failed {
		info.VoxelsSkipped[k] += n
		info.VoxelsFitted -= n
	}
	writeStart := time.Now()
	if err := WriteBedpostX(cfg.Out, scan.Ref, scan.Mask, post); err != nil {
		return err
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(cfg.Started).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(cfg.Out, "run.json"), info); err != nil {
		return err
	}
	logf("%d voxels in %.1f s (%.1f voxels/s), total %.1f s; wrote %s", nv, fitTime, info.VoxelsPerSecond, info.Timings["total"], cfg.Out)
	return nil
}
