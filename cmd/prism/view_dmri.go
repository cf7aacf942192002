package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/view"
)

// loadDMRIView loads the scan (from the flags, or the fit folder's
// run.json) and its network.
func loadDMRIView(folder string, files dmrifit.ScanFiles, checkpoint, model string, lambda float64, seed uint64, stderr io.Writer) (*view.DMRI, error) {
	set := view.DefaultDMRISettings()
	set.Seed = seed
	if folder != "" {
		run, err := view.ReadFitRun(folder)
		if err != nil {
			return nil, fmt.Errorf("--dmri: %w", err)
		}
		if files.DWI == "" {
			files = run.Inputs
		}
		if checkpoint == "" && model == "" {
			checkpoint, model = run.Checkpoint, run.Model
		}
		set = run.Settings
	}
	if files.DWI == "" || files.Bval == "" || files.Bvec == "" {
		return nil, errors.New("the scan needs --dwi, --bval and --bvec")
	}
	if lambda != 0 {
		if !(lambda > 0 && lambda < 1) {
			return nil, fmt.Errorf("--lambda %v: want 0 < λ < 1", lambda)
		}
		set.Lambda = lambda
	}
	post, err := loadPosterior(checkpoint, model)
	if err != nil {
		if errors.Is(err, errNoNetwork) {
			return nil, errors.New("the scan needs a ball-and-sticks network: --dmri-model NAME or --dmri-checkpoint DIR")
		}
		return nil, err
	}
	source := "model:" + model
	if model == "" {
		source = checkpoint
	}
	fmt.Fprintf(stderr, "prism view: loading %s\n", files.DWI)
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return nil, err
	}
	what := "the model posterior of the three middle slices at λ = " + fmt.Sprint(set.Lambda)
	if folder != "" {
		what = "the maps of " + folder
	}
	fmt.Fprintf(stderr, "prism view: %d voxels: tensor fit, then %s\n", len(scan.Voxels), what)
	d, err := view.NewDMRI(scan, post, folder, source, set)
	if err != nil {
		return nil, err
	}
	return d, nil
}
