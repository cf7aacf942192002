package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
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
	obs := observations(in)
	opt := posterior.Options{Seed: *of.seed}
	// disc[l][i]: ranked distinct models of observation i at λ_l.
	disc := make([][][]posterior.Ranked, len(lambdas))
	active := make([][][]float64, len(lambdas)) // [λ][obs][draw] base components on
	for l, lam := range lambdas {
		ms, err := p.SampleMasks(obs, lam, *models, opt)
		if err != nil {
			return err
		}
		active[l] = make([][]float64, len(obs))
		for i := range ms {
			for _, m := range ms[i].Masks {
				active[l][i] = append(active[l][i], float64(family.BaseCount(f, m)))
			}
		}
		if disc[l], err = p.Discover(obs, lam, *models, 0, opt); err != nil {
			return err
		}
	}
	type lineJSON struct {
		Index    int          `json:"index"`
		Lambda   float64      `json:"lambda"`
		TrueMask string       `json:"true_mask,omitempty"`
		Mean     float64      `json:"active_mean"`
		Median   float64      `json:"active_median"`
		Lo       float64      `json:"active_q05"`
		Hi       float64      `json:"active_q95"`
		Top      []rankedJSON `json:"top"`
	}
	var lines []any
	for i := range in {
		for l, lam := range lambdas {
			a := slices.Clone(active[l][i])
			slices.Sort(a)
			mean := 0.0
			for _, v := range a {
				mean += v / float64(len(a))
			}
			rs := disc[l][i]
			lj := lineJSON{Index: i, Lambda: lam, Mean: mean, Median: quantileSorted(a, 0.5),
				Lo: quantileSorted(a, 0.05), Hi: quantileSorted(a, 0.95), Top: toRankedJSON(f, rs[:min(*top, len(rs))])}
			if in[i].Truth != nil {
				lj.TrueMask = family.MaskString(in[i].Truth)
			}
			lines = append(lines, lj)
		}
	}
	if err := writeJSONLines(stdout, lines); err != nil {
		return err
	}
	if *of.plotDir == "" {
		return nil
	}
	for i := range min(len(in), maxPlots) {
		if err := sweepFigure(filepath.Join(*of.plotDir, fmt.Sprintf("lambda-sweep-%04d.png", i)), p, obs[i], lambdas, active, disc, i); err != nil {
			return err
		}
	}
	return nil
}

// sweepFigure draws the number of active components (median, 5–95 %)
// against λ and the exact q(M | x, λ) of the models that rank highest at
// some λ.
func sweepFigure(path string, p *posterior.Posterior, o posterior.Observation, lambdas []float64, active [][][]float64, disc [][][]posterior.Ranked, i int) error {
	f := p.Family()
	s := plot.Sweep{Lambda: lambdas, CenterName: "median"}
	for l := range lambdas {
		a := slices.Clone(active[l][i])
		slices.Sort(a)
		s.Center = append(s.Center, quantileSorted(a, 0.5))
		s.Lo = append(s.Lo, quantileSorted(a, 0.05))
		s.Hi = append(s.Hi, quantileSorted(a, 0.95))
	}
	// Models: best at each λ first, then runners-up, until maxSweepModels.
	seen := map[string]bool{}
	var ms [][]bool
	for r := 0; r < 3 && len(ms) < maxSweepModels; r++ {
		for l := range lambdas {
			if rs := disc[l][i]; r < len(rs) && !seen[family.MaskString(rs[r].Mask)] && len(ms) < maxSweepModels {
				seen[family.MaskString(rs[r].Mask)] = true
				ms = append(ms, rs[r].Mask)
			}
		}
	}
	for _, m := range ms {
		s.Models = append(s.Models, plot.Series{Name: family.MaskLabel(f, m), Values: make([]float64, len(lambdas))})
	}
	for l, lam := range lambdas {
		lq, err := p.LogProbMasks([]posterior.Observation{o}, lam, [][][]bool{ms}, posterior.Options{})
		if err != nil {
			return err
		}
		for k := range ms {
			s.Models[k].Values[l] = math.Exp(lq[0][k])
		}
	}
	return plot.LambdaSweep(path, s, plot.Options{Title: fmt.Sprintf("observation %d", i)})
}

// quantileSorted is the q-quantile of sorted values (linear interpolation).
func quantileSorted(x []float64, q float64) float64 {
	h := q * float64(len(x)-1)
	lo := int(h)
	if lo >= len(x)-1 {
		return x[len(x)-1]
	}
	return x[lo] + (h-float64(lo))*(x[lo+1]-x[lo])
}
