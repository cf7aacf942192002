package network

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/kernels"
)

// sampleRows is the number of masks SampleMasks decodes at once.
const sampleRows = 256

// rowsPerObs checks that b query rows can be split evenly over the
// encoder's observations and returns how many rows each observation gets.
func rowsPerObs(enc *engine.Tensor, b int) (int, error) {
	if enc.Rank() != 3 {
		return 0, fmt.Errorf("network: encoder tokens must be [B, T, D], got %v", enc.Shape)
	}
	be := enc.Shape[0]
	if be == 0 || b == 0 || b%be != 0 {
		return 0, fmt.Errorf("network: %d rows cannot be split evenly over %d encoded observations", b, be)
	}
	return b / be, nil
}

// MaskLogits returns the model decoder's logits [B, C] for the given masks
// under teacher forcing: logit i is the log-odds of M_i given M_{<i}, x and
// λ, so one pass scores every mask exactly (see MaskLogProb). enc holds Be
// encoded observations and len(masks) = B must be a multiple of Be: rows
// s·B/Be … (s+1)·B/Be − 1 belong to observation s.
func (n *Net) MaskLogits(g *engine.Graph, enc *engine.Tensor, lambda float64, masks [][]bool) (*engine.Tensor, error) {
	if n.cat != nil {
		return nil, fmt.Errorf("network: MaskLogits needs the autoregressive model decoder; use MaskLogProbs")
	}
	b := len(masks)
	if _, err := rowsPerObs(enc, b); err != nil {
		return nil, err
	}
	bits := make([]int32, b*n.c)
	for i, m := range masks {
		if len(m) != n.c {
			return nil, fmt.Errorf("network: mask %d has %d entries, want %d", i, len(m), n.c)
		}
		maskBitsIn(m, bits[i*n.c:(i+1)*n.c])
	}
	// One λ for all rows: its modulations are computed once and broadcast.
	lg := n.maskForward(g, enc, g.Input([]float32{float32(lambda)}, 1, 1), bits)
	return g.Reshape(lg, b, n.c), nil
}

