package refnet

import (
	"fmt"

	"github.com/prismsbi/prism/engine"
)

// Step runs one training step on the fixed training batch: forward pass,
// backward pass and the optimiser update (AGC, RAdam, EMA). It returns the
// loss before the update. After the first call it allocates (almost)
// nothing: the graph reuses its arena and the optimiser its state.
func (n *Net) Step() (float32, error) {
	g := n.g
	g.Reset()
	loss, _, _ := n.forward(g, n.Train)
	n.Store.ZeroGrad()
	g.Backward(loss)
	if err := n.Opt.Step(); err != nil {
		return loss.Item(), fmt.Errorf("refnet: optimiser step: %w", err)
	}
	return loss.Item(), nil
}

// Encode runs the encoder on b without a tape and stores its output in
// b.Encoded (reusing the slice), with the current weights.
func (n *Net) Encode(b *Batch) {
	g := n.ig
	g.Reset()
	y := n.encode(g, b)
	b.Encoded = append(b.Encoded[:0], y.Data...)
}

// InferParamDecoder runs the parameter decoder on b without a tape, the
// sampling-time pass of issue 2's inference benchmark. The encoder output
// is b.Encoded, computed with Encode on the first call if it is nil. The
// result [N, ParamTokens, ParamDim] is owned by the Net's inference graph
// and valid until the next call of InferParamDecoder or Encode.
func (n *Net) InferParamDecoder(b *Batch) *engine.Tensor {
	if b.Encoded == nil {
		n.Encode(b)
	}
	g := n.ig
	g.Reset()
	y := g.Input(b.Encoded, b.N, n.cfg.EncTokens, n.cfg.Dim)
	return n.paramDecoder(g, b, y)
}

// forward builds the whole network and the loss on g for batch b and
// returns the loss, the model decoder's logits [N, Components, 1] and the
// parameter decoder's prediction [N, ParamTokens, ParamDim].
func (n *Net) forward(g *engine.Graph, b *Batch) (loss, logits, pred *engine.Tensor) {
	c := n.cfg
	y := n.encode(g, b)
	logits = n.modelDecoder(g, b, y)
	pred = n.paramDecoder(g, b, y)
	bce := g.BCEWithLogits(logits, g.Input(b.Bits, b.N, c.Components, 1), nil)
	mse := g.MaskedSquaredError(pred, g.Input(b.Target, b.N, c.ParamTokens, c.ParamDim), g.Input(b.Weight, b.N, c.ParamTokens, c.ParamDim))
	loss = g.Scale(g.Add(bce, mse), 1/float32(b.N))
	return loss, logits, pred
}

// encode returns the encoder output [N, EncTokens, Dim].
func (n *Net) encode(g *engine.Graph, b *Batch) *engine.Tensor {
	c := n.cfg
	x := g.Input(b.EncIn, b.N, c.EncTokens, c.EncIn)
	h := g.Add(g.Linear(x, n.encIn, n.encInB), n.encPos)
	for i := range n.enc {
		h = n.blockForward(g, &n.enc[i], h, nil, nil, engine.Mask{})
	}
	return g.LayerNorm(h, n.encLNg, n.encLNb)
}

// modelDecoder returns the mask logits [N, Components, 1]: the head's output
// at the first Components of the Components+1 tokens (token i predicts bit
// i from the bits before it).
func (n *Net) modelDecoder(g *engine.Graph, b *Batch, y *engine.Tensor) *engine.Tensor {
	c := n.cfg
	t := c.Components + 1
	h := g.Add(g.Embedding(n.mBit, b.BitsIn, b.N, t), n.mID)
	mods := n.conditioning(g, &n.mdec, g.Input(b.Lambda, b.N, 1))
	for i := range n.mdec.blocks {
		h = n.blockForward(g, &n.mdec.blocks[i], h, y, mods[4*i:4*i+4], n.causal)
	}
	out := g.Linear(g.LayerNorm(h, n.mdec.lng, n.mdec.lnb), n.mdec.headW, n.mdec.headB)
	return g.Slice(out, 1, 0, c.Components)
}

