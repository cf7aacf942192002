package network

import "github.com/prismsbi/prism/engine"

// gatherIdx holds the index tables that move parameter values between the
// flat latent layout [B, DMax] and the token layout, for one batch size B.
// The per-token linear maps run as one batched product over tokens, so the
// token axis leads there: values are gathered into [T, B, dPad] (slots past
// a token's size read a zero), encoded to [T, B, D], transposed to
// [B, T, D] for the transformer, transposed back and decoded to
// [T, B, dPad], and gathered into [B, DMax]. Every move is an Embedding
// (gather) whose backward scatter-adds, so gradients reach θ_σ exactly.
type gatherIdx struct {
	in   []int32 // [T, B, dPad] → row of the [B·DMax + 1, 1] value table
	toBT []int32 // [B, T] → row of the [T·B, D] token table
	toTB []int32 // [T, B] → row of the [B·T, D] token table
	out  []int32 // [B, DMax] → row of the [T·B·dPad, 1] output table
}

// gatherKey identifies index tables: batch size and token subset (bit i
// set: token i present; 0 means all tokens).
type gatherKey struct {
	b   int
	sub uint64
}

// gatherFor returns the index tables for batch size b over all tokens
// (cached).
func (n *Net) gatherFor(b int) *gatherIdx { return n.gatherSubset(b, nil) }

