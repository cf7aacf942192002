package view

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/demo"
)

// FitRun is what `prism view --dmri FOLDER` needs from a `prism dmri fit`
// output folder's run.json: the scan it fitted and the network and
// settings it used.
type FitRun struct {
	Inputs     dmrifit.ScanFiles
	Model      string // shipped network name, or
	Checkpoint string // checkpoint path
	Settings   DMRISettings
}

// ReadFitRun reads FOLDER/run.json of `prism dmri fit` (or of `prism
// demo`'s dmri folder). Relative input paths are as the fit was given
// them (relative to its working directory).
func ReadFitRun(folder string) (*FitRun, error) {
	path := filepath.Join(folder, "run.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	var run struct {
		Tool     string            `json:"tool"`
		Inputs   dmrifit.ScanFiles `json:"inputs"`
		Settings struct {
			dmrifit.FitSettings
			Checkpoint string `json:"checkpoint"`
			Model      string `json:"model"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(b, &run); err != nil {
		return nil, fmt.Errorf("view: %s: %w", path, err)
	}
	s := run.Settings
	switch run.Tool {
	case "prism dmri fit":
	case "prism demo": // the demo fits with its shipped network
		s.Model = demo.DMRIModel
	default:
		return nil, fmt.Errorf("view: %s was written by %q, not `prism dmri fit` or `prism demo`", path, run.Tool)
	}
	return &FitRun{Inputs: run.Inputs, Model: s.Model, Checkpoint: s.Checkpoint,
		Settings: DMRISettings{Lambda: s.Lambda, VoxelSamples: s.Samples, Steps: s.Steps, Solver: s.Solver, Seed: s.Seed}}, nil
}
