// Package spec builds model families from family spec files: YAML files
// that declare the components with their parameters, units and priors, the
// shared parameters and simplex fractions, the mask prior, the observation
// grid and the simulator — either the built-in additive simulator, whose
// terms are arithmetic expressions, or an external program (any language)
// that prism runs as worker processes and talks to over a binary framing on
// stdin/stdout. The format and the framing are documented in docs/spec.md.
//
// Importing the package installs its loader in package family, so that
// checkpoints of spec families (which store the spec's text) can be read
// back by every command.
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/prismsbi/prism/family"
)

func init() {
	family.SetSpecLoader(func(text []byte, dir string) (family.Family, error) {
		return Parse(text, dir)
	})
}

// File is the YAML layout of a family spec file (docs/spec.md).
type File struct {
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Components  []ComponentSpec `yaml:"components"`
	Shared      []ParamSpec     `yaml:"shared"`
	Fractions   *FractionSpec   `yaml:"fractions"`
	MaskPrior   MaskPriorSpec   `yaml:"mask_prior"`
	Observation ObservationSpec `yaml:"observation"`
	Simulator   SimulatorSpec   `yaml:"simulator"`
}

// ComponentSpec is one on/off component.
type ComponentSpec struct {
	Name string `yaml:"name"`
	// Role is "base" (the default; switched by the mask prior) or "noise"
	// (exactly one noise component is on in every mask).
	Role   string      `yaml:"role"`
	Params []ParamSpec `yaml:"params"`
	// Tags tell programs what the component is (family.Component.Tags),
	// e.g. [stick, oriented] for a compartment the dMRI maps should treat
	// as a fibre; letters, digits, '-' and '_' only.
	Tags []string `yaml:"tags"`
	// Term is the built-in simulator's contribution of an active base
	// component to the noiseless mean (an expression of x, the
	// component's parameters, the shared parameters and, for simplex
	// components, fraction).
	Term string `yaml:"term"`
	// Noise is the built-in simulator's standard deviation of the Gaussian
	// noise of a noise component (an expression that may also use mu, the
	// noiseless mean at x).
	Noise string `yaml:"noise"`
}

// ParamSpec is one natural parameter.
type ParamSpec struct {
	Name  string `yaml:"name"`
	Unit  string `yaml:"unit"`
	Prior string `yaml:"prior"`
}

// FractionSpec puts the listed components' mixing fractions on a simplex
// with a Dirichlet(Alpha) prior over the active ones.
type FractionSpec struct {
	Components []string  `yaml:"components"`
	Alpha      []float64 `yaml:"alpha"`
}

// MaskPriorSpec is the prior p(M | λ).
type MaskPriorSpec struct {
	// Kind is "bernoulli" (the default: each free base component on with
	// probability λ) or "dim_penalised" (paper App. C).
	Kind string `yaml:"kind"`
	// MinActive forces at least this many free base components on
	// (bernoulli only).
	MinActive int `yaml:"min_active"`
	// OneOf lists groups of base components of which exactly one is on,
	// chosen uniformly (bernoulli only).
	OneOf [][]string `yaml:"one_of"`
	// P0 and LambdaMax are the dimension-penalised prior's settings (0:
	// the paper's 0.5 and 4).
	P0        float64 `yaml:"p0"`
	LambdaMax float64 `yaml:"lambda_max"`
}

// ObservationSpec says where observations are measured. Either a fixed
// grid every observation shares — Values, or N points Start, Start+Step, …
// — or, with Covariate, a design of its own per observation: N values
// (in training; any number at inference) at covariate values drawn from
// the covariate's prior.
type ObservationSpec struct {
	Values    []float64      `yaml:"values"`
	Start     float64        `yaml:"start"`
	Step      float64        `yaml:"step"`
	N         int            `yaml:"n"`
	Unit      string         `yaml:"unit"`
	Covariate *CovariateSpec `yaml:"covariate"`
}

// CovariateSpec is the per-measurement covariate of per-observation
// designs (e.g. the sampling time): its name (the built-in simulator's
// variable; x is an alias), unit, the prior training draws each
// measurement's value from, and whether the values of one observation are
// sorted (sampling times are).
type CovariateSpec struct {
	Name   string `yaml:"name"`
	Unit   string `yaml:"unit"`
	Prior  string `yaml:"prior"`
	Sorted bool   `yaml:"sorted"`
}

// SimulatorSpec selects the simulator.
type SimulatorSpec struct {
	// Builtin "additive": x = Σ_active terms + noise (docs/spec.md).
	Builtin string `yaml:"builtin"`
	// Command is the external simulator's argv; a relative program path
	// containing a slash and relative arguments naming existing files
	// resolve against the spec file's directory, and the process runs
	// there.
	Command []string `yaml:"command"`
	// Workers is the number of processes (default 1).
	Workers int `yaml:"workers"`
	// Timeout bounds one batch's reply (Go duration; default 60s).
	Timeout string `yaml:"timeout"`
	// Retries is how often a failed batch is resent to a restarted
	// process, and a sample with a non-finite observation redrawn, before
	// simulation fails (default 2).
	Retries *int `yaml:"retries"`
}

