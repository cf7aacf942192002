package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/train"
)

// addSpecFlag registers --spec on a command that takes --family.
func addSpecFlag(fs *flag.FlagSet) *string {
	return fs.String("spec", "", "family spec file (YAML, docs/spec.md) instead of --family: your own components, priors and simulator")
}

// applySpec loads the spec file of --spec (nothing when path is empty),
// installs its family under its name and sets *famName to that name, so
// that the rest of the command treats it like a built-in family.
func applySpec(path string, famName *string) (family.Family, error) {
	if path == "" {
		return nil, nil
	}
	if *famName != "" {
		return nil, errors.New("give --family or --spec, not both")
	}
	f, err := family.LoadSpecFile(path) // installs the family under its name
	if err != nil {
		return nil, fmt.Errorf("--spec: %w", err)
	}
	*famName = f.Name()
	return f, nil
}

// storeSpec records a spec family's text in a training configuration, so
// that its checkpoints re-create the family by themselves.
func storeSpec(cfg *train.Config, f family.Family) {
	if s, ok := f.(family.SpecSource); ok {
		cfg.Spec, cfg.SpecDir = string(s.SpecText()), s.SpecDir()
	}
}

// closeFamily stops an external simulator's worker processes.
func closeFamily(f family.Family) {
	if c, ok := f.(io.Closer); ok {
		c.Close()
	}
}
