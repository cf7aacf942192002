package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
)

func init() {
	register("sample", "sample models and parameters from a trained network's posterior for observations", runSample)
}

// obsFlags are the flags shared by the posterior commands.
type obsFlags struct {
	net                                         *netFlags
	obs, fromSim, bval, bvec, protocol, plotDir *string
	seed                                        *uint64
	steps                                       *int
	solver                                      *string
}

func addObsFlags(fs *flag.FlagSet) *obsFlags {
	return &obsFlags{
		net:      addNetFlags(fs, "trained network"),
		obs:      fs.String("obs", "", "observations: JSON lines ({\"x\":[…]} per line, optional \"bvals\"/\"bvecs\") or CSV (one observation per row)"),
		fromSim:  fs.String("from-simulate", "", "observations from a `prism simulate` file (JSON lines; the true mask is reported alongside)"),
		bval:     fs.String("bval", "", "FSL b-value file for observations without their own table (dMRI; with --bvec)"),
		bvec:     fs.String("bvec", "", "FSL b-vector file (dMRI; with --bval)"),
		protocol: fs.String("protocol", "", "fixed design by name for observations without their own table (dMRI: ukb, hcp, or an FSL PREFIX)"),
		plotDir:  fs.String("plot", "", "also write PNG figures into this directory"),
		seed:     fs.Uint64("seed", 1, "random seed; the same seed gives identical output"),
		steps:    fs.Int("steps", posterior.DefaultSteps, "ODE solver steps of the parameter sampler"),
		solver:   fs.String("solver", "ab2", "ODE solver: ab2 (one network evaluation per step) or heun (two)"),
	}
}

// input is one observation read from a file.
type input = obsfile.Record

// load reads the network and the observations.
func (o *obsFlags) load() (*posterior.Posterior, []input, error) {
	if !o.net.given() {
		return nil, nil, errNoNetwork
	}
	if (*o.obs == "") == (*o.fromSim == "") {
		return nil, nil, errors.New("give the observations with exactly one of --obs and --from-simulate")
	}
	if *o.steps < 1 {
		return nil, nil, fmt.Errorf("--steps %d must be positive", *o.steps)
	}
	if _, err := posterior.ParseSolver(*o.solver); err != nil {
		return nil, nil, fmt.Errorf("--solver: %w", err)
	}
	p, err := o.net.load()
	if err != nil {
		return nil, nil, err
	}
	f := p.Family()
	design := func() (family.Design, error) { return forwardDesign(f, *o.bval, *o.bvec, *o.protocol) }
	path := *o.obs
	if path == "" {
		path = *o.fromSim
	}
	in, err := obsfile.Read(path, f, design)
	if err != nil {
		return nil, nil, err
	}
	if len(in) == 0 {
		return nil, nil, fmt.Errorf("%s holds no observations", path)
	}
	if *o.plotDir != "" {
		if err := os.MkdirAll(*o.plotDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("--plot: %w", err)
		}
	}
	return p, in, nil
}

func (o *obsFlags) sampleOptions() posterior.SampleOptions {
	s, _ := posterior.ParseSolver(*o.solver)
	return posterior.SampleOptions{Options: posterior.Options{Seed: *o.seed}, Steps: *o.steps, Solver: s}
}

func observations(in []input) []posterior.Observation {
	o := make([]posterior.Observation, len(in))
	for i := range in {
		o[i] = in[i].Obs
	}
	return o
}

// rankedJSON is one ranked model in the output. A mask outside the
// prior's support (a network can leak a little mass to one) has no
// log_prior or evidence_proxy and "outside_prior": true.
type rankedJSON struct {
	Mask          string   `json:"mask"`
	Models        []string `json:"models"`
	LogQ          float64  `json:"log_q"`
	LogPrior      *float64 `json:"log_prior,omitempty"`
	EvidenceProxy *float64 `json:"evidence_proxy,omitempty"`
	OutsidePrior  bool     `json:"outside_prior,omitempty"`
	Count         int      `json:"count,omitempty"`
	Frequency     float64  `json:"frequency,omitempty"`
}

func toRankedJSON(f family.Family, rs []posterior.Ranked) []rankedJSON {
	out := make([]rankedJSON, len(rs))
	for i, r := range rs {
		out[i] = rankedJSON{Mask: family.MaskString(r.Mask), Models: componentNames(f, r.Mask), LogQ: r.LogQ,
			OutsidePrior: r.Outside, Count: r.Count, Frequency: r.Frequency}
		if !r.Outside {
			lp, ev := r.LogPrior, r.EvidenceProxy
			out[i].LogPrior, out[i].EvidenceProxy = &lp, &ev
		}
	}
	return out
}

