// Package network is the PRISM network of paper §3.2 and App. A.2 on
// prism's engine: an observation encoder, a tokenizer, an autoregressive
// model decoder q(M | x, λ) and an EDM diffusion parameter decoder
// q(θ | M, x), for any registered family.
//
// Training uses New, MakeBatch and Loss; inference uses Encode,
// MaskLogits / MaskLogProb (exact log q of given masks in one pass),
// SampleMasks (autoregressive sampling with a KV cache) and Denoise (the
// EDM denoiser D(θ_σ; σ), differentiable with respect to θ_σ). The
// architecture, the token layout per family, the observation scaling and
// the EDM equations are described in docs/network.md.
package network

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// token is one parameter-decoder token: the θ range [Off, Off+Size) it
// carries, its kind and, for component tokens, the component.
type token struct {
	Off, Size int
	Kind      tokenKind
	Index     int // fraction index, or component index
}

type tokenKind int

const (
	fractionToken tokenKind = iota
	sharedToken
	componentToken
)

// Net is a PRISM network for one family. Its parameters live in Params().
// The inference methods (Encode, MaskLogits, SampleMasks, Denoise) only read
// the parameters and may run concurrently on separate graphs; nothing may
// run while the parameters change (an optimiser step).
type Net struct {
	fam    family.Family
	cfg    Config
	store  *engine.ParamStore
	layout *family.Layout

	c, dmax int // components, latent dimensions
	// trainLambda is the distribution ρ of the training simulations' λ
	// (SetTrainingLambda), which the λ quadrature and strata of the mask
	// loss need: p(λ | M) ∝ ρ(λ) p(M | λ). Zero value: U(0, 1).
	trainLambda family.LambdaDist
	covDim      int // covariates per measurement of the family's designs
	nFrac       int
	nShared     int
	tokens      []token // parameter tokens in θ order
	dPad        int     // largest token value size
	compTok     []int   // component → its parameter token, −1 if it has no latents

	// encoder
	emb    embedder // input layer of the family's observation kind
	enc    []block
	encLNg *engine.Tensor
	encLNb *engine.Tensor

	// tokenizer
	id        *engine.Tensor   // [C, D] component identities (both decoders)
	bit       *engine.Tensor   // [3, D] mask-bit embedding: 0, 1, start
	mcW, mcB  *engine.Tensor   // [D, D/2]: model-decoder projection of the identities
	mStart    *engine.Tensor   // [1, D/2]: "previous identity" slot of position 0
	fracID    *engine.Tensor   // [nFrac, D]
	fracEnc   *engine.Tensor   // [1, D] shared fraction value encoder
	fracDec   *engine.Tensor   // [D, 1] shared fraction decoder (zero-initialised)
	fracDecB  *engine.Tensor   // [1]
	sharedID  *engine.Tensor   // [1, D]
	sharedEnc *engine.Tensor   // [dShared, D]
	sharedDec *engine.Tensor   // [D, dShared]
	sharedDcB *engine.Tensor   // [dShared]
	compEnc   []*engine.Tensor // per component with latents: [d_k, D]
	compDec   []*engine.Tensor // [D, d_k], zero-initialised
	compDecB  []*engine.Tensor // [d_k]

	// decoders
	mdec       decoder
	mHeadW     *engine.Tensor // [D, 1] (autoregressive)
	mHeadB     *engine.Tensor // [1]
	catW       *engine.Tensor // [C·D, |S|] (categorical), zero-initialised
	catB       *engine.Tensor // [|S|]
	cat        *categorical   // nil for the autoregressive decoder
	pdec       decoder
	causalMask engine.Mask

	mu      sync.Mutex
	gathers map[gatherKey]*gatherIdx // index tables of the parameter tokenizer by batch size and token subset
	// samplers recycles the mask sampler's graphs, KV caches and group
	// tables (*samplerState) across calls: a fresh graph re-grows its arena
	// as the number of prefix groups grows, step after step.
	samplers sync.Pool
	// chunkGraphs recycles the inference graphs of DenoiseMasked's row
	// chunks (one per core at a time).
	chunkGraphs sync.Pool
}

// New builds the network for family f with configuration cfg, drawing the
// initial weights from a PCG generator seeded with seed.
func New(f family.Family, cfg Config, seed uint64) (*Net, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Net{
		fam: f, cfg: cfg, layout: f.Layout(),
		store:   engine.NewParamStore(rand.New(rand.NewPCG(seed, 0x9e7))),
		gathers: map[gatherKey]*gatherIdx{},
	}
	comps := f.Components()
	n.c, n.dmax = len(comps), n.layout.DMax
	if n.c == 0 {
		return nil, fmt.Errorf("network: family %s has no components", f.Name())
	}
	ds, err := f.Designs("")
	if err != nil {
		return nil, fmt.Errorf("network: default design of %s: %w", f.Name(), err)
	}
	d0 := ds.SampleDesign(rand.New(rand.NewPCG(seed, 1)))
	n.covDim = d0.CovDim
	if n.emb, err = newEmbedder(f, cfg, d0); err != nil {
		return nil, fmt.Errorf("network: %s: %w", f.Name(), err)
	}
	if cfg.MaskDecoder == CategoricalDecoder {
		if err := n.planCategorical(); err != nil {
			return nil, err
		}
	}
	n.planTokens(comps)
	if len(n.tokens) == 0 {
		return nil, fmt.Errorf("network: family %s has no latent parameters", f.Name())
	}
	n.build(comps)
	n.causalMask = engine.CausalMask(n.c)
	return n, nil
}