// logSigmoid is log σ(x) = −log(1 + e^{−x}), computed stably.
func logSigmoid(x float64) float64 {
	if x >= 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// MaskLogProb returns log q(M | x, λ) = Σ_i log Bern(M_i; σ(logit_i)) for
// every row of logits [B, C] from MaskLogits and its mask, written into out
// (reused if it has room).
func MaskLogProb(logits *engine.Tensor, masks [][]bool, out []float64) []float64 {
	b, c := logits.Shape[0], logits.Shape[1]
	out = resize(out, b)
	for i := range b {
		lp := 0.0
		for k, l := range logits.Data[i*c : (i+1)*c] {
			if masks[i][k] {
				lp += logSigmoid(float64(l))
			} else {
				lp += logSigmoid(-float64(l))
			}
		}
		out[i] = lp
	}
	return out
}

// SampleMasks draws count masks from q(M | x, λ) for each of the Be
// observations encoded in enc [Be, T, D]: autoregressively with a KV cache
// per layer (O(C²) attention work per mask), or for the categorical decoder
// by inverse CDF from one pass per observation. It returns the masks
// (observation-major: masks[s·count + j]) and their log-probabilities
// log q(M | x, λ). Random numbers are drawn from rng in a fixed order.
func (n *Net) SampleMasks(enc *engine.Tensor, lambda float64, count int, rng *rand.Rand) ([][]bool, []float64, error) {
	if _, err := rowsPerObs(enc, enc.Shape[0]); err != nil || count <= 0 {
		return nil, nil, fmt.Errorf("network: sampling %d masks from encoder tokens %v", count, enc.Shape)
	}
	be := enc.Shape[0]
	masks := make([][]bool, be*count)
	flat := make([]bool, be*count*n.c)
	for i := range masks {
		masks[i] = flat[i*n.c : (i+1)*n.c]
	}
	logq := make([]float64, be*count)
	if n.cat != nil {
		n.sampleCategorical(enc, lambda, count, rng, masks, logq)
		return masks, logq, nil
	}
	if count >= sampleRows {
		for s := range be {
			for lo := 0; lo < count; lo += sampleRows {
				hi := min(lo+sampleRows, count)
				r0 := s*count + lo
				n.sampleChunk(enc, s, s+1, hi-lo, lambda, rng, masks[r0:r0+hi-lo], logq[r0:r0+hi-lo], nil)
			}
		}
	} else {
		per := sampleRows / count
		for s := 0; s < be; s += per {
			e := min(s+per, be)
			n.sampleChunk(enc, s, e, count, lambda, rng, masks[s*count:e*count], logq[s*count:e*count], nil)
		}
	}
	return masks, logq, nil
}

// sampleChunk samples r masks for each of the observations [o0, o1) of enc
// into masks and logq (rows observation-major). If logits is non-nil it
// receives the logit of every row and position ([rows, C]).
//
// Prefix sharing: position i's logit depends only on the observation and
// the bits M_{<i}, so rows with equal prefixes compute identical logits.
// With one observation per chunk, the decoder therefore runs on the
// distinct prefixes ("groups") only: all rows start as one group, and
// after each position a group whose rows drew different bits splits in
// two. The first child keeps the group's cache row, the second is
// appended (copying the cached keys and values once per split). Rows draw
// their bits from rng in row order exactly as without sharing, so the
// masks do not depend on it. An untrained network (p ≈ ½ everywhere)
// decodes about half as many tokens as 1000 independent rows need; a
// trained, concentrated q(M|x,λ) far fewer. With several observations per
// chunk (few masks each), every row is its own group, because the
// cross-attention lays out equally many query rows per observation.
func (n *Net) sampleChunk(enc *engine.Tensor, o0, o1, r int, lambda float64, rng *rand.Rand, masks [][]bool, logq []float64, logits []float32) {
	c, cfg := n.c, n.cfg
	tk, d, w := enc.Shape[1], enc.Shape[2], cfg.Heads*cfg.HeadDim
	rows := (o1 - o0) * r

	st := n.samplerFor(rows)
	defer n.samplers.Put(st)

	// Everything that does not depend on the decoded bits, once.
	g0 := st.g0
	g0.Reset()
	y := g0.Input(enc.Data[o0*tk*d:o1*tk*d], o1-o0, tk, d)
	mods := n.mdec.modulations(g0, g0.Input([]float32{float32(lambda)}, 1, 1)) // broadcast over rows
	kv := n.mdec.crossKV(g0, y)
	pos := n.maskTokens(g0)
	caches := st.caches

	// grp[row] is the row's group; gbit[k] the last bit of group k's prefix;
	// child[k] the second child of group k at this position (or < 0).
	grp, gbit, child := st.grp[:rows], st.gbit[:rows], st.child[:rows]
	clear(grp)
	ngrp := 1
	if o1-o0 > 1 {
		ngrp = rows
		for row := range grp {
			grp[row] = int32(row)
		}
	}

	g := st.g
	for i := range logq {
		logq[i] = 0
	}
	for i := range c {
		g.Reset()
		if i == 0 {
			for k := range ngrp {
				gbit[k] = 2
			}
		}
		for l := range caches {
			caches[l].B = ngrp
		}
		x := g.Add(g.Embedding(n.bit, gbit[:ngrp], ngrp, 1), g.Slice(pos, 0, i, i+1))
		for l := range n.mdec.blocks {
			b, m := &n.mdec.blocks[l], mods[4*l:4*l+4]
			h := modulate(g, x, b.ln1g, b.ln1b, m[0], m[1])
			qkv := g.Linear(h, b.wqkv, b.bqkv)
			caches[l].Append(qkv, w, qkv, 2*w)
			x = g.LinearResidual(x, g.Attend(caches[l], qkv, 0), b.wo, b.bo)
			x = b.crossResidual(g, cfg.Heads, x, kv[l], nil)
			x = b.mlpResidual(g, x, m)
		}
		lg := g.Linear(g.LayerNorm(x, n.mdec.lng, n.mdec.lnb), n.mHeadW, n.mHeadB)
		// Draw every row's bit in row order; the first bit drawn in a group
		// stays with it, the other one (if drawn) opens a new group.
		for k := range ngrp {
			child[k] = -1
		}
		for row := range rows {
			k := grp[row]
			v := lg.Data[k]
			l := float64(v)
			on := rng.Float64() < 1/(1+math.Exp(-l))
			masks[row][i] = on
			if on {
				logq[row] += logSigmoid(l)
			} else {
				logq[row] += logSigmoid(-l)
			}
			if logits != nil {
				logits[row*c+i] = v
			}
			bit := int32(0)
			if on {
				bit = 1
			}
			if i == c-1 {
				continue
			}
			switch {
			case child[k] == -1: // first row of k: its bit stays with k
				child[k], gbit[k] = -2, bit
			case bit == gbit[k]:
			default: // the other bit: k splits
				if child[k] < 0 {
					child[k], gbit[ngrp] = int32(ngrp), bit
					for _, kc := range caches {
						copyCacheRow(kc, int(k), ngrp)
					}
					ngrp++
				}
				grp[row] = child[k]
			}
		}
	}
}

// samplerState is the reusable working memory of sampleChunk.
type samplerState struct {
	g0, g            *engine.Graph
	caches           []*engine.KVCache
	grp, gbit, child []int32
}

// samplerFor returns a recycled (or new) sampler state for rows rows with
// empty KV caches.
func (n *Net) samplerFor(rows int) *samplerState {
	cfg := n.cfg
	w := cfg.Heads * cfg.HeadDim
	st, _ := n.samplers.Get().(*samplerState)
	if st == nil {
		st = &samplerState{g0: engine.NewInferenceGraph(), g: engine.NewInferenceGraph()}
	}
	if len(st.grp) < rows {
		st.grp, st.gbit, st.child = make([]int32, rows), make([]int32, rows), make([]int32, rows)
		st.caches = nil
	}
	if st.caches == nil {
		st.caches = make([]*engine.KVCache, len(n.mdec.blocks))
		for l := range st.caches {
			st.caches[l] = engine.NewKVCache(len(st.grp), n.c, cfg.Heads, w)
		}
	}
	for _, kc := range st.caches {
		kc.Reset()
		kc.B = rows
	}
	return st
}

// copyCacheRow copies the cached keys and values of batch row from to row
// to (rows are [Cap, Width] blocks, filled up to Len).
func copyCacheRow(kc *engine.KVCache, from, to int) {
	n, a, b := kc.Len*kc.Width, from*kc.Cap*kc.Width, to*kc.Cap*kc.Width
	copy(kc.K[b:b+n], kc.K[a:a+n])
	copy(kc.V[b:b+n], kc.V[a:a+n])
}

// Denoise returns the EDM denoiser D(θ_σ; σ) [B, DMax] for the noisy
// latents thetaSigma [B, DMax] under masks (len B) at noise levels sigma
// (length 1, shared, or B):
//
//	D = c_skip(σ)·θ_σ + c_out(σ)·F(c_in(σ)·θ_σ; c_noise(σ), M, x)   on active dimensions,
//	D = θ_σ                                                        on inactive ones,
//
// so the probability-flow drift (θ_σ − D)/σ vanishes on inactive
// dimensions. enc holds Be encoded observations, B a multiple of Be (rows
// grouped by observation as in MaskLogits). If thetaSigma requires a
// gradient (g.Variable) the result is differentiable with respect to it,
// for vector–Jacobian products (g.BackwardFrom).
func (n *Net) Denoise(g *engine.Graph, enc *engine.Tensor, masks [][]bool, thetaSigma *engine.Tensor, sigma []float64) (*engine.Tensor, error) {
	dm, t := n.dmax, len(n.tokens)
	if thetaSigma.Rank() != 2 || thetaSigma.Shape[1] != dm || thetaSigma.Shape[0] != len(masks) {
		return nil, fmt.Errorf("network: Denoise of θ_σ %v with %d masks, want [%d, %d]", thetaSigma.Shape, len(masks), len(masks), dm)
	}
	b := len(masks)
	if _, err := rowsPerObs(enc, b); err != nil {
		return nil, err
	}
	if len(sigma) != 1 && len(sigma) != b {
		return nil, fmt.Errorf("network: Denoise with %d noise levels for %d rows", len(sigma), b)
	}
	cin := make([]float32, b)
	// One noise level for all rows (the solvers' case): c_noise is passed
	// as [1, 1], so the AdaLN modulations are computed once and broadcast.
	cnoise := make([]float32, len(sigma))
	coefA := make([]float32, b*dm)
	coefB := make([]float32, b*dm)
	tokActive := make([]bool, b*t)
	active := make([]bool, dm)
	for i, m := range masks {
		if len(m) != n.c {
			return nil, fmt.Errorf("network: mask %d has %d entries, want %d", i, len(m), n.c)
		}
		s := sigma[0]
		if len(sigma) == b {
			s = sigma[i]
		}
		if !(s > 0) {
			return nil, fmt.Errorf("network: Denoise at noise level σ = %v (must be positive)", s)
		}
		cin[i] = float32(CIn(s))
		if i < len(cnoise) {
			cnoise[i] = float32(CNoise(s))
		}
		n.layout.Active(m, active)
		for j, a := range active {
			if a {
				coefA[i*dm+j], coefB[i*dm+j] = float32(CSkip(s)), float32(COut(s))
			} else {
				coefA[i*dm+j], coefB[i*dm+j] = 1, 0
			}
		}
		n.tokenActivity(m, active, tokActive[i*t:(i+1)*t])
	}
	mask := engine.ActivityMask(nil, tokActive, b, t)
	thIn := g.Mul(thetaSigma, g.Input(cin, b, 1))
	f := n.paramForward(g, enc, thIn, g.Input(cnoise, len(cnoise), 1), mask)
	return g.Add(g.Mul(thetaSigma, g.Input(coefA, b, dm)), g.Mul(f, g.Input(coefB, b, dm))), nil
}

// DenoiseMasked is Denoise for B rows that share one mask, computed on the
// mask's active parameter tokens only: the inactive tokens, which nothing
// attends to (engine.ActivityMask), are left out of the transformer
// instead of being carried along. rowObs[i] is row i's observation in enc
// (non-decreasing), so rows need not come in equal groups per observation.
// The result equals Denoise's up to float32 summation order. Every row's
// result is the same bit for bit whatever the other rows of the call, their
// number, the row chunks and GOMAXPROCS: each kernel computes a row (the
// attention: a query) with the same arithmetic wherever it sits
// (TestDenoiseMaskedGroupingInvariance). It is an inference path:
// thetaSigma must not require a gradient.
//
// cross, if non-nil, holds the parameter decoder's cross-attention keys
// and values of enc from ParamCross; a sampler that evaluates the same
// observations at many noise levels computes them once instead of on
// every call.
func (n *Net) DenoiseMasked(g *engine.Graph, enc *engine.Tensor, cross *ParamCross, mask []bool, rowObs []int, thetaSigma *engine.Tensor, sigma float64) (*engine.Tensor, error) {
	dm, t := n.dmax, len(n.tokens)
	b := len(rowObs)
	if thetaSigma.Rank() != 2 || thetaSigma.Shape[1] != dm || thetaSigma.Shape[0] != b {
		return nil, fmt.Errorf("network: DenoiseMasked of θ_σ %v for %d rows, want [%d, %d]", thetaSigma.Shape, b, b, dm)
	}
	if len(mask) != n.c {
		return nil, fmt.Errorf("network: mask has %d entries, want %d", len(mask), n.c)
	}
	if !(sigma > 0) {
		return nil, fmt.Errorf("network: DenoiseMasked at noise level σ = %v (must be positive)", sigma)
	}
	if enc.Rank() != 3 {
		return nil, fmt.Errorf("network: encoder tokens %v, want [Be, Tk, D]", enc.Shape)
	}
	var segs []engine.Segment
	for i, o := range rowObs {
		if o < 0 || o >= enc.Shape[0] || (i > 0 && o < rowObs[i-1]) {
			return nil, fmt.Errorf("network: row %d has observation %d (of %d; must be non-decreasing)", i, o, enc.Shape[0])
		}
		if i > 0 && o == rowObs[i-1] {
			segs[len(segs)-1].Rows++
			continue
		}
		segs = append(segs, engine.Segment{Row: i, Rows: 1, Obs: o})
	}
	active := make([]bool, dm)
	n.layout.Active(mask, active)
	tokActive := make([]bool, t)
	n.tokenActivity(mask, active, tokActive)
	sub := make([]int, 0, t)
	for ti, a := range tokActive {
		if a {
			sub = append(sub, ti)
		}
	}
	coefA := make([]float32, dm)
	coefB := make([]float32, dm)
	for j, a := range active {
		if a {
			coefA[j], coefB[j] = float32(CSkip(sigma)), float32(COut(sigma))
		} else {
			coefA[j], coefB[j] = 1, 0
		}
	}
	if len(sub) == 0 { // no parameters: D = θ_σ
		return g.Mul(thetaSigma, g.Input(coefA, 1, dm)), nil
	}
	var kv []*engine.Tensor
	var tw tokenTables
	if cross != nil {
		if cross.enc != enc {
			return nil, fmt.Errorf("network: DenoiseMasked with cross-attention keys of other encoder tokens")
		}
		kv, tw = cross.kv, cross.tables(n, sub)
	} else {
		kv, tw = n.pdec.crossKV(g, enc), n.subsetWeights(g, sub)
	}
	mods := n.pdec.modulations(g, g.Input([]float32{float32(CNoise(sigma))}, 1, 1))
	cin := float32(CIn(sigma))
	nch := maskedChunks(b, len(sub))
	if nch == 1 {
		f := n.paramTokens(g, tw, mods, kv, g.Scale(thetaSigma, cin), engine.Mask{}, sub, segs)
		return g.Add(g.Mul(thetaSigma, g.Input(coefA, 1, dm)), g.Mul(f, g.Input(coefB, 1, dm))), nil
	}
	// Row chunks run whole on one core each (their kernels inline), see
	// maskedChunkTokens.
	out := g.Zeros(b, dm)
	kernels.ParallelForGrain(nch, 1, func(lo, hi int) {
		gw, _ := n.chunkGraphs.Get().(*engine.Graph)
		if gw == nil {
			gw = engine.NewInferenceGraph()
		}
		for c := lo; c < hi; c++ {
			r0, r1 := c*b/nch, (c+1)*b/nch
			gw.Reset()
			th := thetaSigma.Data[r0*dm : r1*dm]
			f := n.paramTokens(gw, tw, mods, kv, gw.Scale(gw.Input(th, r1-r0, dm), cin), engine.Mask{}, sub, chunkSegments(segs, r0, r1))
			dst := out.Data[r0*dm : r1*dm]
			for i := range r1 - r0 {
				for j := range dm {
					k := i*dm + j
					// Explicit conversions keep the two products rounded
					// (no fused multiply-add), as in the graph's Mul/Add.
					dst[k] = float32(th[k]*coefA[j]) + float32(f.Data[k]*coefB[j])
				}
			}
		}
		n.chunkGraphs.Put(gw)
	})
	return out, nil
}

// maskedChunkTokens is the number of tokens (rows × active parameter
// tokens) per row chunk of DenoiseMasked. A chunk runs the whole parameter
// decoder on one core, so its activations (the MLP's hidden layer is
// 1 KB per token at D = 64) stay in that core's L2 cache instead of making
// a round trip through memory between kernels, and the cores synchronise
// once per chunk instead of once per kernel (dozens per layer). At least
// 512 tokens keep the product's tall packed kernel (m ≥ 512).
const maskedChunkTokens = 512

// maskedChunks returns the number of row chunks for b rows of t tokens:
// 1 below two chunks' worth, else about maskedChunkTokens tokens each (on
// one core too: the chunks then run in turn, for the cache), rounded up to
// a multiple of GOMAXPROCS so that equal chunks end together on all cores
// (an odd count left one core to finish the last chunk alone). The chunks
// change the speed only, not the bits of any row (see DenoiseMasked).
func maskedChunks(b, t int) int {
	if b*t < 2*maskedChunkTokens {
		return 1
	}
	p := runtime.GOMAXPROCS(0)
	n := max(1, b*t/maskedChunkTokens)
	return min(b, (n+p-1)/p*p)
}

// chunkSegments returns the segments of rows [r0, r1) of segs, renumbered
// from 0.
func chunkSegments(segs []engine.Segment, r0, r1 int) []engine.Segment {
	var out []engine.Segment
	for _, s := range segs {
		lo, hi := max(s.Row, r0), min(s.Row+s.Rows, r1)
		if lo < hi {
			out = append(out, engine.Segment{Row: lo - r0, Rows: hi - lo, Obs: s.Obs})
		}
	}
	return out
}

// ParamCross holds the parameter decoder's cross-attention keys and values
// of a set of encoder tokens (ParamCrossKV).
type ParamCross struct {
	enc *engine.Tensor
	kv  []*engine.Tensor

	// The token weights of the masks' token subsets, assembled on first
	// use on a graph of their own (DenoiseMasked re-assembled them on
	// every call).
	mu  sync.Mutex
	g   *engine.Graph
	tok map[string]tokenTables // by subsetKey
}

// ParamCrossKV projects encoder tokens enc [Be, Tk, D] to the keys and
// values of every parameter-decoder block, on g; the result stays valid as
// long as g is not reset and the network's parameters do not change.
func (n *Net) ParamCrossKV(g *engine.Graph, enc *engine.Tensor) *ParamCross {
	return &ParamCross{enc: enc, kv: n.pdec.crossKV(g, enc)}
}

// subsetKey is a token subset as a bit set in a string: any number of
// tokens (symbolic-k100 has 108, more than a uint64 mask holds).
func subsetKey(sub []int) string {
	n := 0
	for _, ti := range sub {
		n = max(n, ti/8+1)
	}
	b := make([]byte, n)
	for _, ti := range sub {
		b[ti/8] |= 1 << uint(ti%8)
	}
	return string(b)
}

// tables returns the token weights of the subset sub, cached.
func (c *ParamCross) tables(n *Net, sub []int) tokenTables {
	key := subsetKey(sub)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tw, ok := c.tok[key]; ok {
		return tw
	}
	if c.g == nil {
		c.g, c.tok = engine.NewInferenceGraph(), map[string]tokenTables{}
	}
	tw := n.subsetWeights(c.g, sub)
	c.tok[key] = tw
	return tw
}
