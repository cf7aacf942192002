package dmrifit

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/quantile"
	"github.com/prismsbi/prism/nifti"
)

// DTIConfig configures RunDTI.
type DTIConfig struct {
	// Tool, Version, Started and Timings are as in RunConfig; Log gets
	// the one-line messages, prefixed "dmri dti: " (nil: none).
	Tool, Version string
	Out           string
	Log           io.Writer
	Started       time.Time
	Timings       map[string]float64
	// WLS is the number of WLS iterations after the OLS fit; SaveTensor
	// also writes dti_tensor; Workers (≤ 0: all cores) fit in parallel.
	WLS        int
	SaveTensor bool
	Workers    int
}

// dtiSettings are the settings recorded in run.json.
type dtiSettings struct {
	Method        string `json:"method"`
	WLSIterations int    `json:"wls_iterations"`
	SaveTensor    bool   `json:"save_tensor"`
	S0Units       string `json:"s0_units"`
}

// DTIRecord is run.json of `dmri dti`: the common record plus fit
// summaries.
type DTIRecord struct {
	*RunInfo
	// Voxels whose smallest fitted eigenvalue is negative (FA and MO use
	// the eigenvalues clipped at zero there).
	VoxelsNegativeEigenvalue int `json:"voxels_negative_eigenvalue"`
	// Voxels with at least one measurement ≤ 0 left out of the fit, and
	// the number of such measurements over all voxels.
	VoxelsWithExcludedMeasurements int     `json:"voxels_with_excluded_measurements"`
	MeasurementsExcluded           int     `json:"measurements_excluded"`
	MedianFA                       float64 `json:"median_fa"`
	MedianMD                       float64 `json:"median_md"`
}

