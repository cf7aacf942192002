// Package data holds the example data that ship inside prism (compiled
// into the binary with go:embed): a real whole-brain diffusion MRI scan
// with its licence, and a symbolic-regression observation. `prism demo`
// runs on them; README.md in this directory documents their origin and
// licence.
package data

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// Files holds every bundled file under its path in this directory.
//
//go:embed README.md xa30-prisma-b2500-wholebrain symbolic-k15-example.jsonl symbolic-k50-example.jsonl
var Files embed.FS

// Paths of the bundled data sets inside Files.
const (
	// ScanDir is the folder of the xa30 scan (BSD-2-Clause, see its LICENSE).
	ScanDir = "xa30-prisma-b2500-wholebrain"
	// ScanDWI, ScanBval, ScanBvec and ScanMask are its image, FSL
	// gradient table and brain mask.
	ScanDWI  = ScanDir + "/dwi_PA.nii.gz"
	ScanBval = ScanDir + "/dwi_PA.bval"
	ScanBvec = ScanDir + "/dwi_PA.bvec"
	ScanMask = ScanDir + "/mask.nii.gz"
	// ScanLicense is the scan's licence text.
	ScanLicense = ScanDir + "/LICENSE"
	// SymbolicExample is the symbolic-k15 observation (`prism simulate`
	// JSON line with its true mask and parameters).
	SymbolicExample = "symbolic-k15-example.jsonl"
	// SymbolicK50Example is the symbolic-k50 observation, in the same
	// format.
	SymbolicK50Example = "symbolic-k50-example.jsonl"
)

// Example returns the bundled observation file of the named family, or
// "" if prism bundles none for it.
func Example(family string) string {
	switch family {
	case "symbolic-k15":
		return SymbolicExample
	case "symbolic-k50":
		return SymbolicK50Example
	}
	return ""
}

// CopyTo writes every bundled file below dir, keeping the paths of Files,
// so that the scan's licence lands next to it.
func CopyTo(dir string) error {
	return fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("data: %w", err)
			}
			return nil
		}
		b, err := Files.ReadFile(path)
		if err != nil {
			return fmt.Errorf("data: %w", err)
		}
		if err := atomicfile.WriteBytes(dst, b); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		return nil
	})
}
