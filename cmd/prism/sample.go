package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/figures"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/records"
)

func init() {
	register("sample", "sample models and parameters from a trained network's posterior for observations", runSample)
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
	obs := obsfile.Observations(in)
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
		cands := posterior.RankedMasks(disc)
		if corr, err = cf.correctCandidates(p, obs, cands, *lambda, cs, stderr); err != nil {
			return err
		}
	}
	var joint []posterior.JointSet
	if corr != nil && *params > 0 {
		joint = make([]posterior.JointSet, len(obs))
		for i := range corr {
			joint[i] = corr[i].Joint(*params)
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
		Index     int              `json:"index"`
		Lambda    float64          `json:"lambda"`
		TrueMask  string           `json:"true_mask,omitempty"`
		Models    []records.Ranked `json:"models"`
		Samples   []sampleJSON     `json:"samples,omitempty"`
		NumModels int              `json:"draws"`
		// Correction is the corrected posterior over the reported models.
		Correction *records.Correction `json:"correction,omitempty"`
	}
	lines := make([]any, len(in))
	for i := range in {
		l := lineJSON{Index: i, Lambda: *lambda, Models: records.FromRanked(f, disc[i]), NumModels: *models}
		if in[i].Truth != nil {
			l.TrueMask = family.MaskString(in[i].Truth)
		}
		if corr != nil {
			l.Correction = records.FromCorrected(f, cs.Method.String(), corr[i], 0)
		}
		if joint != nil {
			for j, th := range joint[i].Theta {
				m := joint[i].Masks[j]
				l.Samples = append(l.Samples, sampleJSON{Mask: family.MaskString(m), LogQM: joint[i].LogQ[j], Theta: p.Natural(th, m)})
			}
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
		if err := figures.ModelPosterior(filepath.Join(*of.plotDir, fmt.Sprintf("models-%04d.png", i)), f, disc[i], fmt.Sprintf("observation %d, λ = %g", i, *lambda)); err != nil {
			return err
		}
		if joint != nil {
			if err := figures.JointParams(filepath.Join(*of.plotDir, fmt.Sprintf("params-%04d.png", i)), p, joint[i], in[i].Truth, in[i].Theta); err != nil {
				return err
			}
		}
	}
	return nil
}
