// Package family defines prism's model families: C on/off components with
// parameter blocks, a prior over component masks controlled by the complexity
// knob λ, parameter priors reached from a standard-normal latent vector θ by
// bijections, a simulator and a likelihood.
//
// A family is everything the network and the posterior need to know about a
// scientific model class. Concrete families live in sub-packages
// (family/symbolic, family/dmri, family/lingauss) and register themselves
// with Register so that the command-line tool can find them by name.
//
// Conventions shared by every family:
//
//   - Components are ordered: base (model) components first, then the noise
//     components, of which exactly one is active in every mask.
//   - The latent vector θ ∈ R^{DMax} is laid out as fraction latents, then the
//     shared-parameter latents, then one block per component in component
//     order (see Layout). A priori θ ~ N(0, I) on every dimension; only the
//     dimensions reported active by Layout.Active carry information.
//   - Simulation, forward model and likelihood work in float64 and never
//     allocate in their hot path.
package family

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
)

// Kind says what role a component plays in the mask.
type Kind int

const (
	// Base components are switched on and off independently by the mask prior.
	Base Kind = iota
	// Noise components are mutually exclusive: exactly one is active.
	Noise
)

func (k Kind) String() string {
	if k == Noise {
		return "noise"
	}
	return "base"
}

// Param describes one natural-unit parameter: its name as used in JSON
// parameter files (docs/families.md), its unit and its prior in words.
type Param struct {
	Name  string
	Unit  string
	Prior string
}

// Component is one on/off building block of a family.
type Component struct {
	Name   string  // e.g. "Linear", "Stick", "NoiseObserver"
	Kind   Kind    // Base or Noise
	Params []Param // natural parameters, in latent order; len may differ from the latent block size (tensor: 6 latents, 6 params)
	Latent int     // size of the component's block in θ
	// Tags say what the component is to programs that interpret its
	// parameters (the dMRI voxel pipeline looks for "ball" and "stick"
	// compartments, not for names). The vocabulary of each domain is
	// documented with its families (docs/families.md); spec files set them
	// with `tags:`.
	Tags []string
}

