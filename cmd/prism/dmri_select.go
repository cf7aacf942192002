package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/posterior"
)

// selectRun is what runDMRIFit has read and checked when the network's
// family is not ball-and-sticks: the model-selection fit takes over.
type selectRun struct {
	files        dmrifit.ScanFiles
	out          string
	fresh, quiet bool
	shard        string
	net          *netFlags
	scan         *dmrifit.Scan
	set          dmrifit.FitSettings
	post         *posterior.Posterior
	start        time.Time
	ckStart      time.Time
	load         float64
}

// selectRunSettings are the settings recorded in run.json of a
// model-selection fit.
type selectRunSettings struct {
	dmrifit.FitSettings
	Checkpoint string `json:"checkpoint,omitempty"`
	Model      string `json:"model,omitempty"`
	Family     string `json:"family"`
	WeightsSHA string `json:"weights_sha256"`
	Models     int    `json:"models"`
	Classes    int    `json:"classes"`
	Sticks     int    `json:"bedpostx_sticks"`
}

// selectRunExtra is run.json of a model-selection fit.
type selectRunExtra struct {
	*dmrifit.RunInfo
	MeanModelMass      float64 `json:"mean_model_mass"`
	ModelMassBelowHalf int     `json:"voxels_model_mass_below_half"`
	MedianPPRMSE       float64 `json:"median_pp_rmse"`
}

// runSelectFit is `prism dmri fit` for dMRI families other than
// ball-and-sticks (bszt, bszt-conv): the model-selection maps of
// dmrifit.SelectFitter.
func runSelectFit(r selectRun, stderr io.Writer) error {
	if r.shard != "" {
		return fmt.Errorf("--shard: sharded fits are only available for ball-and-sticks families (b3s); %s is fitted in one run", r.post.Family().Name())
	}
	ft, err := dmrifit.NewSelectFitter(r.post, r.set)
	if err != nil {
		return fmt.Errorf("%s: %w", r.net.source(), err)
	}
	weights := dmrifit.WeightsHash(r.post)
	ckTime := time.Since(r.ckStart).Seconds()
	lock, err := dirlock.Acquire(r.out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := dmrifit.PrepareOutput(r.out, r.fresh); err != nil {
		return err
	}
	s, scan := r.set, r.scan
	info := dmrifit.NewRunInfo("prism dmri fit", scan)
	info.Version, info.GoVersion, info.Started = prismVersion(), runtime.Version(), r.start.UTC().Format(time.RFC3339)
	info.Settings = selectRunSettings{FitSettings: s, Checkpoint: *r.net.checkpoint, Model: *r.net.model, Family: ft.Family().Name(),
		WeightsSHA: weights, Models: len(ft.Models), Classes: len(ft.Classes), Sticks: len(ft.Sticks)}
	info.Workers = runtime.GOMAXPROCS(0)
	info.Timings["load"] = r.load
	info.Timings["checkpoint"] = ckTime
	nv := len(scan.Voxels)
	fmt.Fprintf(stderr, "dmri fit: %d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s\n",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), skipSummary(scan.Skipped))
	fmt.Fprintf(stderr, "dmri fit: %s network %.12s…, model selection over %d models (%d component classes), λ %v, %d samples × %d %s steps\n",
		ft.Family().Name(), weights, len(ft.Models), len(ft.Classes), s.Lambda, s.Samples, s.Steps, s.Solver)

	ctx, stop := interruptContext(stderr, "dmri fit: stopping; nothing is written")
	defer stop()
	fitStart := time.Now()
	cpuStart := cpuSeconds()
	var progress func(int)
	var bar *progressBar
	if !r.quiet {
		bar = newProgressBar(stderr, isTerminal(stderr), "dmri fit", nv, 0, fitStart)
		progress = bar.update
	}
	all, err := ft.Fit(ctx, scan, progress)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; no output written")
		}
		return err
	}
	fitTime := time.Since(fitStart).Seconds()
	info.Timings["fit"] = fitTime
	info.Timings["fit_cpu"] = cpuSeconds() - cpuStart
	info.VoxelsPerSecond = float64(nv) / fitTime
	writeStart := time.Now()
	if err := ft.WriteSelection(r.out, scan, all); err != nil {
		return err
	}
	var low int
	for _, m := range all.ModelMass {
		if m < 0.5 {
			low++
		}
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(r.start).Seconds()
	extra := selectRunExtra{RunInfo: info, MeanModelMass: meanF32(all.ModelMass), ModelMassBelowHalf: low, MedianPPRMSE: medianF32(all.PPRMSE)}
	if err := dmrifit.WriteJSON(filepath.Join(r.out, "run.json"), extra); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri fit: %d voxels in %.1f s (%.1f voxels/s), total %.1f s; wrote %s\n",
		nv, fitTime, info.VoxelsPerSecond, info.Timings["total"], r.out)
	return nil
}