// planTokens lays out the parameter-decoder tokens: one per fraction
// latent, one for the shared parameters (if any), one per component with
// latents, in θ order.
func (n *Net) planTokens(comps []family.Component) {
	l := n.layout
	n.nFrac, n.nShared = l.FractionLatents(), len(l.Shared)
	for i := range n.nFrac {
		n.tokens = append(n.tokens, token{Off: i, Size: 1, Kind: fractionToken, Index: i})
	}
	if n.nShared > 0 {
		n.tokens = append(n.tokens, token{Off: l.SharedOffset(), Size: n.nShared, Kind: sharedToken})
	}
	n.compTok = make([]int, len(comps))
	for k := range comps {
		n.compTok[k] = -1
		if b := l.Blocks[k]; b.Size > 0 {
			n.compTok[k] = len(n.tokens)
			n.tokens = append(n.tokens, token{Off: b.Offset, Size: b.Size, Kind: componentToken, Index: k})
		}
	}
	for _, t := range n.tokens {
		n.dPad = max(n.dPad, t.Size)
	}
}

// build creates every parameter in a fixed order. Embedding tables
// (identities, positions, mask bits, Fourier projections) are N(0, 1), so
// each summand of a token has unit scale; input maps use LeCun
// (variance-scaling 1) initialisation; decoders of parameter values are
// zero, so at initialisation D(θ_σ; σ) = c_skip·θ_σ.
func (n *Net) build(comps []family.Component) {
	c, s := n.cfg, n.store
	d := c.ModelDim
	vs1 := engine.VarianceScaling(1)
	z := engine.Zeros

	enc := s.Scope("enc")
	n.emb.build(enc, d)
	n.enc = make([]block, c.EncoderLayers)
	for i := range n.enc {
		n.enc[i] = newBlock(enc.Subf("layer%d", i), c, c.EncoderLayers, false, 0)
	}
	n.encLNg, n.encLNb = enc.New("ln.g", engine.Ones, d), enc.New("ln.b", z, d)

	tok := s.Scope("tok")
	n.id = tok.New("id", engine.Normal(1), n.c, d)
	n.bit = tok.New("bit", engine.Normal(1), 3, d)
	n.mcW, n.mcB = tok.New("mask.w", vs1, d, d/2), tok.New("mask.b", z, d/2)
	n.mStart = tok.New("mask.start", engine.Normal(1), 1, d/2)
	if n.nFrac > 0 {
		n.fracID = tok.New("frac.id", engine.Normal(1), n.nFrac, d)
		n.fracEnc = tok.New("frac.enc", vs1, 1, d)
		n.fracDec, n.fracDecB = tok.New("frac.dec.w", z, d, 1), tok.New("frac.dec.b", z, 1)
	}
	if n.nShared > 0 {
		n.sharedID = tok.New("shared.id", engine.Normal(1), 1, d)
		n.sharedEnc = tok.New("shared.enc", vs1, n.nShared, d)
		n.sharedDec, n.sharedDcB = tok.New("shared.dec.w", z, d, n.nShared), tok.New("shared.dec.b", z, n.nShared)
	}
	for k, comp := range comps {
		if comp.Latent == 0 {
			continue
		}
		cs := tok.Subf("comp%d", k)
		n.compEnc = append(n.compEnc, cs.New("enc", vs1, comp.Latent, d))
		n.compDec = append(n.compDec, cs.New("dec.w", z, d, comp.Latent))
		n.compDecB = append(n.compDecB, cs.New("dec.b", z, comp.Latent))
	}

	m := s.Scope("mdec")
	n.mdec = newDecoder(m, c, c.MaskLayers, c.LambdaEmbed)
	if n.cat != nil {
		// Zero weights: at initialisation q(M | x, λ) is the prior.
		k := len(n.cat.masks)
		n.catW, n.catB = m.New("cat.w", z, n.c*d, k), m.New("cat.b", z, k)
	} else {
		n.mHeadW, n.mHeadB = m.New("head.w", vs1, d, 1), m.New("head.b", z, 1)
	}

	n.pdec = newDecoder(s.Scope("pdec"), c, c.ParamLayers, c.NoiseEmbed)
}

// Params returns the store holding every learnable tensor.
func (n *Net) Params() *engine.ParamStore { return n.store }

// Config returns the network's configuration.
func (n *Net) Config() Config { return n.cfg }

// Family returns the family the network was built for.
func (n *Net) Family() family.Family { return n.fam }

// NumParamTokens is the length of the parameter decoder's token sequence.
func (n *Net) NumParamTokens() int { return len(n.tokens) }
