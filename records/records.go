// Package records defines the JSON records that prism's posterior
// commands (`prism sample`, `select`, `lambda-sweep`, `predict`) print, one
// line per observation: ranked models, corrected model posteriors, and
// the writer that emits them all or nothing.
package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// Ranked is one ranked model. A mask outside the prior's support (a
// network can leak a little mass to one) has no log_prior or
// evidence_proxy and "outside_prior": true.
type Ranked struct {
	Mask          string   `json:"mask"`
	Models        []string `json:"models"`
	LogQ          float64  `json:"log_q"`
	LogPrior      *float64 `json:"log_prior,omitempty"`
	EvidenceProxy *float64 `json:"evidence_proxy,omitempty"`
	OutsidePrior  bool     `json:"outside_prior,omitempty"`
	Count         int      `json:"count,omitempty"`
	Frequency     float64  `json:"frequency,omitempty"`
}

// FromRanked converts ranked models of family f.
func FromRanked(f family.Family, rs []posterior.Ranked) []Ranked {
	out := make([]Ranked, len(rs))
	for i, r := range rs {
		out[i] = Ranked{Mask: family.MaskString(r.Mask), Models: ComponentNames(f, r.Mask), LogQ: r.LogQ,
			OutsidePrior: r.Outside, Count: r.Count, Frequency: r.Frequency}
		if !r.Outside {
			lp, ev := r.LogPrior, r.EvidenceProxy
			out[i].LogPrior, out[i].EvidenceProxy = &lp, &ev
		}
	}
	return out
}

// ComponentNames lists the names of the components a mask switches on.
func ComponentNames(f family.Family, m []bool) []string {
	var s []string
	for k, c := range f.Components() {
		if m[k] {
			s = append(s, c.Name)
		}
	}
	return s
}

// CorrectedModel is one candidate model of a corrected posterior.
type CorrectedModel struct {
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

// Correction is the corrected model posterior of one observation with its
// diagnostics, models ranked by corrected probability.
type Correction struct {
	Method string           `json:"method"`
	Failed bool             `json:"failed"`
	Reason string           `json:"reason,omitempty"`
	Models []CorrectedModel `json:"models"`
}

// FromCorrected converts the corrected posterior c of family f, computed
// with method, keeping its top most probable models (0: all).
func FromCorrected(f family.Family, method string, c correct.Corrected, top int) *Correction {
	idx := make([]int, len(c.Prob))
	for m := range idx {
		idx[m] = m
	}
	sort.SliceStable(idx, func(a, b int) bool { return c.Prob[idx[a]] > c.Prob[idx[b]] })
	if top > 0 && top < len(idx) {
		idx = idx[:top]
	}
	out := &Correction{Method: method, Failed: c.Failed, Reason: c.Reason}
	for _, m := range idx {
		r := c.Results[m]
		out.Models = append(out.Models, CorrectedModel{Mask: family.MaskString(r.Mask), Models: ComponentNames(f, r.Mask),
			Prob: c.Prob[m], LogPrior: c.LogPrior[m], LogEvidence: finiteOrNil(r.LogEvidence), LogEvidenceSE: finiteOrNil(r.LogEvidenceSE),
			ESS: r.ESS, Steps: r.Steps, Failed: r.Failed, Reason: r.Reason})
	}
	return out
}

// finiteOrNil returns &v, or nil (field omitted) when v is not finite:
// JSON has no infinities.
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// WriteLines writes one JSON value per line to w. Every value is encoded
// before anything is written, so that a value that cannot be encoded (a
// NaN) leaves no partial output; the error names its line.
func WriteLines(w io.Writer, vals []any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, v := range vals {
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("output line %d of %d: %w; nothing was written", i+1, len(vals), err)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}
