package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/figures"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/records"
)

func init() {
	register("lambda-sweep", "model posterior summaries over a grid of the complexity knob λ (paper Fig. 2 right)", runLambdaSweep)
}

// maxSweepModels is the number of models shown in the sweep figure.
const maxSweepModels = 6

func runLambdaSweep(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lambda-sweep", "(--checkpoint DIR | --model NAME) (--obs FILE | --from-simulate FILE.jsonl) [--lambdas L1,L2,…] [--models N] [--top K] [--plot DIR]", stderr)
	of := addObsFlags(fs)
	grid := fs.String("lambdas", "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", "comma-separated λ grid")
	models := fs.Int("models", 500, "masks drawn from q(M | x, λ) per observation and λ")
	top := fs.Int("top", 5, "report the K most probable sampled models per observation and λ")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var lambdas []float64
	for _, s := range strings.Split(*grid, ",") {
		l, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(l >= 0 && l <= 1) {
			return fmt.Errorf("--lambdas: %q is not a number in [0, 1]", s)
		}
		lambdas = append(lambdas, l)
	}
	slices.Sort(lambdas)
	if *models < 1 || *top < 1 {
		return fmt.Errorf("need --models ≥ 1 and --top ≥ 1")
	}
	p, in, err := of.load()
	if err != nil {
		return err
	}
	// Per λ the draws of every observation are held at once, plus one
	// count per draw and λ for the summary.
	perDraw := float64(len(in)) * (p.MaskDrawBytes() + 8*float64(len(lambdas)))
	if err := memlimit.Check("--models", int64(*models), 0, perDraw, memlimit.Available()); err != nil {
		return err
	}
	f := p.Family()
	obs := obsfile.Observations(in)
	sweeps, err := p.LambdaSweep(obs, lambdas, *models, maxSweepModels, posterior.Options{Seed: *of.seed})
	if err != nil {
		return err
	}
	type lineJSON struct {
		Index    int              `json:"index"`
		Lambda   float64          `json:"lambda"`
		TrueMask string           `json:"true_mask,omitempty"`
		Mean     float64          `json:"active_mean"`
		Median   float64          `json:"active_median"`
		Lo       float64          `json:"active_q05"`
		Hi       float64          `json:"active_q95"`
		Top      []records.Ranked `json:"top"`
	}
	var lines []any
	for i := range in {
		sw := &sweeps[i]
		for l, lam := range lambdas {
			rs := sw.Ranked[l]
			lj := lineJSON{Index: i, Lambda: lam, Mean: sw.ActiveMean[l], Median: sw.ActiveMedian[l],
				Lo: sw.ActiveQ05[l], Hi: sw.ActiveQ95[l], Top: records.FromRanked(f, rs[:min(*top, len(rs))])}
			if in[i].Truth != nil {
				lj.TrueMask = family.MaskString(in[i].Truth)
			}
			lines = append(lines, lj)
		}
	}
	if err := records.WriteLines(stdout, lines); err != nil {
		return err
	}
	if *of.plotDir == "" {
		return nil
	}
	for i := range min(len(in), maxPlots) {
		if err := figures.LambdaSweep(filepath.Join(*of.plotDir, fmt.Sprintf("lambda-sweep-%04d.png", i)), f, &sweeps[i], fmt.Sprintf("observation %d", i)); err != nil {
			return err
		}
	}
	return nil
}
