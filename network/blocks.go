package network

import "github.com/prismsbi/prism/engine"

// block holds the parameters of one pre-norm transformer block
// (as in the authors' reference implementation):
//
//	x += Wo·SelfAttn(Wqkv·AdaLN₁(LN₁(x)), mask)
//	x += Wco·CrossAttn(Wq·LN₂(x), Wkv·y)            (decoders)
//	x += W₂·GELU(W₁·AdaLN₃(LN₃(x)))
//
// AdaLN h·(1+s)+c without gating; s and c come from the decoder's
// conditioning MLP. Encoder blocks have no cross-attention and no AdaLN.
type block struct {
	ln1g, ln1b, wqkv, bqkv, wo, bo *engine.Tensor
	ln2g, ln2b, wq, bq, wkv, bkv   *engine.Tensor
	wco, bco                       *engine.Tensor
	ln3g, ln3b, w1, b1, w2, b2     *engine.Tensor
	// second layers of the two AdaLN MLPs: scale (s) and shift (c) of the
	// attention (1) and MLP (3) branches, zero-initialised.
	a1ws, a1bs, a1wc, a1bc *engine.Tensor
	a3ws, a3bs, a3wc, a3bc *engine.Tensor
}

// newBlock creates one block under sc. Weights inside the block use the
// reference transformer's truncated-normal variance scaling with scale
// 2/layers; biases, AdaLN second layers start at zero, LayerNorm scales at
// one. cond adds cross-attention and AdaLN (decoder blocks); hid is the
// width of the AdaLN MLPs' hidden layer.
func newBlock(sc engine.Scope, c Config, layers int, cond bool, hid int) block {
	d, w, m := c.ModelDim, c.Heads*c.HeadDim, c.MLPWidth*c.ModelDim
	vs := engine.VarianceScaling(2 / float64(layers))
	z := engine.Zeros
	var b block
	b.ln1g, b.ln1b = sc.New("ln1.g", engine.Ones, d), sc.New("ln1.b", z, d)
	if cond {
		b.a1ws, b.a1bs = sc.New("ada1.ws", z, hid, d), sc.New("ada1.bs", z, d)
		b.a1wc, b.a1bc = sc.New("ada1.wc", z, hid, d), sc.New("ada1.bc", z, d)
	}
	b.wqkv, b.bqkv = sc.New("attn.wqkv", vs, d, 3*w), sc.New("attn.bqkv", z, 3*w)
	b.wo, b.bo = sc.New("attn.wo", vs, w, d), sc.New("attn.bo", z, d)
	if cond {
		b.ln2g, b.ln2b = sc.New("ln2.g", engine.Ones, d), sc.New("ln2.b", z, d)
		b.wq, b.bq = sc.New("cross.wq", vs, d, w), sc.New("cross.bq", z, w)
		b.wkv, b.bkv = sc.New("cross.wkv", vs, d, 2*w), sc.New("cross.bkv", z, 2*w)
		b.wco, b.bco = sc.New("cross.wo", vs, w, d), sc.New("cross.bo", z, d)
	}
	b.ln3g, b.ln3b = sc.New("ln3.g", engine.Ones, d), sc.New("ln3.b", z, d)
	if cond {
		b.a3ws, b.a3bs = sc.New("ada3.ws", z, hid, d), sc.New("ada3.bs", z, d)
		b.a3wc, b.a3bc = sc.New("ada3.wc", z, hid, d), sc.New("ada3.bc", z, d)
	}
	b.w1, b.b1 = sc.New("mlp.w1", vs, d, m), sc.New("mlp.b1", z, m)
	b.w2, b.b2 = sc.New("mlp.w2", vs, m, d), sc.New("mlp.b2", z, d)
	return b
}

// decoder is a conditioned transformer stack: Gaussian-Fourier embedding of
// a scalar condition u (λ or c_noise), the AdaLN MLPs (their first layers
// fused into one LinearGELU over all blocks), the blocks and a final
// LayerNorm.
type decoder struct {
	fourier    *engine.Tensor // [⌈E/2⌉, 1]
	embed, hid int            // E and the AdaLN hidden width max(E, 2D)
	ctxW, ctxB *engine.Tensor // [E, 2·layers·hid]
	blocks     []block
	lng, lnb   *engine.Tensor
}

