package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/posterior"
)

func init() {
	register("calibrate", "rescale a network's parameter-denoiser step per noise level, fitted on simulations so that θ posteriors have the right width; writes a weights file", runCalibrate)
}

func runCalibrate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("calibrate", "(--checkpoint PATH | --model NAME) --out FILE.safetensors [--n 2000] [--width 1000] [--seed 1]", stderr)
	net := addNetFlags(fs, "trained network to calibrate")
	out := fs.String("out", "", "weights file to write: the network's weights with the calibration in its metadata")
	n := fs.Int("n", posterior.DefaultCalibrationSimulations, "simulations from the prior to fit the calibration on")
	levels := fs.Int("levels", posterior.DefaultCalibrationLevels, "noise levels (knots), log-spaced over the sampler's σ range")
	perLevel := fs.Int("per-level", posterior.DefaultCalibrationPerLevel, "noise draws per simulation and level")
	width := fs.Int("width", 1000, "simulations of the width stage, which fits the step's factor below σ 0.3 so that the posteriors' SBC ranks have the right spread (0: least squares only)")
	widthSamples := fs.Int("width-samples", posterior.DefaultWidthSamples, "parameter draws per simulation in the width stage")
	seed := fs.Uint64("seed", 1, "random seed of the simulations and noise")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	data, err := weightsBytes(*net.checkpoint, *net.model)
	if err != nil {
		return err
	}
	nw, _, err := checkpoint.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", net.source(), err)
	}
	p := posterior.New(nw) // the network's own denoiser: any calibration the file has is replaced
	bar := progress.New(stderr, progress.IsTerminal(stderr), "calibrate", "simulations", *n, 0, time.Now())
	c, err := p.CalibrateDenoiser(posterior.CalibrateOptions{Simulations: *n, Levels: *levels, PerLevel: *perLevel, Seed: *seed,
		Progress: func(done, total int) {
			bar.Update(done)
			if done == total {
				bar.Finish()
			}
		},
		Width: *width, WidthSamples: *widthSamples,
		WidthProgress: func(beta, v, target float64) {
			fmt.Fprintf(stderr, "calibrate: width stage: β %+.4f gives rank variance %.5f (perfect %.5f)\n", beta, v, target)
		}})
	bar.Finish()
	if err != nil {
		return err
	}
	js, err := json.Marshal(c)
	if err != nil {
		return err
	}
	cal, err := checkpoint.WithMetadata(data, checkpoint.MetaDenoiserCalibration, string(js))
	if err != nil {
		return fmt.Errorf("%s: %w", net.source(), err)
	}
	if err := atomicfile.WriteBytes(*out, cal); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s with its denoiser step rescaled by λ(σ), fitted on %d simulations (seed %d)\n", *out, net.source(), *n, *seed)
	if w := c.Width; w != nil {
		fmt.Fprintf(stdout, "width stage: β %+.4f ± %.4f on %d parameters of %d simulations (posterior SD < %g; rank variance %.5f → %.5f, perfect %.5f)\n",
			w.Boost, w.SE, w.Values, w.Simulations, w.SigmaZero, w.Before, w.Variance, w.Target)
	}
	fmt.Fprintf(stdout, "%10s %8s %10s %8s %8s\n", "σ", "λ", "least sq.", "raw", "SE")
	for g := range c.LogSigma {
		sigma := math.Exp(c.LogSigma[g])
		fmt.Fprintf(stdout, "%10.4g %8.4f %10.4f %8.4f %8.4f\n", sigma, c.At(sigma), c.Scale[g], c.Raw[g], c.SE[g])
	}
	return nil
}

// weightsBytes returns the weights file of a checkpoint (a weights file,
// or a run directory's committed EMA weights) or of a shipped model.
func weightsBytes(ckpt, model string) ([]byte, error) {
	if err := oneNetwork(ckpt, model); err != nil {
		return nil, err
	}
	if model != "" {
		b, err := models.Weights(model)
		if err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
		return b, nil
	}
	st, err := os.Stat(ckpt)
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	var b []byte
	if st.IsDir() {
		b, err = models.RunWeights(ckpt)
	} else {
		b, err = os.ReadFile(ckpt)
	}
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	return b, nil
}
