package dmrifit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/internal/quantile"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/posterior"
)

// LOOCVConfig configures RunLOOCV; the fields are as in RunConfig (Log
// gets lines prefixed "dmri loocv: ").
type LOOCVConfig struct {
	Tool, Version string
	Out           string
	Log           io.Writer
	Progress      progress.Start
	Started       time.Time
}

// LOOCVReport is loocv.json.
type LOOCVReport struct {
	HeldOut []int        `json:"held_out_volumes"` // 0-based volume indices
	FAWM    float64      `json:"fa_wm"`
	Methods []LOOSummary `json:"methods"`
	// With a network: the share of (white-matter) voxels where its LOOCV
	// RMSE is below the tensor's, and the median paired difference
	// network − dti.
	NetworkBetter      *float64 `json:"share_network_better,omitempty"`
	WMNetworkBetter    *float64 `json:"wm_share_network_better,omitempty"`
	WMMedianDifference *float64 `json:"wm_median_difference,omitempty"`
}

// LOOCVSettings are the settings of `dmri loocv`, recorded in run.json:
// the held-out volumes, the tensor fit, the white-matter threshold and,
// with a network, its settings and identity.
type LOOCVSettings struct {
	Volumes    int                 `json:"volumes"`
	WLS        int                 `json:"wls_iterations"`
	FAWM       float64             `json:"fa_wm"`
	Network    *NetworkLOOSettings `json:"network,omitempty"`
	Checkpoint string              `json:"checkpoint,omitempty"`
	Model      string              `json:"model,omitempty"`
	Family     string              `json:"family,omitempty"`
	WeightsSHA string              `json:"weights_sha256,omitempty"`
}

// RunLOOCV cross-validates the signal prediction of the tensor and, when
// post is not nil, of the network's model-averaged posterior predictive by
// leaving out the held volumes in turn (TensorLOO, NetworkLOO), and writes
// loo_rmse_dti, loo_rmse_network, wm_mask, loocv.json and run.json into
// cfg.Out (locked while it writes; nothing is written before the fits
// are done).
func RunLOOCV(ctx context.Context, scan *Scan, held []int, set LOOCVSettings, post *posterior.Posterior, cfg LOOCVConfig) (*LOOCVReport, error) {
	stderr := cfg.Log
	if stderr == nil {
		stderr = io.Discard
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	start, out, files := cfg.Started, cfg.Out, scan.Files
	fmt.Fprintf(stderr, "dmri loocv: %d×%d×%d×%d, %d voxels, %d held-out volumes\n", scan.Nx, scan.Ny, scan.Nz, scan.Design.N, len(scan.Voxels), len(held))
	info := NewRunInfo(cfg.Tool, scan)
	info.Version, info.GoVersion, info.Started = cfg.Version, runtime.Version(), start.UTC().Format(time.RFC3339)
	info.Settings = set
	info.Workers = runtime.GOMAXPROCS(0)

	if post != nil && set.Network != nil && set.Network.corrected() {
		// Refuse a correction that cannot run before the tensor's fits.
		if err := set.Network.checkCorrection(post.Family()); err != nil {
			return nil, err
		}
	}
	wm, err := WhiteMatter(scan, set.FAWM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", files.DWI, err)
	}
	t0 := time.Now()
	tl, err := TensorLOO(ctx, scan, held, set.WLS)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", files.Bval, err)
	}
	info.Timings["dti"] = time.Since(t0).Seconds()
	dtiErr := tl.RMSE(scan)
	rep := LOOCVReport{HeldOut: held, FAWM: set.FAWM, Methods: []LOOSummary{SummariseLOO("dti", dtiErr, wm)}}
	maps := map[string][]float64{"loo_rmse_dti": dtiErr}
	if post != nil {
		t1 := time.Now()
		bar := progress.Begin(cfg.Progress, "dmri loocv", len(held)*len(scan.Voxels), 0)
		nl, err := NetworkLOO(ctx, post, scan, held, *set.Network, bar.Update)
		bar.Finish()
		if err != nil {
			if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
				return nil, errors.New("interrupted; no output written")
			}
			return nil, err
		}
		info.Timings["network"] = time.Since(t1).Seconds()
		netErr := nl.RMSE(scan)
		maps["loo_rmse_network"] = netErr
		name := "network (" + set.Family + ")"
		if set.Network.corrected() {
			name = "network (" + set.Family + ", --correct " + set.Network.Correct + ")"
		}
		rep.Methods = append(rep.Methods, SummariseLOO(name, netErr, wm))
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
			b, d := float64(wmBetter)/float64(wmN), quantile.Median(diffs)
			rep.WMNetworkBetter, rep.WMMedianDifference = &b, &d
		}
	}

	lock, err := dirlock.Acquire(out)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	nvox := scan.NumVoxels()
	for name, src := range maps {
		vol, err := nifti.NewLike(scan.Ref, nifti.Float32, scan.Nx, scan.Ny, scan.Nz)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for v, i := range scan.Voxels {
			vol.Data[i] = float32(src[v])
		}
		if err := nifti.Write(filepath.Join(out, name+OutputExt), vol); err != nil {
			return nil, err
		}
	}
	vol, err := nifti.NewLike(scan.Ref, nifti.Uint8, scan.Nx, scan.Ny, scan.Nz)
	if err != nil {
		return nil, err
	}
	for v, i := range scan.Voxels {
		if wm[v] && i < nvox {
			vol.Data[i] = 1
		}
	}
	if err := nifti.Write(filepath.Join(out, "wm_mask"+OutputExt), vol); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteJSON(filepath.Join(out, "loocv.json"), rep); err != nil {
		return nil, err
	}
	info.Timings["total"] = time.Since(start).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(out, "run.json"), info); err != nil {
		return nil, err
	}
	for _, m := range rep.Methods {
		fmt.Fprintf(stderr, "dmri loocv: %-22s median RMSE %.4f (white matter, %d voxels: %.4f)\n", m.Method, m.Median, m.WMVoxels, m.WMMedian)
	}
	fmt.Fprintf(stderr, "dmri loocv: total %.1f s; wrote %s\n", info.Timings["total"], out)
	return &rep, nil
}