// componentNames lists the names of the components a mask switches on.
func componentNames(f family.Family, m []bool) []string {
	var s []string
	for k, c := range f.Components() {
		if m[k] {
			s = append(s, c.Name)
		}
	}
	return s
}

// writeJSONLines writes one JSON value per line to w. Every value is
// encoded before anything is written, so that a value that cannot be
// encoded (a NaN) leaves no partial output; the error names its line.
func writeJSONLines(w io.Writer, vals []any) error {
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

// maxPlots bounds the number of per-observation figures.
const maxPlots = 20

func runSample(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sample", "(--checkpoint DIR | --model NAME) (--obs FILE | --from-simulate FILE.jsonl) [--lambda L] [--models N] [--params N] [--plot DIR]", stderr)
	of := addObsFlags(fs)
	lambda := fs.Float64("lambda", 0.5, "complexity knob λ ∈ [0, 1] of the model prior")
	models := fs.Int("models", 1000, "masks drawn from q(M | x, λ) per observation (distinct ones are reported, ranked by log q)")
	top := fs.Int("top", 10, "report at most this many distinct models per observation (0: all)")
	params := fs.Int("params", 100, "joint samples (M ~ q(M|x,λ), θ ~ q(θ|M,x)) per observation, in natural units (0: none); with --correct, from the corrected posterior over the reported models")
	cf := addCorrectFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !(*lambda >= 0 && *lambda <= 1) || *models < 1 || *params < 0 {
		return fmt.Errorf("need λ ∈ [0, 1], --models ≥ 1, --params ≥ 0 (got %v, %d, %d)", *lambda, *models, *params)
	}
	p, in, err := of.load()
	if err != nil {
		return err
	}
	avail := memlimit.Available()
	if err := memlimit.Check("--models", int64(*models), 0, float64(len(in))*p.MaskDrawBytes(), avail); err != nil {
		return err
	}
	if err := memlimit.Check("--params", int64(*params), float64(len(in))*float64(*models)*p.MaskDrawBytes(), float64(len(in))*p.JointSampleBytes(), avail); err != nil {
		return err
	}
	f := p.Family()
	obs := observations(in)
	so := of.sampleOptions()
	cs, err := cf.settings(so)
	if err != nil {
		return err
	}
	disc, err := p.Discover(obs, *lambda, *models, *top, so.Options)
	if err != nil {
		return err
	}
	var corr []correct.Corrected
	if cs.Method != correct.None {
		cands := make([][][]bool, len(obs))
		for i := range disc {
			for _, r := range disc[i] {
				cands[i] = append(cands[i], r.Mask)
			}
		}
		if corr, err = cf.correctCandidates(p, obs, cands, *lambda, cs, stderr); err != nil {
			return err
		}
	}
	var joint []posterior.JointSet
	if corr != nil && *params > 0 {
		joint = make([]posterior.JointSet, len(obs))
		for i := range corr {
			joint[i].Masks, joint[i].Theta = corr[i].Draw(*params)
			joint[i].LogQ = make([]float64, len(joint[i].Masks))
			for j, m := range joint[i].Masks {
				for k, r := range corr[i].Results {
					if &r.Mask[0] == &m[0] {
						joint[i].LogQ[j] = corr[i].LogPost[k]
					}
				}
			}
		}
	} else if *params > 0 {
		if joint, err = p.SampleJoint(obs, *lambda, *params, false, so); err != nil {
			return err
		}
	}
	// LogQM is log q(M | x, λ) of the sample's model, or with --correct
	// its log corrected posterior probability.
	type sampleJSON struct {
		Mask  string        `json:"mask"`
		LogQM float64       `json:"log_q_mask"`
		Theta family.Params `json:"theta"`
	}
	type lineJSON struct {
		Index     int          `json:"index"`
		Lambda    float64      `json:"lambda"`
		TrueMask  string       `json:"true_mask,omitempty"`
		Models    []rankedJSON `json:"models"`
		Samples   []sampleJSON `json:"samples,omitempty"`
		NumModels int          `json:"draws"`
		// Correction is the corrected posterior over the reported models.
		Correction *correctionJSON `json:"correction,omitempty"`
	}
	lines := make([]any, len(in))
	for i := range in {
		l := lineJSON{Index: i, Lambda: *lambda, Models: toRankedJSON(f, disc[i]), NumModels: *models}
		if in[i].Truth != nil {
			l.TrueMask = family.MaskString(in[i].Truth)
		}
		if corr != nil {
			l.Correction = toCorrectionJSON(f, cs.Method.String(), corr[i], 0)
		}
		if joint != nil {
			for j, th := range joint[i].Theta {
				m := joint[i].Masks[j]
				l.Samples = append(l.Samples, sampleJSON{Mask: family.MaskString(m), LogQM: joint[i].LogQ[j], Theta: p.Natural(th, m)})
			}
		}
		lines[i] = l
	}
	if err := writeJSONLines(stdout, lines); err != nil {
		return err
	}
	if *of.plotDir == "" {
		return nil
	}
	for i := range min(len(in), maxPlots) {
		if err := modelBars(filepath.Join(*of.plotDir, fmt.Sprintf("models-%04d.png", i)), f, disc[i], fmt.Sprintf("observation %d, λ = %g", i, *lambda)); err != nil {
			return err
		}
		if joint != nil {
			if err := pairPlot(filepath.Join(*of.plotDir, fmt.Sprintf("params-%04d.png", i)), p, joint[i], in[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// modelBars plots q(M | x, λ) and the sample frequency of the ranked models.
func modelBars(path string, f family.Family, rs []posterior.Ranked, title string) error {
	labels := make([]string, len(rs))
	q, fr := make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		labels[i] = family.MaskLabel(f, r.Mask)
		q[i], fr[i] = math.Exp(r.LogQ), r.Frequency
	}
	series := []plot.Series{{Name: "q(M | x, λ)", Values: q}}
	if rs[0].Count > 0 {
		series = append(series, plot.Series{Name: "sample frequency", Values: fr})
	}
	return plot.ModelBars(path, labels, series, plot.Options{Title: title, XLabel: "posterior probability"})
}

// pairPlot draws the latent-free natural parameters of the most frequent
// model among the joint samples (a pair plot needs one parameter set).
func pairPlot(path string, p *posterior.Posterior, js posterior.JointSet, in input) error {
	f := p.Family()
	count := map[string]int{}
	best := ""
	var bestMask []bool
	for _, m := range js.Masks {
		k := family.MaskString(m)
		count[k]++
		if count[k] > count[best] {
			best, bestMask = k, m
		}
	}
	var names []string
	var rows [][]float64
	for j, th := range js.Theta {
		if family.MaskString(js.Masks[j]) != best {
			continue
		}
		names = names[:0]
		row := flattenParams(f, p.Natural(th, js.Masks[j]), &names)
		rows = append(rows, row)
	}
	if len(names) == 0 {
		return nil // the model has no parameters
	}
	if len(names) > 12 {
		names, rows = names[:12], truncateRows(rows, 12)
	}
	o := plot.PairOptions{Options: plot.Options{Title: fmt.Sprintf("parameters under %s (%d of %d samples)", family.MaskLabel(f, bestMask), len(rows), len(js.Theta))}}
	if in.Truth != nil && family.MaskString(in.Truth) == best && in.Theta.Components != nil {
		var tn []string
		o.Truth = flattenParams(f, in.Theta, &tn)
		if len(o.Truth) > len(names) {
			o.Truth = o.Truth[:len(names)]
		}
	}
	return plot.PairPlot(path, names, rows, o)
}

func truncateRows(rows [][]float64, k int) [][]float64 {
	for i := range rows {
		rows[i] = rows[i][:k]
	}
	return rows
}

// flattenParams lists natural parameters in a fixed order: fractions,
// shared parameters, then components by index and parameter order.
func flattenParams(f family.Family, pr family.Params, names *[]string) []float64 {
	var v []float64
	for i, x := range pr.Fractions {
		*names = append(*names, fmt.Sprintf("f%d", i))
		v = append(v, x)
	}
	for _, sp := range f.Layout().Shared {
		if x, ok := pr.Shared[sp.Name]; ok {
			*names = append(*names, sp.Name)
			v = append(v, x)
		}
	}
	for k, c := range f.Components() {
		ps, ok := pr.Components[k]
		if !ok {
			continue
		}
		for _, par := range c.Params {
			if x, ok := ps[par.Name]; ok {
				*names = append(*names, c.Name+"."+par.Name)
				v = append(v, x)
			}
		}
	}
	return v
}