// Load reads and parses a spec file: a *Family for the built-in simulator,
// an External for an external one.
func Load(path string) (family.Family, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	f, err := Parse(text, dir)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return f, nil
}

// Parse builds the family of a spec file's text; dir resolves the external
// simulator's relative paths.
func Parse(text []byte, dir string) (family.Family, error) {
	var s File
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	f, err := build(&s, dir)
	if err != nil {
		return nil, fmt.Errorf("spec %q: %w", s.Name, err)
	}
	f.text = append([]byte(nil), text...)
	f.dir = dir
	if f.ext != nil {
		return External{f}, nil
	}
	return f, nil
}

// Source returns the spec text and directory of a family built by Parse
// or Load (ok false for other families).
func Source(f family.Family) (text []byte, dir string, ok bool) {
	if s, is := f.(family.SpecSource); is {
		return s.SpecText(), s.SpecDir(), true
	}
	return nil, "", false
}

// build checks s and compiles it.
func build(s *File, dir string) (*Family, error) {
	if s.Name == "" || strings.ContainsAny(s.Name, " /\\\t\n") {
		return nil, fmt.Errorf("name %q must be non-empty without spaces or slashes", s.Name)
	}
	f := &Family{file: *s}
	index := map[string]int{}
	seenNoise := false
	for i, c := range s.Components {
		if c.Name == "" {
			return nil, fmt.Errorf("component %d has no name", i)
		}
		if _, dup := index[c.Name]; dup {
			return nil, fmt.Errorf("component name %q appears twice", c.Name)
		}
		index[c.Name] = i
		kind := family.Base
		switch c.Role {
		case "", "base":
			if seenNoise {
				return nil, fmt.Errorf("component %q: base components must come before the noise components", c.Name)
			}
		case "noise":
			kind, seenNoise = family.Noise, true
		default:
			return nil, fmt.Errorf("component %q: role %q must be base or noise", c.Name, c.Role)
		}
		for _, t := range c.Tags {
			if !validTag(t) {
				return nil, fmt.Errorf("component %q: tag %q must be non-empty letters, digits, '-' or '_'", c.Name, t)
			}
		}
		comp := family.Component{Name: c.Name, Kind: kind, Tags: append([]string(nil), c.Tags...)}
		var priors []paramPrior
		names := map[string]bool{}
		for _, p := range c.Params {
			ps, err := parsePrior(p.Prior)
			if err != nil {
				return nil, fmt.Errorf("component %q parameter %q: %w", c.Name, p.Name, err)
			}
			for j, pp := range ps {
				name := p.Name
				if len(ps) == 2 {
					name += [2]string{"_theta", "_phi"}[j]
				}
				if !isIdent(name) || names[name] {
					return nil, fmt.Errorf("component %q: parameter name %q is not a fresh identifier", c.Name, name)
				}
				names[name] = true
				unit := p.Unit
				if pp.kind == sphereTheta || pp.kind == spherePhi {
					unit = "rad"
				}
				comp.Params = append(comp.Params, family.Param{Name: name, Unit: unit, Prior: pp.text})
				priors = append(priors, pp)
			}
		}
		comp.Latent = len(priors)
		f.comps = append(f.comps, comp)
		f.priors = append(f.priors, priors)
	}
	if !seenNoise {
		return nil, errors.New("needs at least one component with role: noise (the observation noise; exactly one is on in every mask)")
	}
	for _, p := range s.Shared {
		ps, err := parsePrior(p.Prior)
		if err != nil {
			return nil, fmt.Errorf("shared parameter %q: %w", p.Name, err)
		}
		if len(ps) != 1 {
			return nil, fmt.Errorf("shared parameter %q: a sphere prior is only allowed for component parameters", p.Name)
		}
		if !isIdent(p.Name) {
			return nil, fmt.Errorf("shared parameter name %q is not an identifier", p.Name)
		}
		f.shared = append(f.shared, family.Param{Name: p.Name, Unit: p.Unit, Prior: ps[0].text})
		f.sharedPriors = append(f.sharedPriors, ps[0])
	}
	var simplex []int
	var alpha []float64
	if fr := s.Fractions; fr != nil {
		if len(fr.Components) < 2 || len(fr.Components) > family.MaxSimplex || len(fr.Alpha) != len(fr.Components) {
			return nil, fmt.Errorf("fractions: want 2–%d components and one alpha per component, got %d and %d", family.MaxSimplex, len(fr.Components), len(fr.Alpha))
		}
		for i, name := range fr.Components {
			k, ok := index[name]
			if !ok || f.comps[k].Kind != family.Base {
				return nil, fmt.Errorf("fractions: %q is not a base component", name)
			}
			if !(fr.Alpha[i] > 0) {
				return nil, fmt.Errorf("fractions: alpha %v of %q must be positive", fr.Alpha[i], name)
			}
			simplex = append(simplex, k)
		}
		alpha = fr.Alpha
		f.stick = family.StickBreaking{Alpha: alpha}
	}
	f.layout = family.NewLayout(f.comps, simplex, alpha, f.shared)
	if err := f.buildMaskPrior(&s.MaskPrior, index); err != nil {
		return nil, fmt.Errorf("mask_prior: %w", err)
	}
	if err := f.buildGrid(&s.Observation); err != nil {
		return nil, fmt.Errorf("observation: %w", err)
	}
	f.layoutEnv()
	if err := f.buildSimulator(&s.Simulator, dir); err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	return f, nil
}

