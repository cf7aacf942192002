package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/all" // registers the built-in families and the spec loader
)

func init() {
	register("families", "list the model families with their size", runFamilies)
}

func runFamilies(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("families", "[--json] [--spec FILE.yaml]", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array with every family's components and parameter names")
	specPath := addSpecFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// --spec checks a spec file and lists its family with the built-in ones.
	var specName string
	if _, err := applySpec(*specPath, &specName); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var infos []family.Info
	for _, name := range family.Names() {
		f, err := family.Lookup(name)
		if err != nil {
			return err
		}
		infos = append(infos, family.Describe(f))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	// Names and descriptions left-aligned, numbers right-aligned.
	wName, wModels := len("name"), len("models")
	for _, in := range infos {
		wName = max(wName, len(in.Name))
		wModels = max(wModels, len(in.ModelSpace))
	}
	fmt.Fprintf(stdout, "%-*s  %4s  %5s  %*s  %s\n", wName, "name", "C", "d_max", wModels, "models", "description")
	for _, in := range infos {
		fmt.Fprintf(stdout, "%-*s  %4d  %5d  %*s  %s\n", wName, in.Name, in.C, in.DMax, wModels, in.ModelSpace, in.Description)
	}
	return nil
}
