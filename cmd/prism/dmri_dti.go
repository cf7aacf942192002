package main

import (
	"fmt"
	"io"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/dti"
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
	if err := checkInputsExist(files, ""); err != nil {
		return err
	}
	start := time.Now()
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	_, err = dmrifit.RunDTI(scan, dmrifit.DTIConfig{Tool: "prism dmri dti", Version: prismVersion(), Out: *out, Log: stderr, Started: start,
		Timings: map[string]float64{"load": time.Since(start).Seconds()}, WLS: *wlsIter, SaveTensor: *saveTensor, Workers: *workers})
	return err
}