func (f *Family) buildGrid(o *ObservationSpec) error {
	if o.Covariate != nil {
		return f.buildCovariate(o)
	}
	switch {
	case len(o.Values) > 0 && o.N > 0:
		return errors.New("give values or start/step/n, not both")
	case len(o.Values) > 0:
		f.grid = append([]float64(nil), o.Values...)
	case o.N > 0:
		if !(o.Step > 0) {
			return fmt.Errorf("step %v must be positive", o.Step)
		}
		f.grid = make([]float64, o.N)
		for j := range f.grid {
			f.grid[j] = o.Start + float64(j)*o.Step
		}
	default:
		return errors.New("needs values: [...] or n, start and step (the fixed grid of every observation)")
	}
	f.design = family.Design{N: len(f.grid), CovDim: 1, Cov: f.grid, Name: "grid"}
	return nil
}

// buildCovariate sets up per-observation designs.
func (f *Family) buildCovariate(o *ObservationSpec) error {
	c := o.Covariate
	switch {
	case len(o.Values) > 0 || o.Start != 0 || o.Step != 0:
		return errors.New("a covariate (per-observation designs) replaces the fixed grid: give n and covariate, not values/start/step")
	case o.N <= 0:
		return fmt.Errorf("n %d: per-observation designs need the number of measurements training simulates (n > 0)", o.N)
	case !isIdent(c.Name):
		return fmt.Errorf("covariate name %q must be a word (letters, digits, _)", c.Name)
	}
	ps, err := parsePrior(c.Prior)
	if err != nil {
		return fmt.Errorf("covariate %s: %w", c.Name, err)
	}
	if len(ps) != 1 {
		return fmt.Errorf("covariate %s: prior %q must be a one-dimensional prior", c.Name, c.Prior)
	}
	lo, hi := ps[0].quantile(0.001), ps[0].quantile(0.999)
	if !(hi > lo) {
		return fmt.Errorf("covariate %s: prior %q has no spread", c.Name, c.Prior)
	}
	f.covariate = &covariate{name: c.Name, prior: ps[0], sorted: c.Sorted, n: o.N, lo: lo, hi: hi}
	return nil
}

func (f *Family) buildSimulator(s *SimulatorSpec, dir string) error {
	switch {
	case s.Builtin != "" && len(s.Command) > 0:
		return errors.New("give builtin or command, not both")
	case s.Builtin == "additive":
		return f.compileAdditive()
	case s.Builtin != "":
		return fmt.Errorf("unknown builtin %q (known: additive)", s.Builtin)
	case len(s.Command) == 0:
		return errors.New("needs builtin: additive or command: [PROGRAM, ARGS...]")
	}
	for _, c := range f.file.Components {
		if c.Term != "" || c.Noise != "" {
			return fmt.Errorf("component %q: term and noise belong to the built-in simulator; an external simulator computes the observation itself", c.Name)
		}
	}
	workers := s.Workers
	if workers == 0 {
		workers = 1
	}
	if workers < 0 || workers > 256 {
		return fmt.Errorf("workers %d must lie in 1…256", s.Workers)
	}
	timeout := 60 * time.Second
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q must be a positive duration such as 30s", s.Timeout)
		}
		timeout = d
	}
	retries := 2
	if s.Retries != nil {
		retries = *s.Retries
	}
	if retries < 0 || retries > 100 {
		return fmt.Errorf("retries %d must lie in 0…100", retries)
	}
	f.ext = newPool(f, resolveCommand(s.Command, dir), dir, workers, timeout, retries)
	return nil
}

// resolveCommand makes a relative program path containing a slash, and
// relative arguments that name existing files, absolute against dir.
func resolveCommand(argv []string, dir string) []string {
	out := append([]string(nil), argv...)
	for i, a := range out {
		if filepath.IsAbs(a) || strings.HasPrefix(a, "-") {
			continue
		}
		p := filepath.Join(dir, a)
		if i == 0 && !strings.Contains(a, "/") {
			continue // a program on PATH, such as python3
		}
		if _, err := os.Stat(p); err == nil {
			out[i] = p
		}
	}
	return out
}

func isIdent(s string) bool {
	if s == "" || s == "x" || s == "mu" || s == "fraction" || s == "pi" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	_, fn := functions[s]
	return !fn
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// validTag reports whether t is a non-empty word of letters, digits, '-'
// and '_'.
func validTag(t string) bool {
	if t == "" {
		return false
	}
	for _, r := range t {
		if !(r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}
