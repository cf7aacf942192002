package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/internal/memlimit"
	"github.com/prismsbi/prism/mcmc"
)

func init() {
	register("dmri", "diffusion MRI: fit (amortized posterior maps), mcmc (BedpostX-style reference sampler), compare (two output folders)", runDMRI)
}

// dmriCommands are the sub-commands of `prism dmri`.
var dmriCommands = map[string]command{
	"fit":            {summary: "amortized posterior maps: ball-and-sticks (b3s) in the BedpostX layout + model maps, or model selection (bszt, bszt-conv): component and class probabilities, MAP model, model-averaged signal", run: runDMRIFit},
	"mcmc":           {summary: "per-voxel ball-and-sticks MCMC (BedpostX model 2 defaults) into a BedpostX-layout folder", run: runDMRIMCMC},
	"dti":            {summary: "least-squares diffusion-tensor fit (FA, MD, eigenvalues, eigenvectors) into dtifit-named maps", run: runDMRIDTI},
	"crossing":       {summary: "synthetic crossing-fibre phantom (45°/60°/90°, SNR 20/40, UKB-like and 20-direction protocols) fitted with a network: dyads and fibre-count metrics", run: runDMRICrossing},
	"loocv":          {summary: "leave-one-volume-out cross-validated signal prediction error per voxel: tensor vs a network's model average (paper Fig. 5b)", run: runDMRILOOCV},
	"select-phantom": {summary: "model-selection phantom: fraction of known-compartment voxels (ball+stick, ball+zeppelin, ball+2 sticks, tensor) whose true class is most probable", run: runDMRISelectPhantom},
	"compare":        {summary: "compare two BedpostX-layout folders (dyad angles, fractions, fibre counts; JSON + PNG), or dyads1 with a DTI folder's V1 (--dti)", run: runDMRICompare},
}

func runDMRI(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		dmriUsage(stdout)
		return nil
	}
	sub, ok := dmriCommands[args[0]]
	if !ok {
		dmriUsage(stderr)
		return fmt.Errorf("unknown sub-command %q", args[0])
	}
	return sub.run(args[1:], stdout, stderr)
}

func dmriUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: prism dmri <sub-command> [flags]\n\nSub-commands:")
	names := make([]string, 0, len(dmriCommands))
	for n := range dmriCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, dmriCommands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `prism dmri <sub-command> -h` for its flags.")
}

// parseInterspersed parses flags that may appear before, between or after
// the positional arguments and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

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
	lock, err := dirlock.Acquire(*out)
	if err != nil {
		return err
	}
	defer lock.Release()
	info := dmrifit.NewRunInfo("prism dmri mcmc", scan)
	info.Version, info.GoVersion, info.Started = prismVersion(), runtime.Version(), start.UTC().Format(time.RFC3339)
	info.Settings, info.Workers = s, *workers
	info.Timings["load"] = time.Since(start).Seconds()
	nv := len(scan.Voxels)
	fmt.Fprintf(stderr, "dmri mcmc: %d×%d×%d×%d, %d voxels in the %s mask, %d to fit, %d skipped%s\n",
		scan.Nx, scan.Ny, scan.Nz, scan.Design.N, scan.MaskCount(), scan.MaskSource, nv, scan.SkippedTotal(), skipSummary(scan.Skipped))
	fmt.Fprintf(stderr, "dmri mcmc: %d sticks, burn-in %d, %d jumps, %d samples, %d workers\n", s.Fibres, s.BurnIn, s.Jumps, s.Samples(), *workers)
	if nv == 0 {
		return errors.New("no voxel to fit")
	}

	post, err := dmrifit.NewStickSamples(scan.Voxels, s.Fibres, s.Samples())
	if err != nil {
		return err
	}
	ids := make([]uint64, nv)
	for v, i := range scan.Voxels {
		ids[v] = uint64(i)
	}
	var mu sync.Mutex
	failed := map[string]int{}
	fitStart := time.Now()
	progress := newProgress(stderr, "dmri mcmc", nv, fitStart)
	S := s.Samples()
	err = mcmc.RunVoxels(scan.Design, s, mcmc.Voxels{Signal: scan.Signal, ID: ids}, *workers, func(v int, c *mcmc.Chain, err error) {
		if err != nil {
			// Leave the voxel's samples at zero and report it.
			mu.Lock()
			failed["sampler: "+err.Error()]++
			mu.Unlock()
			return
		}
		for k := 0; k < S; k++ {
			o := v*S + k
			post.D[o], post.DStd[o], post.S0[o] = float32(c.D[k]), float32(c.DStd[k]), float32(c.S0[k])
			for i := 0; i < s.Fibres; i++ {
				post.F[i][o], post.Theta[i][o], post.Phi[i][o] = float32(c.F[i][k]), float32(c.Theta[i][k]), float32(c.Phi[i][k])
			}
		}
	}, progress)
	if err != nil {
		return err
	}
	fitTime := time.Since(fitStart).Seconds()
	info.Timings["fit"] = fitTime
	info.VoxelsPerSecond = float64(nv) / fitTime
	for k, n := range failed {
		info.VoxelsSkipped[k] += n
		info.VoxelsFitted -= n
	}
	writeStart := time.Now()
	if err := dmrifit.WriteBedpostX(*out, scan.Ref, scan.Mask, post); err != nil {
		return err
	}
	info.Timings["write"] = time.Since(writeStart).Seconds()
	info.Timings["total"] = time.Since(start).Seconds()
	if err := dmrifit.WriteJSON(filepath.Join(*out, "run.json"), info); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dmri mcmc: %d voxels in %.1f s (%.1f voxels/s), total %.1f s; wrote %s\n",
		nv, fitTime, info.VoxelsPerSecond, info.Timings["total"], *out)
	return nil
}