// Has reports whether the component carries tag.
func (c Component) Has(tag string) bool {
	for _, t := range c.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Block is the position of a component's latents inside θ.
type Block struct {
	Offset, Size int
}

// Layout describes the flat latent vector θ of a family.
type Layout struct {
	// Simplex lists, in stick-breaking order, the components whose mixing
	// fractions live on a simplex (dMRI compartments). Empty when the family
	// has no fractions. The first len(Simplex)-1 entries of θ are the
	// stick-breaking latents.
	Simplex []int
	// Alpha holds the Dirichlet concentration of each simplex component.
	Alpha []float64
	// Shared are the parameters shared by several components (B3S: d, d_std),
	// stored after the fraction latents.
	Shared []Param
	// Blocks[k] is component k's latent block.
	Blocks []Block
	// DMax is the length of θ.
	DMax int
}

// FractionLatents is the number of stick-breaking latents (len(Simplex)-1, or 0).
func (l *Layout) FractionLatents() int {
	if len(l.Simplex) == 0 {
		return 0
	}
	return len(l.Simplex) - 1
}

// SharedOffset is the index of the first shared latent in θ.
func (l *Layout) SharedOffset() int { return l.FractionLatents() }

// NewLayout builds the layout for the given components, simplex and shared
// parameters, placing fraction latents, shared latents and component blocks
// one after another.
func NewLayout(comps []Component, simplex []int, alpha []float64, shared []Param) *Layout {
	l := &Layout{Simplex: simplex, Alpha: alpha, Shared: shared}
	off := l.FractionLatents() + len(shared)
	l.Blocks = make([]Block, len(comps))
	for k, c := range comps {
		l.Blocks[k] = Block{Offset: off, Size: c.Latent}
		off += c.Latent
	}
	l.DMax = off
	return l
}

// Active writes into active (length DMax) which latent dimensions carry
// information under mask: a fraction latent i is active when simplex
// component i is on and some later simplex component is on (k active
// components use k−1 latents); shared latents are always active; a
// component's block is active when the component is on.
func (l *Layout) Active(mask []bool, active []bool) {
	n := l.FractionLatents()
	later := false
	for i := len(l.Simplex) - 1; i >= 0; i-- {
		on := mask[l.Simplex[i]]
		if i < n {
			active[i] = on && later
		}
		later = later || on
	}
	for i := range l.Shared {
		active[n+i] = true
	}
	for k, b := range l.Blocks {
		for j := 0; j < b.Size; j++ {
			active[b.Offset+j] = mask[k]
		}
	}
}

// Design says where the values of one observation were measured. Families on
// a fixed grid (symbolic regression) give the grid as a single covariate;
// dMRI designs carry (b [s/mm²], gx, gy, gz) per measurement.
type Design struct {
	N      int       // number of measurements
	CovDim int       // covariates per measurement
	Cov    []float64 // N×CovDim covariates, row-major
	Name   string    // protocol name for reports ("ukb", "grid", a file prefix, …)
}

// Row returns the covariates of measurement j.
func (d Design) Row(j int) []float64 { return d.Cov[j*d.CovDim : (j+1)*d.CovDim] }

// DesignSampler draws the design of one simulated observation.
type DesignSampler interface {
	SampleDesign(r *rand.Rand) Design
}

// DesignSamplerInto is implemented by design samplers that can write a
// design's covariates into a caller-owned buffer, so that batched simulation
// draws random protocols without allocating.
type DesignSamplerInto interface {
	DesignSampler
	// CovLen is the buffer length SampleDesignInto needs.
	CovLen() int
	// SampleDesignInto is SampleDesign with Cov stored in buf[:CovLen()].
	SampleDesignInto(r *rand.Rand, buf []float64) Design
}

// TableDesigner is implemented by families whose designs can be read from
// acquisition tables on disk (dMRI: an FSL bval/bvec pair).
type TableDesigner interface {
	DesignFromTable(bvalPath, bvecPath string) (Design, error)
}

// DesignChecker is implemented by families that can tell a design given by
// the user (a file, a JSON observation) from one that cannot inform the
// model, such as a diffusion table without diffusion weighting.
type DesignChecker interface {
	CheckDesign(d Design) error
}

// ObservationChecker is implemented by families that can tell values no
// instance of the model could produce (a dMRI signal a hundred times its
// b = 0 value) from real data, so that readers refuse them instead of
// fitting them.
type ObservationChecker interface {
	CheckObservation(d Design, x []float64) error
}

// FixedDesign is a DesignSampler that always returns the same design.
type FixedDesign Design

// SampleDesign returns the fixed design.
func (f FixedDesign) SampleDesign(*rand.Rand) Design { return Design(f) }

// MaskPrior is a prior p(M | λ) over component masks.
type MaskPrior interface {
	// Sample draws a mask into mask (length C).
	Sample(r *rand.Rand, lambda float64, mask []bool)
	// LogProb returns log p(mask | λ); −Inf for impossible masks.
	LogProb(mask []bool, lambda float64) float64
}

// Params holds natural-unit parameters of one sample, keyed as in the
// command-line JSON: component index → parameter name → value, shared
// parameters by name, and the fractions of the simplex components in
// Layout.Simplex order (zero for inactive components).
type Params struct {
	Components map[int]map[string]float64 `json:"components"`
	Shared     map[string]float64         `json:"shared,omitempty"`
	Fractions  []float64                  `json:"fractions,omitempty"`
}

// Family is a model family. Implementations must be safe for concurrent use
// by several goroutines (they hold no mutable state).
type Family interface {
	// Name is the registry name, e.g. "b3s".
	Name() string
	// Description is one line for `prism families`.
	Description() string
	// Components lists the C components in mask order.
	Components() []Component
	// Layout describes θ.
	Layout() *Layout
	// MaskPrior is p(M | λ).
	MaskPrior() MaskPrior
	// Designs returns a design sampler by name: "" is the family's default
	// training mix; dMRI also knows "ukb", "hcp", "random" and FSL file
	// prefixes (PREFIX.bval / PREFIX.bvec).
	Designs(spec string) (DesignSampler, error)
	// Forward writes the noiseless model output for latent θ and mask into
	// out (length d.N). Noise components are ignored.
	Forward(d Design, theta []float64, mask []bool, out []float64)
	// Simulate writes a noisy observation into out (length d.N).
	Simulate(r *rand.Rand, d Design, theta []float64, mask []bool, out []float64)
	// LogLikelihood returns log p(x | θ, M). When grad is non-nil (length
	// DMax) it receives ∂/∂θ of the log-likelihood with respect to the latent
	// θ (zero on inactive dimensions).
	LogLikelihood(d Design, x, theta []float64, mask []bool, grad []float64) float64
	// Natural maps latent θ to natural-unit parameters of the active components.
	Natural(theta []float64, mask []bool) Params
	// Latent maps natural parameters back to latent θ (inactive dims zero).
	Latent(p Params, mask []bool) ([]float64, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]func() Family{}
)

// Register makes a family constructor available by name. It panics on
// duplicate names, like database/sql.Register.
func Register(name string, ctor func() Family) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("family: Register called twice for " + name)
	}
	registry[name] = ctor
}

// Lookup returns the family registered under name.
func Lookup(name string) (Family, error) {
	registryMu.RLock()
	ctor, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("family: unknown family %q (known: %v)", name, Names())
	}
	return ctor(), nil
}

// Names lists the registered families in sorted order.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LatentNames returns a readable name for every dimension of θ, for
// reports: "fraction Comp" for the stick-breaking latent of a simplex
// component, the shared parameter's name, "Comp.param" when a component's
// block has one latent per natural parameter, "Comp" for a one-latent block
// and "Comp[j]" otherwise.
func (l *Layout) LatentNames(comps []Component) []string {
	names := make([]string, l.DMax)
	for i := 0; i < l.FractionLatents(); i++ {
		names[i] = "fraction " + comps[l.Simplex[i]].Name
	}
	for i, p := range l.Shared {
		names[l.SharedOffset()+i] = p.Name
	}
	for k, b := range l.Blocks {
		c := comps[k]
		for j := 0; j < b.Size; j++ {
			switch {
			case len(c.Params) == b.Size:
				names[b.Offset+j] = c.Name + "." + c.Params[j].Name
			case b.Size == 1:
				names[b.Offset+j] = c.Name
			default:
				names[b.Offset+j] = fmt.Sprintf("%s[%d]", c.Name, j)
			}
		}
	}
	return names
}
