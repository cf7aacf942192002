package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"

	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/obsfile"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/memlimit"
)

func init() {
	register("simulate", "draw (λ, mask, θ, x) samples from a family into a JSON-lines file", runSimulate)
}

// progressEvery is the sample count above which simulate reports progress.
const progressEvery = 50000

func runSimulate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", "--family F --n N --seed S [--lambda L] [--protocol P] --out FILE.jsonl", stderr)
	famName := fs.String("family", "", "model family (see `prism families`)")
	specPath := addSpecFlag(fs)
	n := fs.Int("n", 0, "number of samples")
	seed := fs.Uint64("seed", 0, "random seed; the same seed gives byte-identical output")
	lambdaStr := fs.String("lambda", "", "complexity knob λ ∈ [0,1] for every sample (default: λ ~ U(0,1) per sample)")
	protocol := fs.String("protocol", "", "design: dMRI ukb|hcp|random|ukb-mix|hcp-mix|PREFIX (PREFIX.bval, PREFIX.bvec); default: the family's training mix")
	out := fs.String("out", "", "output file (JSON lines)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if _, err := applySpec(*specPath, famName); err != nil {
		return err
	}
	if *famName == "" {
		return errors.New("--family (see `prism families`) or --spec FILE.yaml is required")
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	if *n <= 0 {
		return fmt.Errorf("--n must be a positive number of samples, got %d", *n)
	}
	lambda := math.NaN()
	if *lambdaStr != "" {
		l, err := strconv.ParseFloat(*lambdaStr, 64)
		if err != nil || !(l >= 0 && l <= 1) {
			return fmt.Errorf("--lambda %q: want a number in [0, 1]", *lambdaStr)
		}
		lambda = l
	}
	f, err := family.Lookup(*famName)
	if err != nil {
		return fmt.Errorf("--family: %w", err)
	}
	designs, err := f.Designs(*protocol)
	if err != nil {
		return fmt.Errorf("--protocol: %w", err)
	}
	_, withTable := f.(family.TableDesigner)
	opt := family.SimOptions{Seed: *seed, Lambda: lambda, Designs: designs}
	// The file must fit on its disk: estimate a line's length from the
	// first 64 samples (their longest line, plus 25 %).
	defer closeFamily(f)
	probe := make([]family.Sample, min(64, *n))
	if _, err := family.TrySimulateBatch(f, opt, 0, probe); err != nil {
		return err
	}
	longest := 0
	for i := range probe {
		line, err := obsfile.AppendSample(nil, f, &probe[i], withTable)
		if err != nil {
			return err
		}
		longest = max(longest, len(line))
	}
	if err := memlimit.CheckDisk("--n", int64(*n), 0, 1.25*float64(longest), filepath.Dir(*out)); err != nil {
		return err
	}
	prev := 0
	return writeAtomically(*out, func(w io.Writer) error {
		return obsfile.WriteSimulated(w, f, opt, *n, withTable, func(done int) {
			// Report each completed tenth of a large run.
			if *n >= progressEvery && done*10/(*n) > prev*10/(*n) {
				fmt.Fprintf(stderr, "simulate: %d/%d samples\n", done, *n)
			}
			prev = done
		})
	})
}

// writeAtomically writes path through a temporary file in the same
// directory that is renamed over path only when write succeeds.
func writeAtomically(path string, write func(io.Writer) error) error {
	err := atomicfile.Write(path, func(w *bufio.Writer) error { return write(w) })
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Op == "open" {
			return fmt.Errorf("--out %s: cannot create a file in %s: %w", path, filepath.Dir(path), pe.Err)
		}
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return nil
}