// paramDecoder returns the denoiser output [N, ParamTokens, ParamDim].
func (n *Net) paramDecoder(g *engine.Graph, b *Batch, y *engine.Tensor) *engine.Tensor {
	c := n.cfg
	theta := g.Input(b.Theta, b.N, c.ParamTokens, c.ParamDim)
	h := g.Add(g.Linear(theta, n.pIn, n.pInB), n.pID)
	mods := n.conditioning(g, &n.pdec, g.Input(b.Noise, b.N, 1))
	for i := range n.pdec.blocks {
		h = n.blockForward(g, &n.pdec.blocks[i], h, y, mods[4*i:4*i+4], b.Allow)
	}
	return g.Linear(g.LayerNorm(h, n.pdec.lng, n.pdec.lnb), n.pdec.headW, n.pdec.headB)
}

// conditioning computes every AdaLN modulation of a decoder from the scalar
// condition u [N, 1]: Fourier features e [N, D], then one fused LinearGELU
// for the first layers of all 2·layers AdaLN MLPs, then per MLP the scale
// and shift maps. The result holds, per layer i, (s1, c1, s3, c3) at
// indices 4i…4i+3, each [N, D].
func (n *Net) conditioning(g *engine.Graph, dec *decoder, u *engine.Tensor) []*engine.Tensor {
	d := n.cfg.Dim
	e := g.FourierFeatures(u, dec.fourier, d)
	hid := g.LinearGELU(e, dec.ctxW, dec.ctxB) // [N, 2·layers·2D]
	mods := dec.mods[:0]                       // reused across passes: no allocation per step
	for i := range dec.blocks {
		blk := &dec.blocks[i]
		h1 := g.Slice(hid, -1, (2*i)*2*d, (2*i+1)*2*d)
		h3 := g.Slice(hid, -1, (2*i+1)*2*d, (2*i+2)*2*d)
		mods = append(mods,
			g.Linear(h1, blk.ada1ws, blk.ada1bs), g.Linear(h1, blk.ada1wc, blk.ada1bc),
			g.Linear(h3, blk.ada3ws, blk.ada3bs), g.Linear(h3, blk.ada3wc, blk.ada3bc))
	}
	dec.mods = mods
	return mods
}

// blockForward is one pre-norm block on x [N, T, D]:
//
//	x += Wo·SelfAttn(qkv(AdaLN(LN1(x))), mask)
//	x += Wco·CrossAttn(Wq·LN2(x), kv(y))          (decoders)
//	x += W2·GELU(W1·AdaLN(LN3(x)))
//
// mods holds (s1, c1, s3, c3) of the two AdaLNs, nil in the encoder; y is
// the encoder output for cross-attention, nil in the encoder.
func (n *Net) blockForward(g *engine.Graph, b *block, x, y *engine.Tensor, mods []*engine.Tensor, mask engine.Mask) *engine.Tensor {
	heads := n.cfg.Heads
	var h *engine.Tensor
	if mods != nil {
		h = g.LayerNormModulate(x, b.ln1g, b.ln1b, mods[0], mods[1])
	} else {
		h = g.LayerNorm(x, b.ln1g, b.ln1b)
	}
	a := g.SelfAttention(g.Linear(h, b.wqkv, b.bqkv), heads, mask)
	x = g.Add(x, g.Linear(a, b.wo, b.bo))
	if y != nil {
		q := g.Linear(g.LayerNorm(x, b.ln2g, b.ln2b), b.wq, b.bq)
		kv := g.Linear(y, b.wkv, b.bkv)
		x = g.Add(x, g.Linear(g.CrossAttention(q, kv, heads, engine.Mask{}), b.wco, b.bco))
	}
	if mods != nil {
		h = g.LayerNormModulate(x, b.ln3g, b.ln3b, mods[2], mods[3])
	} else {
		h = g.LayerNorm(x, b.ln3g, b.ln3b)
	}
	return g.Add(x, g.Linear(g.LinearGELU(h, b.w1, b.b1), b.w2, b.b2))
}
