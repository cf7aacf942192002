package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/internal/progress"
	"github.com/prismsbi/prism/mcmc"
)

// runDMRIMCMC is `prism dmri mcmc`: flags over dmrifit.RunSampler with
// the sampler of package mcmc.
func runDMRIMCMC(args []string, stdout, stderr io.Writer) error {
	def := mcmc.DefaultSettings()
	fs := newFlagSet("dmri mcmc", "--dwi FILE --bval FILE --bvec FILE [--mask FILE] [--fibres N] --out DIR", stderr)
	var files dmrifit.ScanFiles
	scanFileFlags(fs, &files)
	out := fs.String("out", "", "output folder (BedpostX layout + run.json)")
	s := def
	fs.IntVar(&s.Fibres, "fibres", def.Fibres, "number of sticks N (1–3)")
	fs.IntVar(&s.BurnIn, "burnin", def.BurnIn, "burn-in jumps (proposal widths adapt here)")
	fs.IntVar(&s.Jumps, "jumps", def.Jumps, "recorded jumps after burn-in")
	fs.IntVar(&s.SampleEvery, "sample-every", def.SampleEvery, "keep one sample every this many jumps")
	fs.IntVar(&s.UpdateProposalEvery, "update-proposal-every", def.UpdateProposalEvery, "rescale proposal widths every this many burn-in jumps")
	fs.Float64Var(&s.ARDWeight, "ard", def.ARDWeight, "ARD weight w (p(f) ∝ f^-w on sticks 2..N; 0: no ARD)")
	fs.Uint64Var(&s.Seed, "seed", def.Seed, "random seed; voxel v uses the stream (seed, linear index of v)")
	workers := fs.Int("workers", 0, "parallel workers (default: all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkScanArgs(fs, files, *out); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if *workers <= 0 {
		*workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		return err
	}
	// The samples of every voxel are kept: (3 per stick + d, d_std, S0)
	// float32 values, counted twice for the chains' own copies.
	perSample := 2 * 4 * float64(3*s.Fibres+3) * float64(len(scan.Voxels))
	if err := memlimit.Check("--jumps/--sample-every: samples per voxel", int64(s.Samples()), 200e6, perSample, memlimit.Available()); err != nil {
		return fmt.Errorf("%s: %w", files.DWI, err)
	}
	sampler := func(ids []uint64, workers int, emit func(int, dmrifit.VoxelChain, error), progress func(int)) error {
		return mcmc.RunVoxels(scan.Design, s, mcmc.Voxels{Signal: scan.Signal, ID: ids}, workers, func(v int, c *mcmc.Chain, err error) {
			if err != nil {
				emit(v, dmrifit.VoxelChain{}, err)
				return
			}
			emit(v, dmrifit.VoxelChain{F: c.F[:s.Fibres], Theta: c.Theta[:s.Fibres], Phi: c.Phi[:s.Fibres], D: c.D, DStd: c.DStd, S0: c.S0}, nil)
		}, progress)
	}
	return dmrifit.RunSampler(scan, sampler, dmrifit.SamplerConfig{Tool: "prism dmri mcmc", Version: prismVersion(), Out: *out, Log: stderr,
		Progress: progress.To(stderr, "voxels"), Started: start, Timings: map[string]float64{"load": time.Since(start).Seconds()},
		Fibres: s.Fibres, Samples: s.Samples(), Workers: *workers, Settings: s,
		Describe: fmt.Sprintf("%d sticks, burn-in %d, %d jumps, %d samples, %d workers", s.Fibres, s.BurnIn, s.Jumps, s.Samples(), *workers)})
}