// gatherSubset returns the index tables for batch size b over the tokens
// listed in sub (increasing token indices; nil for all tokens), cached.
// Latent dimensions of tokens outside sub read the zero row of the output
// table (index T'·B·dPad, which the caller appends).
func (n *Net) gatherSubset(b int, sub []int) *gatherIdx {
	key := gatherKey{b: b}
	for _, ti := range sub {
		key.sub |= 1 << uint(ti)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if gi, ok := n.gathers[key]; ok {
		return gi
	}
	if sub == nil {
		sub = make([]int, len(n.tokens))
		for i := range sub {
			sub[i] = i
		}
	}
	t, dp, dm := len(sub), n.dPad, n.dmax
	gi := &gatherIdx{
		in:   make([]int32, t*b*dp),
		toBT: make([]int32, b*t),
		toTB: make([]int32, t*b),
		out:  make([]int32, b*dm),
	}
	for i := range gi.out {
		gi.out[i] = int32(t * b * dp) // the zero row
	}
	for ti, tki := range sub {
		tk := n.tokens[tki]
		for s := range b {
			for j := range dp {
				src := b * dm // the zero row
				if j < tk.Size {
					src = s*dm + tk.Off + j
				}
				gi.in[(ti*b+s)*dp+j] = int32(src)
			}
			gi.toBT[s*t+ti] = int32(ti*b + s)
			gi.toTB[ti*b+s] = int32(s*t + ti)
			for j := range tk.Size {
				gi.out[s*dm+tk.Off+j] = int32((ti*b+s)*dp + j)
			}
		}
	}
	if len(n.gathers) >= 32 { // bound the cache when callers vary the batch size
		clear(n.gathers)
	}
	n.gathers[key] = gi
	return gi
}

// padTo appends zeros to x along axis until it has size to there.
func padTo(g *engine.Graph, x *engine.Tensor, axis, to int) *engine.Tensor {
	if x.Shape[axis] == to {
		return x
	}
	shape := append([]int(nil), x.Shape...)
	shape[axis] = to - x.Shape[axis]
	return g.Concat(axis, x, g.Zeros(shape...))
}

// tokenWeights assembles, for the current parameters, the per-token
// identities [T, 1, D], value encoders [T, dPad, D], decoders [T, D, dPad]
// and decoder biases [T, 1, dPad] (zero-padded; fraction tokens share one
// encoder and decoder).
func (n *Net) tokenWeights(g *engine.Graph) (ids, enc, dec, decB *engine.Tensor) {
	d, dp, t := n.cfg.ModelDim, n.dPad, len(n.tokens)
	idParts := make([]*engine.Tensor, 0, 3)
	encs := make([]*engine.Tensor, 0, t)
	decs := make([]*engine.Tensor, 0, t)
	bs := make([]*engine.Tensor, 0, t)
	if n.nFrac > 0 {
		idParts = append(idParts, n.fracID)
		e := padTo(g, g.Reshape(n.fracEnc, 1, 1, d), 1, dp)
		w := padTo(g, g.Reshape(n.fracDec, 1, d, 1), 2, dp)
		b := padTo(g, g.Reshape(n.fracDecB, 1, 1, 1), 2, dp)
		for range n.nFrac {
			encs, decs, bs = append(encs, e), append(decs, w), append(bs, b)
		}
	}
	if n.nShared > 0 {
		idParts = append(idParts, n.sharedID)
		encs = append(encs, padTo(g, g.Reshape(n.sharedEnc, 1, n.nShared, d), 1, dp))
		decs = append(decs, padTo(g, g.Reshape(n.sharedDec, 1, d, n.nShared), 2, dp))
		bs = append(bs, padTo(g, g.Reshape(n.sharedDcB, 1, 1, n.nShared), 2, dp))
	}
	if len(n.compEnc) > 0 {
		idx := make([]int32, 0, len(n.compEnc))
		for _, tk := range n.tokens {
			if tk.Kind == componentToken {
				idx = append(idx, int32(tk.Index))
			}
		}
		idParts = append(idParts, g.Embedding(n.id, idx, len(idx)))
		for i, w := range n.compEnc {
			dk := w.Shape[0]
			encs = append(encs, padTo(g, g.Reshape(w, 1, dk, d), 1, dp))
			decs = append(decs, padTo(g, g.Reshape(n.compDec[i], 1, d, dk), 2, dp))
			bs = append(bs, padTo(g, g.Reshape(n.compDecB[i], 1, 1, dk), 2, dp))
		}
	}
	ids = idParts[0]
	if len(idParts) > 1 {
		ids = g.Concat(0, idParts...)
	}
	return g.Reshape(ids, t, 1, d), g.Concat(0, encs...), g.Concat(0, decs...), g.Concat(0, bs...)
}

// paramForward is the parameter decoder's network F: it tokenizes the
// preconditioned values thIn = c_in·θ_σ [B, DMax], runs the diffusion
// transformer under the block attention mask with AdaLN on the Fourier
// embedding of cNoise [B, 1] (or [1, 1] for one noise level shared by all
// rows) and cross-attention to enc [Be, Tk, D]
// (B a multiple of Be), and decodes every token back to [B, DMax].
func (n *Net) paramForward(g *engine.Graph, enc, thIn, cNoise *engine.Tensor, mask engine.Mask) *engine.Tensor {
	return n.paramForwardTokens(g, enc, nil, thIn, cNoise, mask, nil, nil)
}

// paramForwardTokens is paramForward over the token subset sub (nil: all
// tokens; outputs of the other tokens' dimensions are 0) with the rows'
// observations given by segs (nil: B a multiple of Be in equal groups) and
// the cross-attention keys and values kv of enc precomputed (nil: computed
// here).
func (n *Net) paramForwardTokens(g *engine.Graph, enc *engine.Tensor, kv []*engine.Tensor, thIn, cNoise *engine.Tensor, mask engine.Mask, sub []int, segs []engine.Segment) *engine.Tensor {
	if kv == nil {
		kv = n.pdec.crossKV(g, enc)
	}
	return n.paramTokens(g, n.subsetWeights(g, sub), n.pdec.modulations(g, cNoise), kv, thIn, mask, sub, segs)
}

// tokenTables are the per-token weights of a token subset (see
// tokenWeights): identities [T, 1, D], value encoders [T, dPad, D],
// decoders [T, D, dPad] and decoder biases [T, 1, dPad].
type tokenTables struct {
	ids, enc, dec, decB *engine.Tensor
}

// subsetWeights returns tokenWeights restricted to the tokens in sub (nil:
// all tokens), on g.
func (n *Net) subsetWeights(g *engine.Graph, sub []int) tokenTables {
	d, dp, t := n.cfg.ModelDim, n.dPad, len(n.tokens)
	ids, wEnc, wDec, bDec := n.tokenWeights(g)
	if sub != nil {
		idx := make([]int32, len(sub))
		for i, ti := range sub {
			idx[i] = int32(ti)
		}
		tt := len(sub)
		ids = g.Reshape(g.Embedding(g.Reshape(ids, t, d), idx, tt), tt, 1, d)
		wEnc = g.Reshape(g.Embedding(g.Reshape(wEnc, t, dp*d), idx, tt), tt, dp, d)
		wDec = g.Reshape(g.Embedding(g.Reshape(wDec, t, d*dp), idx, tt), tt, d, dp)
		bDec = g.Reshape(g.Embedding(g.Reshape(bDec, t, dp), idx, tt), tt, 1, dp)
	}
	return tokenTables{ids, wEnc, wDec, bDec}
}

// paramTokens is the parameter decoder on the preconditioned values thIn
// [B, DMax] over the token subset sub (nil: all) with the subset's token
// weights tw, the AdaLN modulations mods and the cross-attention keys and
// values kv; mask and segs as in paramForwardTokens. tw, mods and kv may
// live on other graphs (they are only read), so that callers can compute
// them once and evaluate many batches.
func (n *Net) paramTokens(g *engine.Graph, tw tokenTables, mods, kv []*engine.Tensor, thIn *engine.Tensor, mask engine.Mask, sub []int, segs []engine.Segment) *engine.Tensor {
	b, d, dp, dm := thIn.Shape[0], n.cfg.ModelDim, n.dPad, n.dmax
	t := tw.ids.Shape[0]
	gi := n.gatherSubset(b, sub)
	table := g.Concat(0, g.Reshape(thIn, b*dm, 1), g.Zeros(1, 1))
	vals := g.Reshape(g.Embedding(table, gi.in, t, b, dp), t, b, dp)
	tok := g.Add(g.MatMul(vals, tw.enc, false, false), tw.ids) // [T, B, D]
	x := g.Embedding(g.Reshape(tok, t*b, d), gi.toBT, b, t)
	h := n.pdec.decode(g, n.cfg.Heads, x, mods, kv, mask, segs)
	hT := g.Embedding(g.Reshape(h, b*t, d), gi.toTB, t, b)
	o := g.Add(g.MatMul(hT, tw.dec, false, false), tw.decB) // [T, B, dPad]
	flat := g.Reshape(o, t*b*dp, 1)
	if sub != nil {
		flat = g.Concat(0, flat, g.Zeros(1, 1))
	}
	return g.Reshape(g.Embedding(flat, gi.out, b, dm), b, dm)
}

// maskTokens returns the model decoder's position embeddings [C, D]:
// position i is [c_{i−1}, c_i] with c_j = Linear(D → D/2)(id_j) and a
// learned start vector in place of c_{−1} (the reference implementation's PPP tokens).
func (n *Net) maskTokens(g *engine.Graph) *engine.Tensor {
	cv := g.Linear(n.id, n.mcW, n.mcB)
	prev := n.mStart
	if n.c > 1 {
		prev = g.Concat(0, n.mStart, g.Slice(cv, 0, 0, n.c-1))
	}
	return g.Concat(-1, prev, cv)
}

// maskBitsIn writes the model decoder's bit-embedding indices for one mask
// into dst (length C): position 0 reads the start row (2), position i > 0
// the bit M_{i−1}. Position i therefore sees the identities of components
// ≤ i and the bits of components < i, never its own target.
func maskBitsIn(mask []bool, dst []int32) {
	dst[0] = 2
	for i := 1; i < len(dst); i++ {
		dst[i] = 0
		if mask[i-1] {
			dst[i] = 1
		}
	}
}

// maskForward returns the model decoder's logits [B, C, 1] for the masks
// encoded in bitsIn ([B, C], see maskBitsIn) under causal self-attention,
// AdaLN on the Fourier embedding of lam [B, 1] (or [1, 1], shared by all
// rows) and cross-attention to enc [Be, Tk, D].
func (n *Net) maskForward(g *engine.Graph, enc, lam *engine.Tensor, bitsIn []int32) *engine.Tensor {
	b := len(bitsIn) / n.c
	x := g.Add(g.Embedding(n.bit, bitsIn, b, n.c), n.maskTokens(g))
	mods := n.mdec.modulations(g, lam)
	kv := n.mdec.crossKV(g, enc)
	h := n.mdec.decode(g, n.cfg.Heads, x, mods, kv, n.causalMask, nil)
	return g.Linear(h, n.mHeadW, n.mHeadB)
}
