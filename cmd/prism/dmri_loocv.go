package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/posterior"
)

const loocvSynopsis = "--dwi FILE --bval FILE --bvec FILE [--mask FILE] [--checkpoint DIR | --model NAME] --out DIR [--volumes K] [--samples N]"

const loocvAbout = `Leave-one-volume-out cross-validation of the signal prediction (paper
Fig. 5b): each of K diffusion-weighted volumes (evenly spread; b0 volumes
are never held out, they normalise the signal) is left out in turn, the
methods are fitted to the remaining volumes, and they predict the left-out
b0-normalised signal. Methods: the diffusion tensor (package dti, OLS + WLS)
always; with --checkpoint/--model also the network's model-averaged
posterior predictive (M ~ q(M | x, λ), θ ~ q(θ | M, x)). Writes per-voxel
LOOCV RMSE maps loo_rmse_dti and loo_rmse_network, wm_mask (FA ≥ --fa-wm of
the full-data tensor fit), loocv.json (median and mean over all and over
white-matter voxels, the share of voxels where the network is better) and
run.json.`

// loocvReport is loocv.json.
type loocvReport struct {
	HeldOut []int                `json:"held_out_volumes"` // 0-based volume indices
	FAWM    float64              `json:"fa_wm"`
	Methods []dmrifit.LOOSummary `json:"methods"`
	// With a network: the share of (white-matter) voxels where its LOOCV
	// RMSE is below the tensor's, and the median paired difference
	// network − dti.
	NetworkBetter      *float64 `json:"share_network_better,omitempty"`
	WMNetworkBetter    *float64 `json:"wm_share_network_better,omitempty"`
	WMMedianDifference *float64 `json:"wm_median_difference,omitempty"`
}

type loocvSettings struct {
	Volumes    int                         `json:"volumes"`
	WLS        int                         `json:"wls_iterations"`
	FAWM       float64                     `json:"fa_wm"`
	Network    *dmrifit.NetworkLOOSettings `json:"network,omitempty"`
	Checkpoint string                      `json:"checkpoint,omitempty"`
	Model      string                      `json:"model,omitempty"`
	Family     string                      `json:"family,omitempty"`
	WeightsSHA string                      `json:"weights_sha256,omitempty"`
}

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
	}

	start := time.Now()
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	nv := len(scan.Voxels)
	if nv == 0 {
		return fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", files.DWI, scan.MaskCount(), scan.MaskSource, skipSummary(scan.Skipped))
	}
	held := dmrifit.HeldOutVolumes(scan.Design, *volumes)
	if len(held) == 0 {
		return fmt.Errorf("%s: no diffusion-weighted volume to hold out", files.Bval)
	}
	settings := loocvSettings{Volumes: len(held), WLS: *wls, FAWM: *faWM}
	if net.given() {
		post, err := net.load()
		if err != nil {
			return err
		}
		settings.Network, settings.Checkpoint, settings.Model = &set, *net.checkpoint, *net.model
		settings.Family, settings.WeightsSHA = post.Family().Name(), dmrifit.WeightsHash(post)
		return loocvRun(files, *out, scan, held, settings, post, *quiet, start, stderr)
	}
	return loocvRun(files, *out, scan, held, settings, nil, *quiet, start, stderr)
}

