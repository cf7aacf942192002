package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/prismsbi/prism/internal/demo"
	"github.com/prismsbi/prism/internal/progress"
)

func init() {
	register("demo", "run the shipped models on the bundled example data and write an HTML report (--quick: a small slab)", runDemo)
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "--out DIR [--quick]", stderr)
	out := fs.String("out", "", "output directory (index.html, summary.json, data/, dmri/, symbolic/, figures/)")
	quick := fs.Bool("quick", false, "fit only the two middle slices of the scan, with fewer samples and a smaller sweep (about a minute)")
	slices := fs.Int("slices", -1, "fit this many middle slices (0: the whole brain mask); default 0, or 2 with --quick")
	samples := fs.Int("samples", 0, "joint posterior samples per voxel of the dMRI fit (default 20, or 8 with --quick)")
	steps := fs.Int("steps", 0, "ODE steps per sample of the dMRI fit (default 16, or 8 with --quick)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	c := demo.DefaultConfig(*quick)
	c.Out = *out
	if *slices >= 0 {
		c.Slices = *slices
	}
	if *samples > 0 {
		c.Fit.Samples = *samples
	}
	if *steps > 0 {
		c.Fit.Steps = *steps
	}
	c.Log = stderr
	start := time.Now()
	var bar *progress.Bar
	c.FitProgress = func(done, total int) {
		if bar == nil {
			bar = progress.New(stderr, progress.IsTerminal(stderr), "demo: dMRI fit", "voxels", total, 0, time.Now())
		}
		bar.Update(done)
		if done == total {
			bar.Finish()
		}
	}

	ctx, stop := interruptContext(stderr, "demo: stopping after this batch")
	defer stop()

	s, err := demo.Run(ctx, c)
	if err != nil {
		return err
	}
	report, err := filepath.Abs(filepath.Join(*out, demo.ReportFile))
	if err != nil {
		report = filepath.Join(*out, demo.ReportFile)
	}
	fmt.Fprintf(stdout, "prism demo finished in %s (%.0f CPU-s).\n", time.Since(start).Round(time.Second), s.Total.CPU)
	fmt.Fprintf(stdout, "  report:   %s  (open it in a browser)\n", report)
	fmt.Fprintf(stdout, "  dMRI:     %s  (BedpostX layout + nfibres_prob, model_prob, peaks; %d voxels)\n", filepath.Join(*out, "dmri"), s.DMRI.Fitted)
	fmt.Fprintf(stdout, "  symbolic: %s  (sweep.json, predict.json; truth %s)\n", filepath.Join(*out, "symbolic"), s.Symbolic.TrueModel)
	fmt.Fprintf(stdout, "  figures:  %s\n", filepath.Join(*out, "figures"))
	return nil
}
