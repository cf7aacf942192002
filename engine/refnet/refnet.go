// Package refnet builds prism's reference network on the Go engine: the
// encoder, model decoder and parameter decoder of issue 2's benchmark, with
// the same architecture, shapes, parameter count, loss and optimiser step as
// the PyTorch twin in bench/torch_refnet.py. It exists to measure the engine
// (bench/engine_vs_torch.sh parses BenchmarkRefNetStep and
// BenchmarkRefNetInfer) and to serve later issues as a worked example of a
// whole PRISM-shaped network on engine and engine/optim.
//
// Architecture (defaults; see docs/refnet.md):
//
//	encoder        2 pre-norm blocks over 10 tokens of 10 values, learned positions, final LayerNorm
//	model decoder  4 blocks over 51 tokens (a start token + 50 mask bits): causal self-attention,
//	               cross-attention to the encoder, AdaLN on a 64-dim Fourier embedding of λ;
//	               LayerNorm + Linear(D, 1) head → 50 logits
//	param decoder  4 blocks over 50 tokens of 2 values: self-attention under the activity mask
//	               (a_i ∧ a_j) ∨ i = j, cross-attention, AdaLN on a Fourier embedding of c_noise;
//	               LayerNorm + zero-initialised Linear(D, 2) head
//	loss           (Σ BCE(logits, bits) + Σ active·(pred − target)²) / B
//	step           forward + backward + AGC(2.0) + RAdam(5e-4) + EMA(0.999) (engine/optim)
//
// Two fusions differ in form, not in function, from the PyTorch code: the
// first layers of all AdaLN conditioning MLPs of a decoder are one
// LinearGELU of width (2 per block)·(layers)·2D, and each AdaLN second layer
// is kept as two Linear maps (scale and shift) instead of one of width 2D
// that is split afterwards. Both keep the parameter count and, since AGC
// units are output columns, the optimiser's behaviour.
package refnet

import (
	"fmt"
	"math/rand/v2"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/optim"
)

// Config fixes the sizes of the reference network and its benchmark batch.
type Config struct {
	Dim      int // model width D
	Heads    int // attention heads (head width Dim/Heads)
	MLPRatio int // MLP hidden width = MLPRatio·Dim

	Batch      int // training batch
	InferBatch int // batch of the parameter decoder's inference benchmark

	EncLayers, EncTokens, EncIn int // encoder blocks, tokens, values per token

	ModelLayers int // model decoder blocks
	Components  int // mask bits; the model decoder runs over Components+1 tokens

	ParamLayers, ParamTokens, ParamDim int // parameter decoder blocks, tokens, values per token

	ActiveProb float64 // probability that a parameter token is active
}

// DefaultConfig returns the sizes of issue 2's reference network: D 64,
// 4 heads × 16, MLP 4×, batch 256, encoder 2 layers over 10 tokens of 10
// values, model decoder 4 layers over 51 tokens, parameter decoder 4 layers
// over 50 tokens of 2 values with about half of them inactive, inference
// batch 1000.
func DefaultConfig() Config {
	return Config{
		Dim: 64, Heads: 4, MLPRatio: 4,
		Batch: 256, InferBatch: 1000,
		EncLayers: 2, EncTokens: 10, EncIn: 10,
		ModelLayers: 4, Components: 50,
		ParamLayers: 4, ParamTokens: 50, ParamDim: 2,
		ActiveProb: 0.5,
	}
}

func (c Config) validate() error {
	switch {
	case c.Dim <= 0 || c.Heads <= 0 || c.Dim%c.Heads != 0:
		return fmt.Errorf("Dim %d must be a positive multiple of Heads %d", c.Dim, c.Heads)
	case c.Dim%2 != 0:
		return fmt.Errorf("Dim %d must be even (Fourier features)", c.Dim)
	case c.MLPRatio <= 0 || c.Batch <= 0 || c.InferBatch <= 0:
		return fmt.Errorf("MLPRatio %d, Batch %d and InferBatch %d must be positive", c.MLPRatio, c.Batch, c.InferBatch)
	case c.EncLayers < 0 || c.EncTokens <= 0 || c.EncIn <= 0:
		return fmt.Errorf("encoder sizes %d layers, %d tokens, %d values invalid", c.EncLayers, c.EncTokens, c.EncIn)
	case c.ModelLayers <= 0 || c.Components <= 0:
		return fmt.Errorf("model decoder sizes %d layers, %d components invalid", c.ModelLayers, c.Components)
	case c.ParamLayers <= 0 || c.ParamTokens <= 0 || c.ParamDim <= 0:
		return fmt.Errorf("parameter decoder sizes %d layers, %d tokens, %d values invalid", c.ParamLayers, c.ParamTokens, c.ParamDim)
	case !(c.ActiveProb >= 0 && c.ActiveProb <= 1):
		return fmt.Errorf("ActiveProb %v outside [0, 1]", c.ActiveProb)
	}
	return nil
}

