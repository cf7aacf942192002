// Package demo runs prism's end-to-end demonstration behind `prism demo`:
// the shipped b3s network (package models) fitted to the bundled
// whole-brain diffusion scan (package data) with dmrifit.Fitter, and the
// shipped symbolic-k15 network's model posterior across the complexity
// knob λ and its posterior predictive band on the bundled
// symbolic-regression observation. It writes every output (BedpostX-layout
// maps, JSON summaries, PNG figures) and an index.html report that shows
// the key figures, so a new user sees a real result from one command.
//
// Layout of the output directory:
//
//	index.html          the report
//	summary.json        settings, timings, model hashes, headline numbers
//	data/               the bundled inputs (scan with its LICENSE, observation)
//	dmri/               `prism dmri fit` outputs (BedpostX layout + prism maps)
//	symbolic/           sweep.json, predict.json
//	figures/            the PNG figures of the report
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prismsbi/prism/data"
	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/cputime"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/models"
)

// Names of the shipped models the demo uses.
const (
	DMRIModel     = "b3s"
	SymbolicModel = "symbolic-k15"
)

// Config configures a demo run.
type Config struct {
	// Out is the output directory (created; existing files are replaced).
	Out string
	// Slices is the number of axial slices around the middle of the scan
	// that are fitted; 0 fits the whole brain mask.
	Slices int
	// Fit configures the amortized dMRI fit.
	Fit dmrifit.FitSettings
	// Lambdas is the λ grid of the sweep, increasing, in [0, 1].
	Lambdas []float64
	// SweepMasks is the number of masks drawn from q(M | x, λ) per λ.
	SweepMasks int
	// PredictLambda, PredictSamples and Steps configure the
	// model-averaged posterior predictive band of the symbolic example.
	PredictLambda  float64
	PredictSamples int
	Steps          int
	// Seed selects every random stream of the symbolic part (the fit has
	// its own Fit.Seed).
	Seed uint64
	// Log receives one line per stage (nil: silent).
	Log io.Writer
	// FitProgress, if not nil, is called after every batch of the dMRI
	// fit with the number of voxels done and the total.
	FitProgress func(done, total int)
}

// DefaultConfig returns the settings of `prism demo` (quick false) and
// `prism demo --quick`. The full run fits the whole brain mask with 20
// joint samples × 12 AB2 steps per voxel (the fit's default steps; fewer
// samples than its 50 so that the demo stays well within 15 minutes) and
// no ESS pass (the importance pass costs more than the fit itself); quick
// fits the two middle slices with 8 × 8 and a smaller sweep.
func DefaultConfig(quick bool) Config {
	fit := dmrifit.DefaultFitSettings()
	fit.Samples, fit.Steps, fit.ESSSamples = 20, 12, 0
	c := Config{
		Fit:            fit,
		Lambdas:        []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1},
		SweepMasks:     500,
		PredictLambda:  0.3,
		PredictSamples: 500,
		Steps:          32,
		Seed:           1,
	}
	if quick {
		c.Slices = 2
		c.Fit.Samples, c.Fit.Steps = 8, 8
		c.SweepMasks, c.PredictSamples, c.Steps = 200, 200, 16
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Out == "":
		return errors.New("demo: no output directory")
	case c.Slices < 0:
		return fmt.Errorf("demo: %d slices, want ≥ 0", c.Slices)
	case len(c.Lambdas) == 0:
		return errors.New("demo: empty λ grid")
	case c.SweepMasks < 1 || c.PredictSamples < 2 || c.Steps < 1:
		return fmt.Errorf("demo: need ≥ 1 sweep masks, ≥ 2 predictive samples and ≥ 1 solver steps, have %d, %d, %d",
			c.SweepMasks, c.PredictSamples, c.Steps)
	case !(c.PredictLambda >= 0 && c.PredictLambda <= 1):
		return fmt.Errorf("demo: predictive λ = %v, want 0 ≤ λ ≤ 1", c.PredictLambda)
	}
	for i, l := range c.Lambdas {
		if !(l >= 0 && l <= 1) || (i > 0 && !(l > c.Lambdas[i-1])) {
			return fmt.Errorf("demo: λ grid %v: want increasing values in [0, 1]", c.Lambdas)
		}
	}
	return c.Fit.Validate()
}