// RunDTI fits the diffusion tensor (package dti) in every voxel of scan
// and writes FSL dtifit-named maps and run.json into cfg.Out (locked while
// it writes): dti_FA, dti_MD, dti_MO, dti_L1–3, dti_S0, dti_V1–3 and,
// with SaveTensor, dti_tensor. Everything is fitted before the folder is
// touched.
func RunDTI(scan *Scan, cfg DTIConfig) (*DTIRecord, error) {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "dmri dti: "+format+"\n", a...)
		}
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	nv := len(scan.Voxels)
	if nv == 0 {
		return nil, fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", scan.Files.DWI, scan.MaskCount(), scan.MaskSource, SkipSummary(scan.Skipped))
	}
	if cfg.WLS < 0 {
		return nil, fmt.Errorf("--wls-iter %d: want ≥ 0", cfg.WLS)
	}
	fitter, err := dti.NewFitter(scan.Design, cfg.WLS)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", scan.Files.Bval, scan.Files.Bvec, err)
	}
	logf("%d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), SkipSummary(scan.Skipped))

	fitStart := time.Now()
	cpuStart := cpuSeconds()
	fits, errs := make([]dti.Fit, nv), make([]error, nv)
	if err := fitter.FitVoxels(scan.Signal, fits, errs, cfg.Workers); err != nil {
		return nil, err
	}
	fitTime := time.Since(fitStart).Seconds()
	fitCPU := cpuSeconds() - cpuStart

	info := NewRunInfo(cfg.Tool, scan)
	info.Version, info.GoVersion, info.Started = cfg.Version, runtime.Version(), cfg.Started.UTC().Format(time.RFC3339)
	info.Settings = dtiSettings{
		Method:        "log-linear OLS, then wls_iterations WLS iterations with weights = (signal predicted by the previous fit)²; measurements with signal ≤ 0 left out",
		WLSIterations: cfg.WLS,
		SaveTensor:    cfg.SaveTensor,
		S0Units:       "the DWI's (fitted b0-normalised S0 × mean b0)",
	}
	info.Workers = cfg.Workers
	for k, v := range cfg.Timings {
		info.Timings[k] = v
	}
	info.Timings["fit"] = fitTime
	info.Timings["fit_cpu"] = fitCPU
	info.VoxelsPerSecond = float64(nv) / fitTime
	run := &DTIRecord{RunInfo: info}
	ok := make([]bool, nv)
	var fa, md []float64
	for v, e := range errs {
		if e != nil {
			info.VoxelsSkipped["tensor fit: "+e.Error()]++
			info.VoxelsFitted--
			continue
		}
		ok[v] = true
		f := &fits[v]
		if f.L[2] < 0 {
			run.VoxelsNegativeEigenvalue++
		}
		if f.Excluded > 0 {
			run.VoxelsWithExcludedMeasurements++
			run.MeasurementsExcluded += f.Excluded
		}
		fa, md = append(fa, f.FA), append(md, f.MD)
	}
	if len(fa) == 0 {
		return nil, fmt.Errorf("%s: no voxel could be fitted%s", scan.Files.DWI, SkipSummary(info.VoxelsSkipped))
	}
	run.MedianFA, run.MedianMD = quantile.Median(fa), quantile.Median(md)

	writeStart := time.Now()
	lock, err := dirlock.Acquire(cfg.Out)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := writeDTI(cfg.Out, scan, fits, ok, cfg.SaveTensor); err != nil {
		return nil, err
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(cfg.Started).Seconds()
	if err := atomicfile.WriteJSON(filepath.Join(cfg.Out, "run.json"), run); err != nil {
		return nil, err
	}
	logf("fitted %d voxels in %.2f s (%.0f voxels/s), %d skipped in all%s, %d with a negative eigenvalue; total %.1f s; wrote %s",
		info.VoxelsFitted, fitTime, info.VoxelsPerSecond, info.VoxelsInMask-info.VoxelsFitted, SkipSummary(info.VoxelsSkipped),
		run.VoxelsNegativeEigenvalue, info.Timings["total"], cfg.Out)
	return run, nil
}

// writeDTI writes the dtifit-named maps of the fitted voxels (ok) into
// dir, zero elsewhere, each image atomically (nifti.Write).
func writeDTI(dir string, s *Scan, fits []dti.Fit, ok []bool, saveTensor bool) error {
	nvox := s.NumVoxels()
	write := func(name string, vols int, value func(v, k int) float64) error {
		dims := []int{s.Nx, s.Ny, s.Nz}
		if vols > 1 {
			dims = append(dims, vols)
		}
		vol, err := nifti.NewLike(s.Ref, nifti.Float32, dims...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for v, i := range s.Voxels {
			if !ok[v] {
				continue
			}
			for k := range vols {
				vol.Data[i+k*nvox] = float32(value(v, k))
			}
		}
		return nifti.Write(filepath.Join(dir, name+OutputExt), vol)
	}
	maps := []struct {
		name  string
		vols  int
		value func(v, k int) float64
	}{
		{"dti_FA", 1, func(v, _ int) float64 { return fits[v].FA }},
		{"dti_MD", 1, func(v, _ int) float64 { return fits[v].MD }},
		{"dti_MO", 1, func(v, _ int) float64 { return fits[v].MO }},
		{"dti_L1", 1, func(v, _ int) float64 { return fits[v].L[0] }},
		{"dti_L2", 1, func(v, _ int) float64 { return fits[v].L[1] }},
		{"dti_L3", 1, func(v, _ int) float64 { return fits[v].L[2] }},
		{"dti_V1", 3, func(v, k int) float64 { return fits[v].V[0][k] }},
		{"dti_V2", 3, func(v, k int) float64 { return fits[v].V[1][k] }},
		{"dti_V3", 3, func(v, k int) float64 { return fits[v].V[2][k] }},
	}
	for _, m := range maps {
		if err := write(m.name, m.vols, m.value); err != nil {
			return err
		}
	}
	// S0 in the DWI's units: the fit is of the b0-normalised signal.
	if err := write("dti_S0", 1, func(v, _ int) float64 { return fits[v].S0 * float64(s.B0[s.Voxels[v]]) }); err != nil {
		return err
	}
	if saveTensor {
		order := [6]int{0, 3, 4, 1, 5, 2} // Dxx, Dxy, Dxz, Dyy, Dyz, Dzz from Fit.D's Dxx, Dyy, Dzz, Dxy, Dxz, Dyz
		if err := write("dti_tensor", 6, func(v, k int) float64 { return fits[v].D[order[k]] }); err != nil {
			return err
		}
	}
	return nil
}
