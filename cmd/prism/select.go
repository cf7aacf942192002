package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/figures"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/records"
)

func init() {
	register("select", "model selection: rank candidate models (--candidates) or discover and select (--discover)", runSelect)
}

func runSelect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("select", "(--checkpoint DIR | --model NAME) (--obs FILE | --from-simulate FILE.jsonl) --lambda L (--candidates FILE | --discover N [--subspace K]) [--top K] [--plot DIR]", stderr)
	of := addObsFlags(fs)
	lambda := fs.Float64("lambda", math.NaN(), "complexity knob λ ∈ [0, 1] of the model prior (required; the value under which the prior is uniform depends on the family)")
	candidates := fs.String("candidates", "", "file of candidate masks, one 0/1 string per line: exact ranking within them (paper App. B.3 procedure (i))")
	discover := fs.Int("discover", 0, "draw N masks per observation, take the approximate MAP model of each, and select within the --subspace most often selected ones (procedure (ii))")
	subspace := fs.Int("subspace", 10, "with --discover: size of the model subspace selected across all observations")
	top := fs.Int("top", 5, "report the K most probable models per observation (0: all)")
	cf := addCorrectFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (*candidates == "") == (*discover == 0) {
		return errors.New("give exactly one of --candidates FILE and --discover N")
	}
	if *discover < 0 || *subspace < 1 || *top < 0 || !(*lambda >= 0 && *lambda <= 1) {
		return fmt.Errorf("need --lambda in [0, 1], --discover ≥ 1, --subspace ≥ 1 and --top ≥ 0")
	}
	p, in, err := of.load()
	if err != nil {
		return err
	}
	if err := memlimit.Check("--discover", int64(*discover), 0, float64(len(in))*p.MaskDrawBytes(), memlimit.Available()); err != nil {
		return err
	}
	cs, err := cf.settings(of.sampleOptions())
	if err != nil {
		return err
	}
	f := p.Family()
	obs := obsfile.Observations(in)
	opt := posterior.Options{Seed: *of.seed}
	var cands [][]bool
	var disc [][]posterior.Ranked
	if *candidates != "" {
		if cands, err = obsfile.ReadMasks(*candidates, f); err != nil {
			return fmt.Errorf("--candidates: %w", err)
		}
	} else {
		if disc, err = p.Discover(obs, *lambda, *discover, 0, opt); err != nil {
			return err
		}
		cands, _ = posterior.MostSelected(disc, *subspace)
	}
	top2, err := p.TopK(obs, *lambda, cands, *top, opt)
	if err != nil {
		return err
	}
	corr, err := cf.correctCandidates(p, obs, [][][]bool{cands}, *lambda, cs, stderr)
	if err != nil {
		return err
	}
	type lineJSON struct {
		Index    int              `json:"index"`
		Lambda   float64          `json:"lambda"`
		TrueMask string           `json:"true_mask,omitempty"`
		MAP      *records.Ranked  `json:"discovered_map,omitempty"`
		Top      []records.Ranked `json:"top"`
		// Correction ranks the candidates by the corrected posterior.
		Correction *records.Correction `json:"correction,omitempty"`
	}
	lines := make([]any, len(in))
	for i := range in {
		l := lineJSON{Index: i, Lambda: *lambda, Top: records.FromRanked(f, top2[i])}
		if in[i].Truth != nil {
			l.TrueMask = family.MaskString(in[i].Truth)
		}
		if disc != nil {
			m := records.FromRanked(f, disc[i][:1])[0]
			l.MAP = &m
		}
		if corr != nil {
			l.Correction = records.FromCorrected(f, cs.Method.String(), corr[i], *top)
		}
		lines[i] = l
	}
	if err := records.WriteLines(stdout, lines); err != nil {
		return err
	}
	if *of.plotDir == "" {
		return nil
	}
	for i := range min(len(in), maxPlots) {
		path := filepath.Join(*of.plotDir, fmt.Sprintf("select-%04d.png", i))
		if err := figures.ModelPosterior(path, f, top2[i], fmt.Sprintf("observation %d: top models, λ = %g", i, *lambda)); err != nil {
			return err
		}
	}
	return nil
}