// Stage is the wall and CPU time of one part of the run, in seconds.
type Stage struct {
	Wall float64 `json:"wall_s"`
	CPU  float64 `json:"cpu_s"`
}

// Summary is what summary.json records, and what the report shows.
type Summary struct {
	GoVersion string                 `json:"go_version"`
	Kernels   string                 `json:"kernels"` // the engine's kernel path
	Workers   int                    `json:"workers"`
	Started   string                 `json:"started"`
	Models    map[string]models.Info `json:"models"`
	DMRI      *DMRIResult            `json:"dmri"`
	Symbolic  *SymbolicResult        `json:"symbolic"`
	Stages    map[string]Stage       `json:"stages"`
	Total     Stage                  `json:"total"`
}

// Files of the output directory.
const (
	ReportFile  = "index.html"
	SummaryFile = "summary.json"
	dataDir     = "data"
	dmriDir     = "dmri"
	symbolicDir = "symbolic"
	figuresDir  = "figures"
)

// Run runs the demo into c.Out and returns its summary. A cancelled ctx
// stops the dMRI fit after its current batch.
func Run(ctx context.Context, c Config) (*Summary, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	nz, err := scanSlices()
	if err != nil {
		return nil, fmt.Errorf("demo: bundled scan: %w", err)
	}
	if c.Slices > nz {
		return nil, fmt.Errorf("demo: %d slices asked for, the bundled scan has %d; give at most %d (0: the whole brain)", c.Slices, nz, nz)
	}
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, "demo: "+format+"\n", a...)
		}
	}
	start, cpu0 := time.Now(), cpuSeconds()
	s := &Summary{GoVersion: runtime.Version(), Kernels: kernels.Path(), Workers: runtime.GOMAXPROCS(0), Started: start.UTC().Format(time.RFC3339),
		Models: map[string]models.Info{}, Stages: map[string]Stage{}}
	stage := func(name string, f func() error) error {
		t, cp := time.Now(), cpuSeconds()
		if err := f(); err != nil {
			return err
		}
		s.Stages[name] = Stage{Wall: time.Since(t).Seconds(), CPU: cpuSeconds() - cp}
		return nil
	}
	lock, err := dirlock.Acquire(c.Out)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer lock.Release()
	for _, d := range []string{dataDir, dmriDir, symbolicDir, figuresDir} {
		if err := os.MkdirAll(filepath.Join(c.Out, d), 0o755); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	for _, name := range []string{DMRIModel, SymbolicModel} {
		info, err := models.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		s.Models[name] = info
	}
	logf("writing the bundled example data to %s", filepath.Join(c.Out, dataDir))
	if err := data.CopyTo(filepath.Join(c.Out, dataDir)); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	err = stage("dmri", func() (err error) {
		s.DMRI, err = runDMRI(ctx, c, logf)
		return err
	})
	if err != nil {
		return nil, err
	}
	err = stage("symbolic", func() (err error) {
		s.Symbolic, err = runSymbolic(c, logf)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.Total = Stage{Wall: time.Since(start).Seconds(), CPU: cpuSeconds() - cpu0}
	if err := atomicfile.WriteJSON(filepath.Join(c.Out, SummaryFile), s); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := writeReport(filepath.Join(c.Out, ReportFile), s); err != nil {
		return nil, err
	}
	logf("report: %s", filepath.Join(c.Out, ReportFile))
	return s, nil
}

// cpuSeconds is the process CPU time (0 where unreadable).
func cpuSeconds() float64 {
	v, _ := cputime.Seconds()
	return v
}
