package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/nifti"
)

const dtiSynopsis = "--dwi FILE --bval FILE --bvec FILE [--mask FILE] --out DIR [--wls-iter 1] [--save-tensor] [--workers N]"

const dtiAbout = `Fits the diffusion tensor in every mask voxel by log-linear least squares
(OLS, then --wls-iter WLS iterations weighted by the previous fit's
predicted signal squared; measurements with a non-positive signal are left
out) and writes FSL dtifit
names into DIR: dti_FA, dti_MD, dti_MO, dti_L1, dti_L2, dti_L3, dti_S0
(3-D), dti_V1, dti_V2, dti_V3 (4-D, 3 volumes), optionally dti_tensor, and
run.json. Images keep the DWI's grid and qform/sform. Vectors are in the
b-vectors' frame (FSL's voxel convention for FSL tables), as the dyads of
prism dmri fit and dtifit's V1. Preprocessing and skipped voxels are as in
prism dmri fit (docs/dmri.md, "DTI baseline").`

// dtiSettings are the settings recorded in run.json.
type dtiSettings struct {
	Method        string `json:"method"`
	WLSIterations int    `json:"wls_iterations"`
	SaveTensor    bool   `json:"save_tensor"`
	S0Units       string `json:"s0_units"`
}

// dtiRunInfo is run.json of `dmri dti`: the common record plus fit
// summaries.
type dtiRunInfo struct {
	*dmrifit.RunInfo
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

func runDMRIDTI(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dmri dti", dtiSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prism dmri dti %s\n\n%s\n\nFlags:\n", dtiSynopsis, dtiAbout)
		fs.PrintDefaults()
	}
	var files dmrifit.ScanFiles
	scanFileFlags(fs, &files)
	out := fs.String("out", "", "output folder (created if needed)")
	wlsIter := fs.Int("wls-iter", dti.DefaultWLSIterations, "WLS iterations after the OLS fit (0: OLS only)")
	saveTensor := fs.Bool("save-tensor", false, "also write dti_tensor: 6 volumes Dxx, Dxy, Dxz, Dyy, Dyz, Dzz in mm²/s (dtifit --save_tensor order)")
	workers := fs.Int("workers", 0, "parallel workers (default: all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkScanArgs(fs, files, *out); err != nil {
		return err
	}
	for _, f := range []struct{ flag, path string }{{"--dwi", files.DWI}, {"--bval", files.Bval}, {"--bvec", files.Bvec}, {"--mask", files.Mask}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	if *workers <= 0 {
		*workers = runtime.GOMAXPROCS(0)
	}

	// Everything is read, checked and fitted before the output folder is
	// touched.
	start := time.Now()
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	loadTime := time.Since(start).Seconds()
	nv := len(scan.Voxels)
	if nv == 0 {
		return fmt.Errorf("%s: no voxel to fit: %d voxels in the %s mask, all skipped%s", files.DWI, scan.MaskCount(), scan.MaskSource, skipSummary(scan.Skipped))
	}
	if *wlsIter < 0 {
		return fmt.Errorf("--wls-iter %d: want ≥ 0", *wlsIter)
	}
	fitter, err := dti.NewFitter(scan.Design, *wlsIter)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", files.Bval, files.Bvec, err)
	}
	fmt.Fprintf(stderr, "dmri dti: %d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s\n",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), skipSummary(scan.Skipped))

	fitStart := time.Now()
	cpuStart := cpuSeconds()
	fits, errs := make([]dti.Fit, nv), make([]error, nv)
	if err := fitter.FitVoxels(scan.Signal, fits, errs, *workers); err != nil {
		return err
	}
	fitTime := time.Since(fitStart).Seconds()
	fitCPU := cpuSeconds() - cpuStart

	info := dmrifit.NewRunInfo("prism dmri dti", scan)
	info.Version, info.GoVersion, info.Started = prismVersion(), runtime.Version(), start.UTC().Format(time.RFC3339)
	info.Settings = dtiSettings{
		Method:        "log-linear OLS, then wls_iterations WLS iterations with weights = (signal predicted by the previous fit)²; measurements with signal ≤ 0 left out",
		WLSIterations: *wlsIter,
		SaveTensor:    *saveTensor,
		S0Units:       "the DWI's (fitted b0-normalised S0 × mean b0)",
	}
	info.Workers = *workers
	info.Timings["load"] = loadTime
	info.Timings["fit"] = fitTime
	info.Timings["fit_cpu"] = fitCPU
	info.VoxelsPerSecond = float64(nv) / fitTime
	run := &dtiRunInfo{RunInfo: info}
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
		return fmt.Errorf("%s: no voxel could be fitted%s", files.DWI, skipSummary(info.VoxelsSkipped))
	}
	run.MedianFA, run.MedianMD = quickMedian(fa), quickMedian(md)

	writeStart := time.Now()
	lock, err := dirlock.Acquire(*out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := writeDTI(*out, scan, fits, ok, *saveTensor); err != nil {
		return err
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(start).Seconds()
	if err := dmrifit.WriteJSON(filepath.Join(*out, "run.json"), run); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri dti: fitted %d voxels in %.2f s (%.0f voxels/s), %d skipped in all%s, %d with a negative eigenvalue; total %.1f s; wrote %s\n",
		info.VoxelsFitted, fitTime, info.VoxelsPerSecond, info.VoxelsInMask-info.VoxelsFitted, skipSummary(info.VoxelsSkipped),
		run.VoxelsNegativeEigenvalue, info.Timings["total"], *out)
	return nil
}

// writeDTI writes the dtifit-named maps of the fitted voxels (ok) into
// dir, zero elsewhere, each image atomically (nifti.Write).
func writeDTI(dir string, s *dmrifit.Scan, fits []dti.Fit, ok []bool, saveTensor bool) error {
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
		return nifti.Write(filepath.Join(dir, name+dmrifit.OutputExt), vol)
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
