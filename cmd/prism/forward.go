package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/obsfile"
)

func init() {
	register("forward", "evaluate a family's noiseless forward model for given natural parameters", runForward)
}

func runForward(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("forward", "--family F --mask BITS --params JSON|FILE [--bval FILE --bvec FILE | --protocol P]", stderr)
	famName := fs.String("family", "", "model family (see `prism families`)")
	specPath := addSpecFlag(fs)
	maskStr := fs.String("mask", "", "mask as a string of 0/1, one per component in component order")
	paramsArg := fs.String("params", "", `natural parameters: inline JSON {"components":{"<index>":{"<name>":value}},"shared":{…},"fractions":[…]} or a file holding it`)
	bval := fs.String("bval", "", "FSL b-value file (dMRI; with --bvec)")
	bvec := fs.String("bvec", "", "FSL b-vector file (dMRI; with --bval)")
	protocol := fs.String("protocol", "", "fixed design by name (dMRI: ukb, hcp, or an FSL PREFIX); default: the family's fixed design")
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
	f, err := family.Lookup(*famName)
	if err != nil {
		return fmt.Errorf("--family: %w", err)
	}
	if !family.HasLikelihood(f) {
		return fmt.Errorf("%s has no noiseless forward model (its simulator is an external program); use prism simulate", f.Name())
	}
	if *maskStr == "" {
		return fmt.Errorf("--mask is required: %d characters 0/1 for the components of %s (see `prism families --json`)", len(f.Components()), f.Name())
	}
	mask, err := family.ParseMask(*maskStr, len(f.Components()))
	if err != nil {
		return fmt.Errorf("--mask: %w", err)
	}
	d, err := forwardDesign(f, *bval, *bvec, *protocol)
	if err != nil {
		return err
	}
	if *paramsArg == "" {
		return errors.New(`--params is required (inline JSON or a file; use {} for a mask without parameters)`)
	}
	params, err := readParams(*paramsArg)
	if err != nil {
		return fmt.Errorf("--params: %w", err)
	}
	theta, err := f.Latent(params, mask)
	if err != nil {
		return fmt.Errorf("--params: %w", err)
	}
	y := make([]float64, d.N)
	f.Forward(d, theta, mask, y)

	key := "y"
	if _, ok := f.(family.TableDesigner); ok {
		key = "signal"
	}
	b := append([]byte(`{"`+key+`":`), nil...)
	b, bad := obsfile.AppendFloats(b, y)
	if bad {
		return fmt.Errorf("the forward model of %s produced a non-finite value for these parameters", f.Name())
	}
	b = append(b, "}\n"...)
	_, err = stdout.Write(b)
	return err
}

// readParams decodes --params: inline JSON when the argument starts with
// '{', otherwise the name of a file holding the JSON. Unknown top-level
// fields are errors.
func readParams(arg string) (family.Params, error) {
	var p family.Params
	data := []byte(arg)
	src := "inline JSON"
	if !strings.HasPrefix(strings.TrimSpace(arg), "{") {
		var err error
		if data, err = os.ReadFile(arg); err != nil {
			return p, err
		}
		src = arg
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("%s: %w (want {\"components\":{\"<index>\":{\"<name>\":value}},\"shared\":{…},\"fractions\":[…]})", src, err)
	}
	if dec.More() {
		return p, fmt.Errorf("%s: trailing data after the JSON object", src)
	}
	return p, nil
}

// forwardDesign picks the design for `prism forward`: an FSL table pair, a
// named protocol, or the family's default design when that is fixed.
func forwardDesign(f family.Family, bval, bvec, protocol string) (family.Design, error) {
	if (bval == "") != (bvec == "") {
		return family.Design{}, errors.New("--bval and --bvec must be given together")
	}
	if bval != "" {
		if protocol != "" {
			return family.Design{}, errors.New("give either --bval/--bvec or --protocol, not both")
		}
		td, ok := f.(family.TableDesigner)
		if !ok {
			return family.Design{}, fmt.Errorf("--bval/--bvec: family %s has no acquisition tables", f.Name())
		}
		d, err := td.DesignFromTable(bval, bvec)
		if err != nil {
			return family.Design{}, fmt.Errorf("--bval/--bvec: %w", err)
		}
		return d, nil
	}
	ds, err := f.Designs(protocol)
	if err != nil {
		return family.Design{}, fmt.Errorf("--protocol: %w", err)
	}
	fixed, ok := ds.(family.FixedDesign)
	if !ok {
		if protocol == "" {
			return family.Design{}, fmt.Errorf("family %s has no fixed default design: give --bval and --bvec, or a fixed --protocol", f.Name())
		}
		return family.Design{}, fmt.Errorf("--protocol %s draws random designs; forward needs a fixed one (a named table or --bval/--bvec)", protocol)
	}
	return fixed.SampleDesign((*rand.Rand)(nil)), nil
}