// NumParams is the analytic parameter count of the network (1,040,131 for
// DefaultConfig, the figure PyTorch reports for bench/torch_refnet.py).
func (c Config) NumParams() int {
	d, w := c.Dim, c.MLPRatio*c.Dim
	lin := func(in, out int) int { return in*out + out }
	ln := 2 * d
	base := ln + lin(d, 3*d) + lin(d, d) + ln + lin(d, w) + lin(w, d) // self-attention block
	adaLN := lin(d, 2*d) + lin(2*d, 2*d)
	cross := ln + lin(d, d) + lin(d, 2*d) + lin(d, d)
	dec := base + 2*adaLN + cross
	fourier := d / 2
	n := lin(c.EncIn, d) + c.EncTokens*d + c.EncLayers*base + ln
	n += fourier + (c.Components+1)*d + 3*d + c.ModelLayers*dec + ln + lin(d, 1)
	n += fourier + c.ParamTokens*d + lin(c.ParamDim, d) + c.ParamLayers*dec + ln + lin(d, c.ParamDim)
	return n
}

// block holds the parameters of one pre-norm transformer block. Cross
// attention and AdaLN parameters are nil in encoder blocks.
type block struct {
	ln1g, ln1b, wqkv, bqkv, wo, bo *engine.Tensor
	ln2g, ln2b, wq, bq, wkv, bkv   *engine.Tensor // cross-attention
	wco, bco                       *engine.Tensor
	ln3g, ln3b, w1, b1, w2, b2     *engine.Tensor
	// AdaLN second layers (the first layers are batched per decoder):
	// scale and shift of the attention (1) and MLP (3) branches.
	ada1ws, ada1bs, ada1wc, ada1bc *engine.Tensor
	ada3ws, ada3bs, ada3wc, ada3bc *engine.Tensor
}

// decoder is the parameters of a conditioned decoder stack.
type decoder struct {
	fourier    *engine.Tensor // [D/2, 1] Gaussian-Fourier projection of the scalar condition
	ctxW, ctxB *engine.Tensor // [D, 2·layers·2D]: first layers of all AdaLN MLPs
	blocks     []block
	lng, lnb   *engine.Tensor
	headW      *engine.Tensor
	headB      *engine.Tensor

	mods []*engine.Tensor // AdaLN modulations of the current pass (scratch)
}

// Net is the reference network with its parameters, optimiser, training
// batch, inference batch and the graphs it runs on.
type Net struct {
	cfg   Config
	Store *engine.ParamStore
	Opt   *optim.Optimizer

	// Train is the fixed training batch Step trains on; Infer is the batch
	// of InferParamDecoder's benchmark (its encoder output is precomputed
	// on first use).
	Train, Infer *Batch

	encIn, encInB, encPos *engine.Tensor
	enc                   []block
	encLNg, encLNb        *engine.Tensor

	mID, mBit *engine.Tensor
	mdec      decoder
	causal    engine.Mask

	pID, pIn, pInB *engine.Tensor
	pdec           decoder

	g, ig *engine.Graph
}

// New builds the network for cfg with weights drawn from a PCG generator
// seeded with seed, the optimiser with optim.DefaultConfig (AGC 2.0, RAdam
// 5e-4, EMA 0.999), a training batch of cfg.Batch and an inference batch of
// cfg.InferBatch samples drawn from seed+1. Call Close when done.
func New(cfg Config, seed uint64) (*Net, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("refnet: %w", err)
	}
	n := &Net{cfg: cfg, Store: engine.NewParamStore(rand.New(rand.NewPCG(seed, 0x5eed)))}
	n.build()
	opt, err := optim.New(n.Store.OptimParams(), optim.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("refnet: optimiser: %w", err)
	}
	n.Opt = opt
	data := rand.New(rand.NewPCG(seed+1, 0xda7a))
	n.Train = NewBatch(cfg, cfg.Batch, data)
	n.Infer = NewBatch(cfg, cfg.InferBatch, data)
	n.g, n.ig = engine.NewGraph(), engine.NewInferenceGraph()
	n.causal = engine.CausalMask(cfg.Components + 1)
	return n, nil
}

// Config returns the network's configuration.
func (n *Net) Config() Config { return n.cfg }

// Close stops the optimiser's worker goroutines.
func (n *Net) Close() { n.Opt.Close() }

