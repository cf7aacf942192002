package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/prismsbi/prism/bids"
	"github.com/prismsbi/prism/dmrifit"
)

func init() {
	register("bids", "BIDS App: fit every dwi series of a BIDS dataset (participant level), cohort table and QC page (group level)", runBIDS)
}

// labelList is a repeatable flag whose values may also hold several
// labels separated by spaces or commas.
type labelList []string

func (l *labelList) String() string { return strings.Join(*l, " ") }

func (l *labelList) Set(v string) error {
	*l = append(*l, strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })...)
	return nil
}

// expandLabelFlags rewrites the BIDS Apps form `--participant_label 01
// 02` (several values after one flag, underscores) into repeated
// `--participant-label=01` flags that package flag understands.
func expandLabelFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name := strings.ReplaceAll(strings.TrimLeft(args[i], "-"), "_", "-")
		if !strings.HasPrefix(args[i], "-") || (name != "participant-label" && name != "session-label") {
			out = append(out, args[i])
			continue
		}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			out = append(out, "--"+name+"="+args[i])
		}
	}
	return out
}

func runBIDS(args []string, stdout, stderr io.Writer) error {
	def := dmrifit.DefaultFitSettings()
	fs := newFlagSet("bids", "BIDS_DIR OUT_DIR participant|group [--participant-label L ...] [--session-label S ...] [--model NAME | --checkpoint DIR] [--lambda L] [--samples N] [--steps N]", stderr)
	var participants, sessions labelList
	fs.Var(&participants, "participant-label", "participant(s) to fit, without \"sub-\" (repeatable; default: all)")
	fs.Var(&sessions, "session-label", "session(s) to fit, without \"ses-\" (repeatable; default: all)")
	checkpoint := fs.String("checkpoint", "", "trained network of a ball-and-sticks family: a `prism train` output directory or weights file")
	model := fs.String("model", "b3s-brain", "network shipped with prism (ignored with --checkpoint)")
	s := def
	fs.Float64Var(&s.Lambda, "lambda", def.Lambda, "model-prior parameter λ of q(M | x, λ)")
	fs.IntVar(&s.Samples, "samples", def.Samples, "joint posterior samples per voxel")
	fs.IntVar(&s.Steps, "steps", def.Steps, "probability-flow ODE steps per sample")
	fs.StringVar(&s.Solver, "solver", def.Solver, "ODE solver: ab2, heun or dpm2m")
	fs.Uint64Var(&s.Seed, "seed", def.Seed, "random seed")
	fs.IntVar(&s.BatchSize, "batch", def.BatchSize, "voxels per batch (results do not depend on it, bit for bit)")
	pos, err := parseInterspersed(fs, expandLabelFlags(args))
	if err != nil {
		return err
	}
	if len(pos) != 3 || (pos[2] != "participant" && pos[2] != "group") {
		fs.Usage()
		return fmt.Errorf("want BIDS_DIR OUT_DIR participant|group, got %q", pos)
	}
	root, out, level := pos[0], pos[1], pos[2]
	if a, b := absPath(root), absPath(out); a == b || strings.HasPrefix(b, a+string(filepath.Separator)) && !strings.HasPrefix(b, filepath.Join(a, "derivatives")+string(filepath.Separator)) {
		return fmt.Errorf("OUT_DIR %s must not be inside BIDS_DIR %s (except under derivatives/)", out, root)
	}
	if level == "group" {
		reports, err := bids.Group(out)
		if err != nil {
			return err
		}
		counts := map[string]int{}
		for _, r := range reports {
			counts[r.Status]++
		}
		fmt.Fprintf(stderr, "bids group: %d series fitted, %d failed, %d missing; wrote %s and %s\n", counts[bids.StatusOK], counts[bids.StatusFailed],
			counts[bids.StatusMissing], filepath.Join(out, bids.GroupDir, "cohort.tsv"), filepath.Join(out, bids.GroupDir, "qc.html"))
		return nil
	}

	if err := s.Validate(); err != nil {
		return err
	}
	series, problems, err := bids.Find(root, participants, sessions)
	if err != nil {
		return err
	}
	if *checkpoint != "" {
		*model = ""
	}
	post, err := loadPosterior(*checkpoint, *model)
	if err != nil {
		return err
	}
	network := *checkpoint
	if *model != "" {
		network = "model:" + *model
	}
	fmt.Fprintf(stderr, "bids participant: %d series in %s (%d participants or sessions without one), network %s\n", len(series), root, len(problems), network)
	ctx, stop := interruptContext(stderr, "bids: stopping after this series; rerun to continue (finished series are skipped)")
	defer stop()
	reports, err := bids.Participant(ctx, root, out, series, problems, bids.Settings{Fit: s, Posterior: post, Network: network, Version: prismVersion(), Log: stderr})
	if err != nil {
		return err
	}
	var bad []string
	for _, r := range reports {
		if r.Status != bids.StatusOK {
			bad = append(bad, r.Stem)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d series or participants failed or are missing (%s); the others are written; see %s",
			len(bad), len(reports), strings.Join(bad, ", "), filepath.Join(out, bids.LogsDir))
	}
	fmt.Fprintf(stderr, "bids participant: %d series written to %s\n", len(reports), out)
	return nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return filepath.Clean(a)
}
