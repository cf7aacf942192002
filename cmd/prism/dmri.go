package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"

	"github.com/prismsbi/prism/dmrifit"
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

func prismVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
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
