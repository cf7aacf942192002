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
	"github.com/prismsbi/prism/plot"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/records"
)

func init() {
	register("predict", "posterior predictive mean and 95 % band, for a fixed model (--local) or model-averaged", runPredict)
}

func runPredict(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("predict", "(--checkpoint DIR | --model NAME) (--obs FILE | --from-simulate FILE.jsonl) [--lambda L] [--local MASK] [--samples N] [--noise] [--plot DIR]", stderr)
	of := addObsFlags(fs)
	lambda := fs.Float64("lambda", 0.5, "complexity knob λ ∈ [0, 1] of the model posterior (global predictive)")
	local := fs.String("local", "", "fix the model (0/1 mask string): local predictive; default: model-averaged over q(M | x, λ)")
	samples := fs.Int("samples", 1000, "posterior draws per observation")
	noise := fs.Bool("noise", false, "predict new noisy data (simulate) instead of the noiseless model output")
	cf := addCorrectFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *samples < 1 || !(*lambda >= 0 && *lambda <= 1) {
		return fmt.Errorf("need --samples ≥ 1 and λ ∈ [0, 1]")
	}
	p, in, err := of.load()
	if err != nil {
		return err
	}
	if err := memlimit.Check("--samples", int64(*samples), 0, float64(len(in))*p.JointSampleBytes(), memlimit.Available()); err != nil {
		return err
	}
	f := p.Family()
	po := posterior.PredictOptions{SampleOptions: of.sampleOptions(), Lambda: *lambda, Samples: *samples, Noise: *noise}
	cs, err := cf.settings(po.SampleOptions)
	if err != nil {
		return err
	}
	kind := "global"
	if *local != "" {
		if po.Mask, err = family.ParseMask(*local, len(f.Components())); err == nil {
			err = family.CheckMask(f, po.Mask)
		}
		if err != nil {
			return fmt.Errorf("--local: %w", err)
		}
		kind = "local"
	}
	obs := obsfile.Observations(in)
	var bands []posterior.Band
	var corr []correct.Corrected
	if cs.Method == correct.None {
		if bands, err = p.Predict(obs, po); err != nil {
			return err
		}
	} else {
		// Candidates: the fixed model, or the distinct models among
		// --samples draws of q(M | x, λ); draws from the corrected
		// posterior over them.
		var cands [][][]bool
		if po.Mask != nil {
			cands = [][][]bool{{po.Mask}}
		} else {
			disc, err := p.Discover(obs, *lambda, *samples, 0, po.Options)
			if err != nil {
				return err
			}
			cands = posterior.RankedMasks(disc)
		}
		if corr, err = cf.correctCandidates(p, obs, cands, *lambda, cs, stderr); err != nil {
			return err
		}
		masks := make([][][]bool, len(obs))
		thetas := make([][][]float64, len(obs))
		for i := range corr {
			masks[i], thetas[i] = corr[i].Draw(*samples)
		}
		bands = p.PredictDraws(obs, masks, thetas, po)
	}
	type lineJSON struct {
		Index  int       `json:"index"`
		Kind   string    `json:"predictive"`
		Lambda float64   `json:"lambda,omitempty"`
		Mask   string    `json:"mask,omitempty"`
		Mean   []float64 `json:"mean"`
		Lo     []float64 `json:"lo"`
		Hi     []float64 `json:"hi"`
		// Correction is the corrected model posterior the draws came from.
		Correction *records.Correction `json:"correction,omitempty"`
	}
	lines := make([]any, len(in))
	for i, b := range bands {
		l := lineJSON{Index: i, Kind: kind, Mask: *local, Mean: b.Mean, Lo: b.Lo, Hi: b.Hi}
		if po.Mask == nil {
			l.Lambda = *lambda
		}
		if corr != nil {
			l.Correction = records.FromCorrected(f, cs.Method.String(), corr[i], 5)
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
		x, xlabel := figures.Axis(in[i].Obs.Design)
		b := bands[i]
		path := filepath.Join(*of.plotDir, fmt.Sprintf("predict-%04d.png", i))
		err := plot.PredictiveBand(path, plot.Points{X: x, Y: in[i].Obs.X},
			[]plot.Band{{Name: kind + " predictive (95 %)", X: x, Mean: b.Mean, Lo: b.Lo, Hi: b.Hi}},
			plot.Options{Title: fmt.Sprintf("observation %d", i), XLabel: xlabel, YLabel: "y"})
		if err != nil {
			return err
		}
	}
	return nil
}
