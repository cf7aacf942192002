package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/obsfile"
	"github.com/prismsbi/prism/posterior"
)

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