func skipSummary(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// newProgress returns a progress callback that prints a line at every
// completed 5 % with the elapsed time and an ETA; safe for concurrent use.
func newProgress(w io.Writer, name string, total int, start time.Time) func(done int) {
	var mu sync.Mutex
	last := 0
	return func(done int) {
		step := done * 20 / total
		mu.Lock()
		defer mu.Unlock()
		if step <= last {
			return
		}
		last = step
		el := time.Since(start).Seconds()
		eta := el / float64(done) * float64(total-done)
		fmt.Fprintf(w, "%s: %3d%% (%d/%d voxels), %.1f s elapsed, ETA %.1f s\n", name, done*100/total, done, total, el, eta)
	}
}

func prismVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func runDMRICompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dmri compare", "DIR_A DIR_B [--out DIR]  |  DIR --dti DTI_DIR [--fa-min F]", stderr)
	out := fs.String("out", "dmri-compare", "folder for compare.json and the PNG maps")
	dtiDir := fs.String("dti", "", "compare DIR's dyads1 with dti_V1 of this `prism dmri dti` (or FSL dtifit) folder instead")
	faMin := fs.Float64("fa-min", 0.5, "with --dti: only voxels with FA above this")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *dtiDir != "" {
		if len(pos) != 1 {
			return fmt.Errorf("with --dti, want one folder DIR, got %d arguments", len(pos))
		}
		a, err := dmrifit.ReadBedpostX(pos[0])
		if err != nil {
			return err
		}
		c, err := dmrifit.CompareDTI(a, *dtiDir, *faMin)
		if err != nil {
			return err
		}
		return printIndented(stdout, c)
	}
	if len(pos) != 2 {
		return fmt.Errorf("want two folders DIR_A DIR_B, got %d arguments", len(pos))
	}
	a, err := dmrifit.ReadBedpostX(pos[0])
	if err != nil {
		return err
	}
	b, err := dmrifit.ReadBedpostX(pos[1])
	if err != nil {
		return err
	}
	c, err := dmrifit.Compare(a, b)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := dmrifit.WriteJSON(filepath.Join(*out, "compare.json"), c); err != nil {
		return err
	}
	if err := dmrifit.WriteComparisonPNGs(*out, a, b, c); err != nil {
		return err
	}
	return printIndented(stdout, c)
}

// printIndented writes v as indented JSON to w.
func printIndented(w io.Writer, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", js)
	return err
}

// checkScanArgs checks, after parsing, what scanFileFlags declared plus an
// --out folder: no stray arguments and the required flags given.
func checkScanArgs(fs *flag.FlagSet, files dmrifit.ScanFiles, out string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if files.DWI == "" || files.Bval == "" || files.Bvec == "" || out == "" {
		return errors.New("--dwi, --bval, --bvec and --out are required")
	}
	return nil
}

// scanFileFlags declares the input flags shared by the dmri commands that
// read a scan: --dwi, --bval, --bvec and --mask.
func scanFileFlags(fs *flag.FlagSet, files *dmrifit.ScanFiles) {
	fs.StringVar(&files.DWI, "dwi", "", "4-D diffusion-weighted NIfTI image (.nii or .nii.gz)")
	fs.StringVar(&files.Bval, "bval", "", "FSL b-values file")
	fs.StringVar(&files.Bvec, "bvec", "", "FSL b-vectors file (3×N or N×3)")
	fs.StringVar(&files.Mask, "mask", "", "brain mask NIfTI (default: automatic mask from b0, see docs/dmri.md)")
}

// checkInputsExist reports the first of the scan's files and the
// checkpoint (each optional when empty) that cannot be opened, by its flag.
func checkInputsExist(files dmrifit.ScanFiles, checkpoint string) error {
	for _, f := range []struct{ flag, path string }{{"--dwi", files.DWI}, {"--bval", files.Bval}, {"--bvec", files.Bvec}, {"--mask", files.Mask}, {"--checkpoint", checkpoint}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return nil
}
