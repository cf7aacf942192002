package family

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SpecLoader builds a family from the text of a family spec file
// (docs/spec.md); dir is the directory the file was read from, against
// which relative paths in it (the simulator command) resolve. Package
// family/spec installs it, so that programs linking that package can
// re-create a spec family from a checkpoint that stores the spec's text.
type SpecLoader func(text []byte, dir string) (Family, error)

var specLoader SpecLoader

// spec names installed with Install: they may be replaced, built-in
// names may not.
var installed = map[string]bool{}

// SetSpecLoader installs the spec loader (called by family/spec's init).
func SetSpecLoader(l SpecLoader) {
	registryMu.Lock()
	defer registryMu.Unlock()
	specLoader = l
}

// FromSpec builds the family of a spec file's text and installs it in the
// registry (Install), so that Lookup finds it by name for the rest of the
// process.
func FromSpec(text []byte, dir string) (Family, error) {
	registryMu.RLock()
	l := specLoader
	registryMu.RUnlock()
	if l == nil {
		return nil, errors.New("family: this program cannot read family spec files (import github.com/prismsbi/prism/family/spec)")
	}
	f, err := l(text, dir)
	if err != nil {
		return nil, err
	}
	if err := Install(f); err != nil {
		return nil, err
	}
	return f, nil
}

// Install registers an already built family (from a spec file) under its
// name. A family installed earlier under the same name is replaced; the
// name of a built-in family (Register) is refused.
func Install(f Family) error {
	registryMu.Lock()
	defer registryMu.Unlock()
	name := f.Name()
	if _, dup := registry[name]; dup && !installed[name] {
		return fmt.Errorf("family: spec family name %q is the name of a built-in family; choose another name", name)
	}
	registry[name] = func() Family { return f }
	installed[name] = true
	return nil
}

// LikelihoodReporter is implemented by families that may lack a
// likelihood: the external simulators of family/spec, whose LogLikelihood
// and Forward are NaN. Likelihood-based tools (KSD, importance sampling,
// predictive bands) skip such families.
type LikelihoodReporter interface {
	HasLikelihood() bool
}

// HasLikelihood reports whether f's LogLikelihood and Forward are usable
// (true unless f says otherwise through LikelihoodReporter).
func HasLikelihood(f Family) bool {
	if r, ok := f.(LikelihoodReporter); ok {
		return r.HasLikelihood()
	}
	return true
}

// SpecSource is implemented by families built from a spec file: the file's
// text and directory, which training stores in its checkpoints.
type SpecSource interface {
	SpecText() []byte
	SpecDir() string
}

// LoadSpecFile reads a family spec file, builds its family and installs it
// in the registry (FromSpec). Errors name the file.
func LoadSpecFile(path string) (Family, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("family: spec file: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("family: spec file %s: %w", path, err)
	}
	f, err := FromSpec(text, dir)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return f, nil
}

// Resolve returns the family called name: the registered one when spec is
// empty, otherwise the family built from the spec text (whose name must be
// name), as stored by training runs and checkpoints.
func Resolve(name, spec, specDir string) (Family, error) {
	if spec == "" {
		return Lookup(name)
	}
	f, err := FromSpec([]byte(spec), specDir)
	if err != nil {
		return nil, fmt.Errorf("the run's family spec: %w", err)
	}
	if f.Name() != name {
		return nil, fmt.Errorf("the run's family spec names %q, the configuration %q", f.Name(), name)
	}
	return f, nil
}
