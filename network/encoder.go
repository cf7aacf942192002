package network

import (
	"fmt"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// Observation is one observed data set: where it was measured and the
// values.
type Observation struct {
	Design family.Design
	X      []float64 // length Design.N
}

// encInput holds the encoder's input arrays for a batch of B observations
// of T tokens each, written by the network's embedder.
type encInput struct {
	B, T  int
	Feat  []float32 // per-token features, [B, T, embedder's width]
	BTild []float32 // diffusion: [B, T, 1] scaled b-values b̃; points: scaled covariates
	tok   []float32 // grid with Linear: one observation's [T, 2P+2] tokens
}

// An embedder turns the observations of one kind (family.ObservationKindOf)
// into the encoder's input tokens: it owns the input layer's parameters,
// the token features and the projection to the model width. The
// transformer layers after it are shared by every kind.
type embedder interface {
	// build creates the embedder's parameters in scope s (model width d),
	// always in the same order.
	build(s engine.Scope, d int)
	// tokens returns the number of encoder tokens of an observation with m
	// measurements, or an error when the network cannot read it.
	tokens(m int) (int, error)
	// fill writes the inputs of the observations (designs[i], xs[i]), all
	// of one length, into in (in.B and in.T are set), reusing its buffers.
	fill(in *encInput, designs []family.Design, xs [][]float64)
	// embed returns the input tokens [B, T, D].
	embed(g *engine.Graph, in *encInput) *engine.Tensor
}

// embedders maps each observation kind to the constructor of its embedder,
// given the network configuration and the family's default design. A new
// kind of observation is one entry here and one file.
var embedders = map[string]func(c Config, f family.Family, d0 family.Design) (embedder, error){
	family.ObservationGrid:      newGridEmbedder,
	family.ObservationDiffusion: newDiffusionEmbedder,
	family.ObservationPoints:    newPointsEmbedder,
}

// newEmbedder returns the embedder for family f's observations.
func newEmbedder(f family.Family, c Config, d0 family.Design) (embedder, error) {
	kind := family.ObservationKindOf(f)
	ctor, ok := embedders[kind]
	if !ok {
		return nil, fmt.Errorf("observations of kind %q; the encoders read %q, %q and %q", kind, family.ObservationGrid, family.ObservationDiffusion, family.ObservationPoints)
	}
	return ctor(c, f, d0)
}

// resize returns s with length m, reusing its storage when possible.
func resize[T any](s []T, m int) []T {
	if cap(s) >= m {
		return s[:m]
	}
	return make([]T, m)
}

// fillEncoder writes the encoder inputs of the observations (designs[i],
// xs[i]) into in, reusing its buffers. All observations must have the same
// number of measurements.
func (n *Net) fillEncoder(in *encInput, designs []family.Design, xs [][]float64) error {
	b := len(xs)
	if b == 0 {
		return fmt.Errorf("no observations")
	}
	m := designs[0].N
	for i := range xs {
		d := designs[i]
		if d.N != m || len(xs[i]) != m {
			return fmt.Errorf("observation %d has %d values (design N=%d), observation 0 has %d: a batch needs one length", i, len(xs[i]), d.N, m)
		}
		if d.CovDim != n.covDim {
			return fmt.Errorf("observation %d has %d covariates per measurement, the %s network expects %d", i, d.CovDim, n.fam.Name(), n.covDim)
		}
	}
	if m == 0 {
		return fmt.Errorf("observations have no measurements")
	}
	t, err := n.emb.tokens(m)
	if err != nil {
		return err
	}
	in.B, in.T = b, t
	n.emb.fill(in, designs, xs)
	return nil
}

// encode runs the encoder on prepared inputs and returns the encoder
// tokens [B, T, D] after a final LayerNorm.
func (n *Net) encode(g *engine.Graph, in *encInput) *engine.Tensor {
	h := n.emb.embed(g, in)
	for i := range n.enc {
		h = n.enc[i].forward(g, n.cfg.Heads, h, nil, nil, engine.Mask{}, nil)
	}
	return g.LayerNorm(h, n.encLNg, n.encLNb)
}

// Encode runs the encoder on a batch of observations with the same number
// of measurements and returns the encoder tokens [B, T, D] (owned by g).
// The input arrays are allocated per call, so the result stays valid until
// g is reset.
func (n *Net) Encode(g *engine.Graph, obs []Observation) (*engine.Tensor, error) {
	designs := make([]family.Design, len(obs))
	xs := make([][]float64, len(obs))
	for i, o := range obs {
		designs[i], xs[i] = o.Design, o.X
	}
	in := new(encInput)
	if err := n.fillEncoder(in, designs, xs); err != nil {
		return nil, fmt.Errorf("network: encode: %w", err)
	}
	return n.encode(g, in), nil
}
