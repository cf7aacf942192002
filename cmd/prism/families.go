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

// familyInfo is one entry of `prism families --json`.
type familyInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	C           int             `json:"C"`
	Base        int             `json:"base_components"`
	Noise       int             `json:"noise_components"`
	DMax        int             `json:"d_max"`
	ModelSpace  string          `json:"model_space"` // exact decimal integer
	Shared      []string        `json:"shared,omitempty"`
	Simplex     []int           `json:"simplex,omitempty"`
	Components  []componentInfo `json:"components"`
}

type componentInfo struct {
	Index  int      `json:"index"`
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Latent int      `json:"latent"`
	Params []string `json:"params"`
}

func describeFamily(f family.Family) familyInfo {
	base, noise := family.Counts(f)
	l := f.Layout()
	info := familyInfo{
		Name:        f.Name(),
		Description: f.Description(),
		C:           len(f.Components()),
		Base:        base,
		Noise:       noise,
		DMax:        l.DMax,
		ModelSpace:  family.ModelSpaceSize(f).String(),
		Simplex:     l.Simplex,
	}
	for _, p := range l.Shared {
		info.Shared = append(info.Shared, p.Name)
	}
	for i, c := range f.Components() {
		ci := componentInfo{Index: i, Name: c.Name, Kind: c.Kind.String(), Latent: c.Latent, Params: []string{}}
		for _, p := range c.Params {
			ci.Params = append(ci.Params, p.Name)
		}
		info.Components = append(info.Components, ci)
	}
	return info
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
	var infos []familyInfo
	for _, name := range family.Names() {
		f, err := family.Lookup(name)
		if err != nil {
			return err
		}
		infos = append(infos, describeFamily(f))
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
