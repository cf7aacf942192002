package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/posterior"
)

// correctFlags are the flags of the posterior correction (package
// correct), shared by sample, select, predict and dmri fit.
type correctFlags struct {
	method              *string
	particles, samples  *int
	maxSE, minESS, minQ *float64
	maxModels           *int
	cess                *float64
	moves               *int
	pruneMinQ           float64
	pruneMax            int
}

func addCorrectFlags(fs *flag.FlagSet) *correctFlags {
	d := correct.DefaultSettings(correct.SMC)
	return &correctFlags{
		method:    fs.String("correct", "none", "correct the network's posterior where the family has a likelihood: none, is (importance sampling with q as proposal) or smc (sequential Monte Carlo from q to the posterior; docs/posterior.md)"),
		particles: fs.Int("correct-particles", d.Particles, "with --correct smc: particles per SMC run (4 independent runs per model)"),
		samples:   fs.Int("correct-samples", d.Samples, "with --correct is: importance samples per model"),
		maxSE:     fs.Float64("correct-max-se", d.MaxLogEvidenceSE, "flag the correction as failed above this log-evidence standard error (nats)"),
		minESS:    fs.Float64("correct-min-ess", d.MinESS, "flag the correction as failed below this normalised ESS"),
		minQ:      fs.Float64("correct-min-q", 1e-3, "correct only the candidate models holding at least this share of the network's q(M | x, λ) over the candidates (the others get probability 0)"),
		maxModels: fs.Int("correct-max-models", 16, "correct at most this many candidate models per observation, the most probable under q (0: no limit)"),
		cess:      fs.Float64("correct-cess", d.CESS, "with --correct smc: conditional ESS (fraction of the particles) each tempering step keeps; higher takes more, smaller steps (0.9 with 8 moves is slower and more robust for very sharp posteriors, docs/posterior.md)"),
		moves:     fs.Int("correct-moves", d.Moves, "with --correct smc: MALA moves per tempering step"),
	}
}

// settings returns the correction settings (method None: no correction).
func (c *correctFlags) settings(so posterior.SampleOptions) (correct.Settings, error) {
	m, err := correct.ParseMethod(*c.method)
	if err != nil {
		return correct.Settings{}, fmt.Errorf("--correct: %w", err)
	}
	if *c.particles < 2 || *c.samples < 2 || !(*c.maxSE > 0) || !(*c.minESS > 0 && *c.minESS <= 1) || !(*c.minQ >= 0 && *c.minQ < 1) || *c.maxModels < 0 ||
		!(*c.cess > 0 && *c.cess < 1) || *c.moves < 1 {
		return correct.Settings{}, fmt.Errorf("need --correct-particles ≥ 2, --correct-samples ≥ 2, --correct-max-se > 0, --correct-min-ess in (0, 1], --correct-min-q in [0, 1), --correct-max-models ≥ 0, --correct-cess in (0, 1) and --correct-moves ≥ 1")
	}
	c.pruneMinQ, c.pruneMax = *c.minQ, *c.maxModels
	s := correct.DefaultSettings(m)
	s.Particles, s.Samples, s.MaxLogEvidenceSE, s.MinESS = *c.particles, *c.samples, *c.maxSE, *c.minESS
	s.CESS, s.Moves = *c.cess, *c.moves
	s.Sample = so
	return s, nil
}

// correctCandidates runs the correction over the supported candidates of
// every observation, pruned by --correct-min-q and --correct-max-models
// (nil, nil for method none), and reports on stderr how many
// observations failed its diagnostics.
func (c *correctFlags) correctCandidates(p *posterior.Posterior, obs []posterior.Observation, cands [][][]bool, lambda float64, s correct.Settings, stderr io.Writer) ([]correct.Corrected, error) {
	if s.Method == correct.None {
		return nil, nil
	}
	res, failed, err := correct.Candidates(p, obs, cands, lambda, c.pruneMinQ, c.pruneMax, s)
	if err != nil {
		return nil, fmt.Errorf("--correct: %w", err)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "prism: --correct %s failed its diagnostics for %d of %d observations (\"correction\": {\"failed\": true}); do not trust their corrected results\n", s.Method, failed, len(obs))
	}
	return res, nil
}