func newDecoder(sc engine.Scope, c Config, layers, embed int) decoder {
	hid := max(embed, 2*c.ModelDim)
	dec := decoder{
		fourier: sc.New("fourier", engine.Normal(1), (embed+1)/2, 1),
		embed:   embed,
		hid:     hid,
		ctxW:    sc.New("ctx.w", engine.VarianceScaling(1), embed, 2*layers*hid),
		ctxB:    sc.New("ctx.b", engine.Zeros, 2*layers*hid),
		blocks:  make([]block, layers),
	}
	for i := range dec.blocks {
		dec.blocks[i] = newBlock(sc.Subf("layer%d", i), c, layers, true, hid)
	}
	dec.lng = sc.New("ln.g", engine.Ones, c.ModelDim)
	dec.lnb = sc.New("ln.b", engine.Zeros, c.ModelDim)
	return dec
}

// modulations computes every AdaLN (scale, shift) pair of the decoder from
// the condition u [B, 1]: per block i, (s₁, c₁, s₃, c₃) at 4i…4i+3, each
// [B, D]. In inference the condition is usually one value for every row
// (σ at a solver step, λ of a sampling call); pass it as u [1, 1] then:
// the [1, D] modulations are broadcast over all rows by modulate, instead
// of B identical evaluations of the conditioning MLPs.
func (dec *decoder) modulations(g *engine.Graph, u *engine.Tensor) []*engine.Tensor {
	e := g.FourierFeatures(u, dec.fourier, dec.embed)
	h := g.LinearGELU(e, dec.ctxW, dec.ctxB)
	mods := make([]*engine.Tensor, 0, 4*len(dec.blocks))
	for i := range dec.blocks {
		b := &dec.blocks[i]
		h1 := g.Slice(h, -1, 2*i*dec.hid, (2*i+1)*dec.hid)
		h3 := g.Slice(h, -1, (2*i+1)*dec.hid, (2*i+2)*dec.hid)
		mods = append(mods,
			g.Linear(h1, b.a1ws, b.a1bs), g.Linear(h1, b.a1wc, b.a1bc),
			g.Linear(h3, b.a3ws, b.a3bs), g.Linear(h3, b.a3wc, b.a3bc))
	}
	return mods
}

// crossKV projects the encoder tokens y [Be, Tk, D] to the fused keys and
// values [Be, Tk, 2W] of every block.
func (dec *decoder) crossKV(g *engine.Graph, y *engine.Tensor) []*engine.Tensor {
	kv := make([]*engine.Tensor, len(dec.blocks))
	for i := range dec.blocks {
		kv[i] = g.Linear(y, dec.blocks[i].wkv, dec.blocks[i].bkv)
	}
	return kv
}

// crossBlock is the number of queries per cross-attention block at least
// (see cross).
const crossBlock = 256

// cross runs cross-attention of the queries q [B, Tq, W] over kv
// [Be, Tk, 2W] where B = Be·r: rows s·r … s·r+r−1 belong to observation s.
// Queries attend independently, so the r query sets of one observation are
// laid side by side as query blocks of one observation (a copy-free
// reshape). A block holds r/k query sets, with k the largest divisor of r
// that leaves at least crossBlock queries per block, a multiple of 4 (the
// kernel treats queries in fours, and a different remainder would change
// the rounding of the last queries, so results stay bit-identical to one
// block per observation); each block gets its
// own copy of its observation's keys and values (k·Tk rows of 2W, small
// next to the queries).
//
// Lesson from the profile: the engine's attention kernel materialises a
// block's probabilities (queries × keys floats) in scratch memory that it
// allocates per call. With all 8000 queries of a 1000-row b3s Denoise in
// one block that is 3.6 MB per head: a malloc that page-faults on every
// call and a matrix that falls out of cache. Blocks of a few hundred
// queries keep it in L2.
//
// With segs non-nil, rows need not come in equal groups per observation:
// each segment's rows attend to its observation (inference only; see
// engine.CrossAttentionSegments).
func cross(g *engine.Graph, q, kv *engine.Tensor, heads int, segs []engine.Segment) *engine.Tensor {
	if segs != nil {
		return g.CrossAttentionSegments(q, kv, heads, segs)
	}
	b, tq, w := q.Shape[0], q.Shape[1], q.Shape[2]
	be, tk := kv.Shape[0], kv.Shape[1]
	if be == b {
		return g.CrossAttention(q, kv, heads, engine.Mask{})
	}
	r := b / be
	k := 1
	for j := r; j > 1; j-- {
		if r%j == 0 && (r/j)*tq >= crossBlock && (r/j)*tq%4 == 0 {
			k = j
			break
		}
	}
	if k > 1 {
		idx := make([]int32, be*k*tk)
		for s := range be {
			for j := range k {
				for t := range tk {
					idx[(s*k+j)*tk+t] = int32(s*tk + t)
				}
			}
		}
		kv = g.Embedding(g.Reshape(kv, be*tk, kv.Shape[2]), idx, be*k, tk)
	}
	a := g.CrossAttention(g.Reshape(q, be*k, (r/k)*tq, w), kv, heads, engine.Mask{})
	return g.Reshape(a, b, tq, w)
}

