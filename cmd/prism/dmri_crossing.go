package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/dmrifit"
)

// runDMRICrossing fits the synthetic crossing phantom of issue 20
// (dmrifit.NewCrossingPhantom) with a trained ball-and-sticks network at the
// fit settings given and prints the phantom metrics per cell.
func runDMRICrossing(args []string, stdout, stderr io.Writer) error {
	def := dmrifit.DefaultFitSettings()
	spec := dmrifit.DefaultCrossingSpec()
	fs := newFlagSet("dmri crossing", "(--checkpoint DIR | --model NAME) [--lambda L] [--angles 45,60,90] [--snr 20,40] [--protocols ukb,shell20] [--voxels N] [--json FILE]", stderr)
	net := addNetFlags(fs, "trained network of a ball-and-sticks family (b3s)")
	s := def
	fs.Float64Var(&s.Lambda, "lambda", def.Lambda, "model-prior parameter λ of q(M | x, λ)")
	fs.IntVar(&s.Samples, "samples", def.Samples, "joint posterior samples per voxel")
	fs.IntVar(&s.Steps, "steps", def.Steps, "probability-flow ODE steps per sample")
	fs.StringVar(&s.Solver, "solver", def.Solver, "ODE solver: ab2, heun or dpm2m")
	fs.Uint64Var(&s.Seed, "seed", def.Seed, "random seed of the fit")
	fs.BoolVar(&s.Mixture, "mixture", false, "draw the samples' models from the whole model posterior (as `dmri fit --mixture`)")
	fs.StringVar(&s.Correct, "correct", def.Correct, "correction with the likelihood, as `dmri fit --correct`: auto (smc), none, is or smc")
	fs.IntVar(&s.CorrectParticles, "correct-particles", 0, "with --correct smc: particles per SMC run (0: the default of `dmri fit`)")
	fs.IntVar(&s.Refine, "refine", def.Refine, "with --correct none: refinement jumps towards the exact posterior (as `dmri fit --refine`; 0: the network's samples)")
	angles := fs.String("angles", "45,60,90", "crossing angles in degrees")
	snrs := fs.String("snr", "20,40", "SNRs (b0 over noise standard deviation)")
	protos := fs.String("protocols", "ukb,shell20", "protocols: ukb (UK-Biobank-like, 105 volumes), shell20 (1 b0 + 20 directions at b = 2500)")
	fs.IntVar(&spec.Voxels, "voxels", spec.Voxels, "voxels per cell (protocol, SNR, angle; and one-stick voxels per protocol and SNR)")
	fs.Uint64Var(&spec.Seed, "phantom-seed", spec.Seed, "random seed of the phantom")
	jsonOut := fs.String("json", "", "also write the cells as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !net.given() {
		return errNoNetwork
	}
	var err error
	if spec.Angles, err = parseFloats("--angles", *angles); err != nil {
		return err
	}
	if spec.SNR, err = parseFloats("--snr", *snrs); err != nil {
		return err
	}
	spec.Protocols = strings.Split(*protos, ",")
	if err := s.Validate(); err != nil {
		return err
	}
	post, err := net.load()
	if err != nil {
		return err
	}
	all, err := dmrifit.RunCrossing(post, s, spec)
	if err != nil {
		return fmt.Errorf("%s: %w", net.source(), err)
	}
	fmt.Fprintf(stdout, "crossing phantom, %s (%s), λ = %g, %d samples × %d %s steps; medians over %d voxels per cell\n",
		net.source(), post.Family().Name(), s.Lambda, s.Samples, s.Steps, s.Solver, spec.Voxels)
	fmt.Fprintf(stdout, "%-8s %4s %5s %8s %8s %8s %8s %10s %10s\n", "protocol", "SNR", "angle", "dyads1°", "dyads2°", "within°", "disp2", "count(nf)", "count(f)")
	for _, c := range all {
		ang := fmt.Sprintf("%g°", c.Angle)
		if c.Angle == 0 {
			ang = "1 fib"
		}
		fmt.Fprintf(stdout, "%-8s %4g %5s %8.1f %8s %8s %8s %10.2f %10.2f\n", c.Protocol, c.SNR, ang, c.Dyads1,
			fmtNaN(c.Dyads2, "%.1f"), fmtNaN(c.Within, "%.1f"), fmtNaN(c.Dispersion2, "%.3f"), c.CountRight, c.CountMeanF)
	}
	if *jsonOut != "" {
		return dmrifit.WriteCrossingJSON(*jsonOut, net.source(), post.Family().Name(), s, spec, all)
	}
	return nil
}

func fmtNaN(x float64, f string) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf(f, x)
}

func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", flag, p)
		}
		out = append(out, v)
	}
	return out, nil
}