// build creates every parameter, in a fixed order. Kernels use truncated
// normal variance scaling (scale 1 for input embeddings, 2/layers inside
// the blocks as in the reference transformer); LayerNorm scales start at 1,
// biases at 0; AdaLN second layers and the parameter head start at 0 (so
// every AdaLN starts as the identity and the denoiser predicts 0); token
// identities and positions are N(0, 0.02²), the bit embedding and Fourier
// projections N(0, 1) (PyTorch's nn.Embedding and the Fourier-feature
// convention).
func (n *Net) build() {
	c, s := n.cfg, n.Store
	d := c.Dim
	vs1 := engine.VarianceScaling(1)

	enc := s.Scope("enc")
	n.encIn = enc.New("in.w", vs1, c.EncIn, d)
	n.encInB = enc.New("in.b", engine.Zeros, d)
	n.encPos = enc.New("pos", engine.Normal(0.02), c.EncTokens, d)
	n.enc = make([]block, c.EncLayers)
	for i := range n.enc {
		n.enc[i] = n.newBlock(enc.Subf("layer%d", i), c.EncLayers, false)
	}
	n.encLNg = enc.New("ln.g", engine.Ones, d)
	n.encLNb = enc.New("ln.b", engine.Zeros, d)

	m := s.Scope("mdec")
	n.mID = m.New("id", engine.Normal(0.02), c.Components+1, d)
	n.mBit = m.New("bit", engine.Normal(1), 3, d)
	n.mdec = n.newDecoder(m, c.ModelLayers, 1, false)

	p := s.Scope("pdec")
	n.pID = p.New("id", engine.Normal(0.02), c.ParamTokens, d)
	n.pIn = p.New("in.w", vs1, c.ParamDim, d)
	n.pInB = p.New("in.b", engine.Zeros, d)
	n.pdec = n.newDecoder(p, c.ParamLayers, c.ParamDim, true)
}

// newDecoder creates a conditioned decoder stack with an output head of
// width out, zero-initialised if zeroHead (the denoiser) and variance
// scaled otherwise (the model decoder's logit, like PyTorch's default).
func (n *Net) newDecoder(sc engine.Scope, layers, out int, zeroHead bool) decoder {
	d := n.cfg.Dim
	dec := decoder{
		fourier: sc.New("fourier", engine.Normal(1), d/2, 1),
		ctxW:    sc.New("ctx.w", engine.VarianceScaling(1), d, 2*layers*2*d),
		ctxB:    sc.New("ctx.b", engine.Zeros, 2*layers*2*d),
		blocks:  make([]block, layers),
	}
	for i := range dec.blocks {
		dec.blocks[i] = n.newBlock(sc.Subf("layer%d", i), layers, true)
	}
	dec.lng = sc.New("ln.g", engine.Ones, d)
	dec.lnb = sc.New("ln.b", engine.Zeros, d)
	headInit := engine.VarianceScaling(1)
	if zeroHead {
		headInit = engine.Zeros
	}
	dec.headW = sc.New("head.w", headInit, d, out)
	dec.headB = sc.New("head.b", engine.Zeros, out)
	return dec
}

// newBlock creates one block; decoder blocks get cross-attention and AdaLN.
func (n *Net) newBlock(sc engine.Scope, layers int, cond bool) block {
	d, w := n.cfg.Dim, n.cfg.MLPRatio*n.cfg.Dim
	vs := engine.VarianceScaling(2 / float64(layers))
	z := engine.Zeros
	var b block
	b.ln1g, b.ln1b = sc.New("ln1.g", engine.Ones, d), sc.New("ln1.b", z, d)
	if cond {
		b.ada1ws, b.ada1bs = sc.New("ada1.ws", z, 2*d, d), sc.New("ada1.bs", z, d)
		b.ada1wc, b.ada1bc = sc.New("ada1.wc", z, 2*d, d), sc.New("ada1.bc", z, d)
	}
	b.wqkv, b.bqkv = sc.New("attn.wqkv", vs, d, 3*d), sc.New("attn.bqkv", z, 3*d)
	b.wo, b.bo = sc.New("attn.wo", vs, d, d), sc.New("attn.bo", z, d)
	if cond {
		b.ln2g, b.ln2b = sc.New("ln2.g", engine.Ones, d), sc.New("ln2.b", z, d)
		b.wq, b.bq = sc.New("cross.wq", vs, d, d), sc.New("cross.bq", z, d)
		b.wkv, b.bkv = sc.New("cross.wkv", vs, d, 2*d), sc.New("cross.bkv", z, 2*d)
		b.wco, b.bco = sc.New("cross.wo", vs, d, d), sc.New("cross.bo", z, d)
	}
	b.ln3g, b.ln3b = sc.New("ln3.g", engine.Ones, d), sc.New("ln3.b", z, d)
	if cond {
		b.ada3ws, b.ada3bs = sc.New("ada3.ws", z, 2*d, d), sc.New("ada3.bs", z, d)
		b.ada3wc, b.ada3bc = sc.New("ada3.wc", z, 2*d, d), sc.New("ada3.bc", z, d)
	}
	b.w1, b.b1 = sc.New("mlp.w1", vs, d, w), sc.New("mlp.b1", z, w)
	b.w2, b.b2 = sc.New("mlp.w2", vs, w, d), sc.New("mlp.b2", z, d)
	return b
}
