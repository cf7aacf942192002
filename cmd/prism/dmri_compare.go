package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/atomicfile"
)

// runDMRICompare is `prism dmri compare`: two BedpostX-layout folders
// (dmrifit.Compare), or one with a DTI folder (dmrifit.CompareDTI).
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
	if err := atomicfile.WriteJSON(filepath.Join(*out, "compare.json"), c); err != nil {
		return err
	}
	if err := dmrifit.WriteComparisonPNGs(*out, a, b, c); err != nil {
		return err
	}
	return printIndented(stdout, c)
}
