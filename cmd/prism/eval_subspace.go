package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/correct"
	"github.com/prismsbi/prism/eval"
	"github.com/prismsbi/prism/internal/dirlock"
	"github.com/prismsbi/prism/posterior"
)

// runSubspace is `prism eval --subspace`: the subspace classification
// test at each λ of the comma-separated list lambdas.
func runSubspace(net *netFlags, cf *correctFlags, lambdas string, n, models int, seed uint64, out string, quiet bool, set map[string]bool, stderr io.Writer) error {
	for _, f := range []string{"mask-samples", "theta-samples", "ksd-obs", "is-obs", "is-samples", "subset", "pred-obs", "steps"} {
		if set[f] {
			return fmt.Errorf("--%s does not apply to --subspace", f)
		}
	}
	if !set["n"] {
		n = 300
	}
	if n < 1 || models < 0 || models == 1 {
		return errors.New("--subspace needs --n ≥ 1 and --class-models 0 (200) or ≥ 2")
	}
	var lams []float64
	for _, s := range strings.Split(lambdas, ",") {
		s = strings.TrimSpace(s)
		if s == "random" {
			lams = append(lams, math.NaN())
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return fmt.Errorf("--lambda %q: want numbers in [0, 1] or \"random\", separated by commas", s)
		}
		lams = append(lams, v)
	}
	cs, err := cf.settings(posterior.SampleOptions{})
	if err != nil {
		return err
	}
	p, err := net.load()
	if err != nil {
		return err
	}
	var results []*eval.SubspaceResult
	for _, l := range lams {
		cfg := eval.SubspaceConfig{Models: models, Obs: n, Lambda: l, Seed: seed}
		if !quiet {
			cfg.Progress = stderr
		}
		var r *eval.SubspaceResult
		if cs.Method == correct.None {
			r, err = eval.Subspace(p, cfg)
		} else {
			// The --correct-max-models most probable subspace models of
			// every observation under q are corrected (16 by default).
			r, err = eval.SubspaceCorrected(p, cfg, cs, max(1, cf.pruneMax))
		}
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	lock, err := dirlock.Acquire(out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := eval.WriteSubspace(out, results); err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(stderr, "wrote %s/subspace.json and subspace.csv\n", out)
	}
	return nil
}
