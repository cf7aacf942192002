package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// correctFlags are the flags of the posterior correction (package
// correct), shared by sample, select, predict and dmri fit.
type correctFlags struct {
	method              *string
	particles, samples  *int
	maxSE, minESS, minQ *float64
	maxModels           *int
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
	}
}

// settings returns the correction settings (method None: no correction).
func (c *correctFlags) settings(so posterior.SampleOptions) (correct.Settings, error) {
	m, err := correct.ParseMethod(*c.method)
	if err != nil {
		return correct.Settings{}, fmt.Errorf("--correct: %w", err)
	}
	if *c.particles < 2 || *c.samples < 2 || !(*c.maxSE > 0) || !(*c.minESS > 0 && *c.minESS <= 1) || !(*c.minQ >= 0 && *c.minQ < 1) || *c.maxModels < 0 {
		return correct.Settings{}, fmt.Errorf("need --correct-particles ≥ 2, --correct-samples ≥ 2, --correct-max-se > 0, --correct-min-ess in (0, 1], --correct-min-q in [0, 1) and --correct-max-models ≥ 0")
	}
	c.pruneMinQ, c.pruneMax = *c.minQ, *c.maxModels
	s := correct.DefaultSettings(m)
	s.Particles, s.Samples, s.MaxLogEvidenceSE, s.MinESS = *c.particles, *c.samples, *c.maxSE, *c.minESS
	s.Sample = so
	return s, nil
}

// correctedModelJSON is one candidate model of a corrected posterior.
type correctedModelJSON struct {
	Mask          string   `json:"mask"`
	Models        []string `json:"models"`
	Prob          float64  `json:"prob"`
	LogPrior      float64  `json:"log_prior"`
	LogEvidence   *float64 `json:"log_evidence,omitempty"`    // absent when not finite
	LogEvidenceSE *float64 `json:"log_evidence_se,omitempty"` // absent when not finite
	ESS           float64  `json:"ess"`
	Steps         float64  `json:"tempering_steps,omitempty"`
	Failed        bool     `json:"failed,omitempty"`
	Reason        string   `json:"reason,omitempty"`
}

// correctionJSON is the corrected model posterior of one observation with
// its diagnostics, models ranked by corrected probability (top K; 0: all).
type correctionJSON struct {
	Method string               `json:"method"`
	Failed bool                 `json:"failed"`
	Reason string               `json:"reason,omitempty"`
	Models []correctedModelJSON `json:"models"`
}

func toCorrectionJSON(f family.Family, method string, c correct.Corrected, top int) *correctionJSON {
	idx := make([]int, len(c.Prob))
	for m := range idx {
		idx[m] = m
	}
	sort.SliceStable(idx, func(a, b int) bool { return c.Prob[idx[a]] > c.Prob[idx[b]] })
	if top > 0 && top < len(idx) {
		idx = idx[:top]
	}
	out := &correctionJSON{Method: method, Failed: c.Failed, Reason: c.Reason}
	for _, m := range idx {
		r := c.Results[m]
		out.Models = append(out.Models, correctedModelJSON{Mask: family.MaskString(r.Mask), Models: componentNames(f, r.Mask),
			Prob: c.Prob[m], LogPrior: c.LogPrior[m], LogEvidence: finiteOrNil(r.LogEvidence), LogEvidenceSE: finiteOrNil(r.LogEvidenceSE),
			ESS: r.ESS, Steps: r.Steps, Failed: r.Failed, Reason: r.Reason})
	}
	return out
}

// supportedMasks keeps the masks with positive prior probability at λ
// (the others have no posterior mass).
func supportedMasks(f family.Family, masks [][]bool, lambda float64) [][]bool {
	var out [][]bool
	for _, m := range masks {
		if !math.IsInf(f.MaskPrior().LogProb(m, lambda), -1) {
			out = append(out, m)
		}
	}
	return out
}

// correctCandidates runs the correction over the supported candidates of
// every observation, pruned by --correct-min-q and --correct-max-models
// (nil, nil for method none), and reports on stderr how many
// observations failed its diagnostics.
func (c *correctFlags) correctCandidates(p *posterior.Posterior, obs []posterior.Observation, cands [][][]bool, lambda float64, s correct.Settings, stderr io.Writer) ([]correct.Corrected, error) {
	if s.Method == correct.None {
		return nil, nil
	}
	sup := make([][][]bool, len(cands))
	for i, cs := range cands {
		if sup[i] = supportedMasks(p.Family(), cs, lambda); len(sup[i]) == 0 {
			return nil, fmt.Errorf("--correct: no candidate model has positive prior probability at λ = %v", lambda)
		}
	}
	sup, err := correct.Prune(p, obs, lambda, sup, c.pruneMinQ, c.pruneMax, s.Sample.Options)
	if err != nil {
		return nil, err
	}
	res, err := correct.Correct(p, obs, sup, lambda, s)
	if err != nil {
		return nil, err
	}
	failed := 0
	for _, c := range res {
		if c.Failed {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "prism: --correct %s failed its diagnostics for %d of %d observations (\"correction\": {\"failed\": true}); do not trust their corrected results\n", s.Method, failed, len(obs))
	}
	return res, nil
}

// finiteOrNil returns &v, or nil (field omitted) when v is not finite:
// JSON has no infinities.
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
