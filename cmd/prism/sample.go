package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
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
type input struct {
	obs   posterior.Observation
	truth []bool // true mask when read from a simulation file
	theta family.Params
}

// jsonObs is one JSON line of an observation file; `prism simulate`
// output has this form.
type jsonObs struct {
	X     []float64     `json:"x"`
	BVals []float64     `json:"bvals"`
	BVecs [][]float64   `json:"bvecs"`
	Mask  []int         `json:"mask"`
	Theta family.Params `json:"theta"`
}

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
	var def *family.Design
	design := func() (family.Design, error) {
		if def == nil {
			d, err := forwardDesign(f, *o.bval, *o.bvec, *o.protocol)
			if err != nil {
				return d, err
			}
			def = &d
		}
		return *def, nil
	}
	path := *o.obs
	if path == "" {
		path = *o.fromSim
	}
	var in []input
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		in, err = readCSV(path, design)
	} else {
		in, err = readJSONObs(path, f, design)
	}
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

func readJSONObs(path string, f family.Family, design func() (family.Design, error)) ([]input, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	var in []input
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var j jsonObs
		if err := json.Unmarshal([]byte(b), &j); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if len(j.X) == 0 {
			return nil, fmt.Errorf("%s:%d: no \"x\" values", path, line)
		}
		var d family.Design
		if j.BVals != nil {
			if len(j.BVals) != len(j.X) || len(j.BVecs) != len(j.X) {
				return nil, fmt.Errorf("%s:%d: %d values with %d b-values and %d b-vectors", path, line, len(j.X), len(j.BVals), len(j.BVecs))
			}
			d = family.Design{N: len(j.X), CovDim: 4, Cov: make([]float64, 4*len(j.X)), Name: "table"}
			for k := range j.X {
				if len(j.BVecs[k]) != 3 {
					return nil, fmt.Errorf("%s:%d: b-vector %d has %d entries", path, line, k, len(j.BVecs[k]))
				}
				d.Cov[4*k] = j.BVals[k]
				copy(d.Cov[4*k+1:4*k+4], j.BVecs[k])
			}
		} else if d, err = design(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if d.N != len(j.X) {
			return nil, fmt.Errorf("%s:%d: %d values for a design of %d measurements", path, line, len(j.X), d.N)
		}
		it := input{obs: posterior.Observation{Design: d, X: j.X}, theta: j.Theta}
		if len(j.Mask) == len(f.Components()) {
			it.truth = make([]bool, len(j.Mask))
			for k, v := range j.Mask {
				it.truth[k] = v != 0
			}
		}
		in = append(in, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return in, nil
}

func readCSV(path string, design func() (family.Design, error)) ([]input, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	d, err := design()
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	var in []input
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		fields := strings.Split(s, ",")
		x := make([]float64, len(fields))
		for k, fl := range fields {
			if x[k], err = strconv.ParseFloat(strings.TrimSpace(fl), 64); err != nil {
				return nil, fmt.Errorf("%s:%d: column %d: %w", path, line, k+1, err)
			}
		}
		if len(x) != d.N {
			return nil, fmt.Errorf("%s:%d: %d values for a design of %d measurements", path, line, len(x), d.N)
		}
		in = append(in, input{obs: posterior.Observation{Design: d, X: x}})
	}
	return in, sc.Err()
}

func observations(in []input) []posterior.Observation {
	o := make([]posterior.Observation, len(in))
	for i := range in {
		o[i] = in[i].obs
	}
	return o
}

// rankedJSON is one ranked model in the output.
type rankedJSON struct {
	Mask          string   `json:"mask"`
	Models        []string `json:"models"`
	LogQ          float64  `json:"log_q"`
	LogPrior      float64  `json:"log_prior"`
	EvidenceProxy float64  `json:"evidence_proxy"`
	Count         int      `json:"count,omitempty"`
	Frequency     float64  `json:"frequency,omitempty"`
}

func toRankedJSON(f family.Family, rs []posterior.Ranked) []rankedJSON {
	out := make([]rankedJSON, len(rs))
	for i, r := range rs {
		out[i] = rankedJSON{Mask: family.MaskString(r.Mask), Models: componentNames(f, r.Mask), LogQ: r.LogQ,
			LogPrior: finiteOr(r.LogPrior), EvidenceProxy: finiteOr(r.EvidenceProxy), Count: r.Count, Frequency: r.Frequency}
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

// finiteOr maps ±Inf (impossible masks under the prior) to ±1e300 so that
// the JSON stays valid.
func finiteOr(v float64) float64 {
	switch {
	case math.IsInf(v, 1):
		return 1e300
	case math.IsInf(v, -1):
		return -1e300
	}
	return v
}

// writeJSONLines writes one JSON value per line to stdout.
func writeJSONLines(w io.Writer, vals []any) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, v := range vals {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return bw.Flush()
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
		if in[i].truth != nil {
			l.TrueMask = family.MaskString(in[i].truth)
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
	if in.truth != nil && family.MaskString(in.truth) == best && in.theta.Components != nil {
		var tn []string
		o.Truth = flattenParams(f, in.theta, &tn)
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