// modulate is AdaLN h·(1+s)+c of LN(x) for x [B, T, D] with s, c [B, D]
// (per row) or [1, D] (shared by every row). The shared case views x as
// one batch row of B·T tokens (a copy-free reshape), so every token reads
// the same modulation and the result equals the per-row one bit for bit.
func modulate(g *engine.Graph, x, gamma, beta, s, c *engine.Tensor) *engine.Tensor {
	b, t, d := x.Shape[0], x.Shape[1], x.Shape[2]
	if s.Shape[0] != 1 || b == 1 {
		return g.LayerNormModulate(x, gamma, beta, s, c)
	}
	h := g.LayerNormModulate(g.Reshape(x, 1, b*t, d), gamma, beta, s, c)
	return g.Reshape(h, b, t, d)
}

// forward is one block on x [B, T, D] under the self-attention mask; mods
// are (s₁, c₁, s₃, c₃) or nil (encoder); kv the block's cross-attention
// keys/values or nil (encoder).
func (b *block) forward(g *engine.Graph, heads int, x *engine.Tensor, mods []*engine.Tensor, kv *engine.Tensor, mask engine.Mask, segs []engine.Segment) *engine.Tensor {
	var h *engine.Tensor
	if mods != nil {
		h = modulate(g, x, b.ln1g, b.ln1b, mods[0], mods[1])
	} else {
		h = g.LayerNorm(x, b.ln1g, b.ln1b)
	}
	a := g.SelfAttention(g.Linear(h, b.wqkv, b.bqkv), heads, mask)
	x = g.LinearResidual(x, a, b.wo, b.bo)
	if kv != nil {
		x = b.crossResidual(g, heads, x, kv, segs)
	}
	return b.mlpResidual(g, x, mods)
}

// crossResidual is x + Wco·CrossAttn(Wq·LN₂(x), kv).
func (b *block) crossResidual(g *engine.Graph, heads int, x, kv *engine.Tensor, segs []engine.Segment) *engine.Tensor {
	q := g.Linear(g.LayerNorm(x, b.ln2g, b.ln2b), b.wq, b.bq)
	return g.LinearResidual(x, cross(g, q, kv, heads, segs), b.wco, b.bco)
}

// mlpResidual is x + W₂·GELU(W₁·AdaLN₃(LN₃(x))).
func (b *block) mlpResidual(g *engine.Graph, x *engine.Tensor, mods []*engine.Tensor) *engine.Tensor {
	var h *engine.Tensor
	if mods != nil {
		h = modulate(g, x, b.ln3g, b.ln3b, mods[2], mods[3])
	} else {
		h = g.LayerNorm(x, b.ln3g, b.ln3b)
	}
	return g.LinearResidual(x, g.LinearGELU(h, b.w1, b.b1), b.w2, b.b2)
}

// decode runs the decoder's blocks on x [B, T, D] with modulations mods,
// cross-attention keys/values kv and self-attention mask, and returns the
// final LayerNorm of the result; segs (nil for the usual equal groups of
// rows per observation) is passed to cross.
func (dec *decoder) decode(g *engine.Graph, heads int, x *engine.Tensor, mods, kv []*engine.Tensor, mask engine.Mask, segs []engine.Segment) *engine.Tensor {
	for i := range dec.blocks {
		x = dec.blocks[i].forward(g, heads, x, mods[4*i:4*i+4], kv[i], mask, segs)
	}
	return g.LayerNorm(x, dec.lng, dec.lnb)
}