// loocvRun fits, summarises and writes; post may be nil (tensor only).
func loocvRun(files dmrifit.ScanFiles, out string, scan *dmrifit.Scan, held []int, set loocvSettings, post *posterior.Posterior, quiet bool, start time.Time, stderr io.Writer) error {
	fmt.Fprintf(stderr, "dmri loocv: %d×%d×%d×%d, %d voxels, %d held-out volumes\n", scan.Nx, scan.Ny, scan.Nz, scan.Design.N, len(scan.Voxels), len(held))
	ctx, stop := interruptContext(stderr, "dmri loocv: stopping; nothing is written")
	defer stop()
	info := dmrifit.NewRunInfo("prism dmri loocv", scan)
	info.Version, info.GoVersion, info.Started = prismVersion(), runtime.Version(), start.UTC().Format(time.RFC3339)
	info.Settings = set
	info.Workers = runtime.GOMAXPROCS(0)

	wm, err := dmrifit.WhiteMatter(scan, set.FAWM)
	if err != nil {
		return fmt.Errorf("%s: %w", files.DWI, err)
	}
	t0 := time.Now()
	tl, err := dmrifit.TensorLOO(ctx, scan, held, set.WLS)
	if err != nil {
		return fmt.Errorf("%s: %w", files.Bval, err)
	}
	info.Timings["dti"] = time.Since(t0).Seconds()
	dtiErr := tl.RMSE(scan)
	rep := loocvReport{HeldOut: held, FAWM: set.FAWM, Methods: []dmrifit.LOOSummary{dmrifit.SummariseLOO("dti", dtiErr, wm)}}
	maps := map[string][]float64{"loo_rmse_dti": dtiErr}
	if post != nil {
		t1 := time.Now()
		var progress func(int)
		var bar *progressBar
		if !quiet {
			bar = newProgressBar(stderr, isTerminal(stderr), "dmri loocv", len(held)*len(scan.Voxels), 0, t1)
			progress = bar.update
		}
		nl, err := dmrifit.NetworkLOO(ctx, post, scan, held, *set.Network, progress)
		if bar != nil {
			bar.finish()
		}
		if err != nil {
			if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
				return errors.New("interrupted; no output written")
			}
			return err
		}
		info.Timings["network"] = time.Since(t1).Seconds()
		netErr := nl.RMSE(scan)
		maps["loo_rmse_network"] = netErr
		rep.Methods = append(rep.Methods, dmrifit.SummariseLOO("network ("+set.Family+")", netErr, wm))
		var better, wmBetter, n, wmN int
		var diffs []float64
		for v := range netErr {
			if math.IsNaN(netErr[v]) || math.IsNaN(dtiErr[v]) {
				continue
			}
			n++
			if netErr[v] < dtiErr[v] {
				better++
			}
			if wm[v] {
				wmN++
				diffs = append(diffs, netErr[v]-dtiErr[v])
				if netErr[v] < dtiErr[v] {
					wmBetter++
				}
			}
		}
		if n > 0 {
			b := float64(better) / float64(n)
			rep.NetworkBetter = &b
		}
		if wmN > 0 {
			b, d := float64(wmBetter)/float64(wmN), quickMedian(diffs)
			rep.WMNetworkBetter, rep.WMMedianDifference = &b, &d
		}
	}

	lock, err := dirlock.Acquire(out)
	if err != nil {
		return err
	}
	defer lock.Release()
	nvox := scan.NumVoxels()
	for name, src := range maps {
		vol, err := nifti.NewLike(scan.Ref, nifti.Float32, scan.Nx, scan.Ny, scan.Nz)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for v, i := range scan.Voxels {
			vol.Data[i] = float32(src[v])
		}
		if err := nifti.Write(filepath.Join(out, name+dmrifit.OutputExt), vol); err != nil {
			return err
		}
	}
	vol, err := nifti.NewLike(scan.Ref, nifti.Uint8, scan.Nx, scan.Ny, scan.Nz)
	if err != nil {
		return err
	}
	for v, i := range scan.Voxels {
		if wm[v] && i < nvox {
			vol.Data[i] = 1
		}
	}
	if err := nifti.Write(filepath.Join(out, "wm_mask"+dmrifit.OutputExt), vol); err != nil {
		return err
	}
	if err := dmrifit.WriteJSON(filepath.Join(out, "loocv.json"), rep); err != nil {
		return err
	}
	info.Timings["total"] = time.Since(start).Seconds()
	if err := dmrifit.WriteJSON(filepath.Join(out, "run.json"), info); err != nil {
		return err
	}
	for _, m := range rep.Methods {
		fmt.Fprintf(stderr, "dmri loocv: %-22s median RMSE %.4f (white matter, %d voxels: %.4f)\n", m.Method, m.Median, m.WMVoxels, m.WMMedian)
	}
	fmt.Fprintf(stderr, "dmri loocv: total %.1f s; wrote %s\n", info.Timings["total"], out)
	return nil
}
