package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"

	"github.com/prismsbi/prism/internal/atomicfile"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/memlimit"
)

func init() {
	register("simulate", "draw (λ, mask, θ, x) samples from a family into a JSON-lines file", runSimulate)
}

// simulateChunk is the number of samples simulated (in parallel) and
// written per step; memory stays bounded by one chunk.
const simulateChunk = 4096

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
		line, err := appendSample(nil, f, &probe[i], withTable)
		if err != nil {
			return err
		}
		longest = max(longest, len(line))
	}
	if err := memlimit.CheckDisk("--n", int64(*n), 0, 1.25*float64(longest), filepath.Dir(*out)); err != nil {
		return err
	}
	return writeAtomically(*out, func(w io.Writer) error {
		return simulateTo(w, f, opt, *n, withTable, stderr)
	})
}

// simulateTo writes n samples of f as JSON lines.
func simulateTo(w io.Writer, f family.Family, opt family.SimOptions, n int, withTable bool, stderr io.Writer) error {
	buf := make([]family.Sample, min(simulateChunk, n))
	var line []byte
	for start := 0; start < n; start += len(buf) {
		batch := buf[:min(len(buf), n-start)]
		if _, err := family.TrySimulateBatch(f, opt, uint64(start), batch); err != nil {
			return err
		}
		for i := range batch {
			var err error
			line, err = appendSample(line[:0], f, &batch[i], withTable)
			if err != nil {
				return err
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		// Report each completed tenth of a large run.
		if done := start + len(batch); n >= progressEvery && done*10/n > start*10/n {
			fmt.Fprintf(stderr, "simulate: %d/%d samples\n", done, n)
		}
	}
	return nil
}

// appendSample appends one JSON line:
//
//	{"index":I,"lambda":L,"mask":[0,1,…],"theta":PARAMS,"x":[…]
//	 [,"bvals":[…],"bvecs":[[gx,gy,gz],…]] [,"at":[…]]}
//
// with PARAMS the natural parameters in the --params layout.
func appendSample(b []byte, f family.Family, s *family.Sample, withTable bool) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendUint(b, s.Index, 10)
	b = append(b, `,"lambda":`...)
	b = appendFloat(b, s.Lambda)
	b = append(b, `,"mask":[`...)
	for k, on := range s.Mask {
		if k > 0 {
			b = append(b, ',')
		}
		if on {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	theta, err := json.Marshal(f.Natural(s.Theta, s.Mask))
	if err != nil {
		return b, fmt.Errorf("sample %d: natural parameters: %w", s.Index, err)
	}
	b = append(b, `],"theta":`...)
	b = append(b, theta...)
	b = append(b, `,"x":`...)
	var bad bool
	if b, bad = appendFloats(b, s.X); bad {
		return b, fmt.Errorf("sample %d (mask %s): the simulator produced a non-finite value", s.Index, family.MaskString(s.Mask))
	}
	if family.ObservationKindOf(f) == family.ObservationPoints {
		b = append(b, `,"at":`...)
		b, _ = appendFloats(b, s.Design.Cov[:s.Design.N])
	}
	if withTable && s.Design.CovDim >= 4 {
		b = append(b, `,"bvals":[`...)
		for j := 0; j < s.Design.N; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendFloat(b, s.Design.Row(j)[0])
		}
		b = append(b, `],"bvecs":[`...)
		for j := 0; j < s.Design.N; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b, _ = appendFloats(b, s.Design.Row(j)[1:4])
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...), nil
}

// appendFloat appends v in the shortest form that parses back to v.
func appendFloat(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendFloats appends a JSON array of xs and reports whether any value was
// not finite (JSON has no NaN or Inf; they are written as null).
func appendFloats(b []byte, xs []float64) ([]byte, bool) {
	bad := false
	b = append(b, '[')
	for j, v := range xs {
		if j > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad = true
			b = append(b, "null"...)
			continue
		}
		b = appendFloat(b, v)
	}
	return append(b, ']'), bad
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
