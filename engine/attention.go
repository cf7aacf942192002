package engine

import (
	"fmt"

	"github.com/prismsbi/prism/engine/kernels"
)

// Mask restricts attention: Allow[b·BatchStride + i·Tk + j] says whether
// query i of batch element b may attend key j; BatchStride 0 shares one
// [Tq, Tk] mask over the batch; a nil Allow allows everything. A query with
// no allowed key gets a zero output.
type Mask = kernels.Mask

// CausalMask returns the shared [t, t] mask in which query i attends keys
// 0..i.
func CausalMask(t int) Mask { return kernels.CausalMask(t) }

// ActivityMask returns the per-sample [B, T, T] token mask of the parameter
// decoder: with a = active[b·T:(b+1)·T], query i may attend key j iff
// (a_i ∧ a_j) ∨ i = j, so inactive tokens only attend to themselves and
// nothing attends to them (as in the reference implementation). dst is reused if it has
// room for B·T·T values.
func ActivityMask(dst []bool, active []bool, b, t int) Mask {
	if len(active) != b*t {
		panic(fmt.Sprintf("engine: ActivityMask with %d activity flags for B=%d, T=%d", len(active), b, t))
	}
	if cap(dst) < b*t*t {
		dst = make([]bool, b*t*t)
	}
	dst = dst[:b*t*t]
	for s := range b {
		a := active[s*t : (s+1)*t]
		m := dst[s*t*t : (s+1)*t*t]
		for i := range t {
			for j := range t {
				m[i*t+j] = (a[i] && a[j]) || i == j
			}
		}
	}
	return Mask{Allow: dst, BatchStride: t * t}
}

// KeyMask returns the per-sample [B, Tq, Tk] mask in which every query may
// attend exactly the keys with keyActive[b·Tk + j] set (padding masks for
// cross-attention). dst is reused if it has room.
func KeyMask(dst []bool, keyActive []bool, b, tq, tk int) Mask {
	if len(keyActive) != b*tk {
		panic(fmt.Sprintf("engine: KeyMask with %d key flags for B=%d, Tk=%d", len(keyActive), b, tk))
	}
	if cap(dst) < b*tq*tk {
		dst = make([]bool, b*tq*tk)
	}
	dst = dst[:b*tq*tk]
	for s := range b {
		for i := range tq {
			copy(dst[(s*tq+i)*tk:(s*tq+i+1)*tk], keyActive[s*tk:(s+1)*tk])
		}
	}
	return Mask{Allow: dst, BatchStride: tq * tk}
}

// ---------------------------------------------------------------------------
// Multi-head scaled dot-product attention, fused over heads:
//
//	out[b, i, h] = Σ_j softmax_j(q[b,i,h]·k[b,j,h]/√Dh | mask) · v[b, j, h]
//
// q [B, Tq, H·Dh], k, v [B, Tk, H·Dh], out [B, Tq, H·Dh]; head h is the column
// block [h·Dh, (h+1)·Dh). q, k and v may be column blocks of one wider tensor
// (a fused QKV or KV projection), addressed by offset and row stride.

// Attention is multi-head attention of queries q [B, Tq, H·Dh] over keys k
// and values v [B, Tk, H·Dh] with the given number of heads and mask. It
// does no projections.
func (g *Graph) Attention(q, k, v *Tensor, heads int, mask Mask) *Tensor {
	if q.Rank() != 3 || k.Rank() != 3 || !sameShape(k.Shape, v.Shape) || q.Shape[0] != k.Shape[0] || q.Shape[2] != k.Shape[2] {
		panic(fmt.Sprintf("engine: Attention of q %v, k %v, v %v", q.Shape, k.Shape, v.Shape))
	}
	return g.attention(q, k, v, 0, 0, 0, q.Shape[0], q.Shape[1], k.Shape[1], q.Shape[2], heads, mask)
}

// SelfAttention is multi-head self-attention on the output of a fused QKV
// projection: qkv [B, T, 3·H·Dh] holds q, k and v side by side in its last
// axis. The result is [B, T, H·Dh].
func (g *Graph) SelfAttention(qkv *Tensor, heads int, mask Mask) *Tensor {
	if qkv.Rank() != 3 || qkv.Shape[2]%3 != 0 {
		panic(fmt.Sprintf("engine: SelfAttention needs qkv [B, T, 3·H·Dh], got %v", qkv.Shape))
	}
	w := qkv.Shape[2] / 3
	return g.attention(qkv, qkv, qkv, 0, w, 2*w, qkv.Shape[0], qkv.Shape[1], qkv.Shape[1], w, heads, mask)
}

// CrossAttention is multi-head attention of q [B, Tq, H·Dh] over the output
// of a fused KV projection kv [B, Tk, 2·H·Dh] (k then v in the last axis).
func (g *Graph) CrossAttention(q, kv *Tensor, heads int, mask Mask) *Tensor {
	if q.Rank() != 3 || kv.Rank() != 3 || kv.Shape[2] != 2*q.Shape[2] || kv.Shape[0] != q.Shape[0] {
		panic(fmt.Sprintf("engine: CrossAttention of q %v with kv %v: want kv [B, Tk, 2·%d]", q.Shape, kv.Shape, q.Cols()))
	}
	w := q.Shape[2]
	return g.attention(q, kv, kv, 0, 0, w, q.Shape[0], q.Shape[1], kv.Shape[1], w, heads, mask)
}

func (g *Graph) attention(q, k, v *Tensor, oq, ok, ov, b, tq, tk, w, heads int, mask Mask) *Tensor {
	if heads <= 0 || w%heads != 0 {
		panic(fmt.Sprintf("engine: attention width %d not divisible into %d heads", w, heads))
	}
	s := kernels.AttnShape{B: b, Tq: tq, Tk: tk, H: heads, Dh: w / heads, LdQ: q.Cols(), LdK: k.Cols(), LdV: v.Cols(), LdO: w}
	out := g.newTensor(g.anyGrad(q, k, v), b, tq, w)
	var probs []float32
	if out.requiresGrad {
		probs = g.buf(b * heads * tq * tk)
	}
	kernels.AttentionForward(s, q.Data[oq:], k.Data[ok:], v.Data[ov:], mask, out.Data, probs)
	if out.requiresGrad {
		nd := g.record(out, attentionBackward)
		nd.attention = attentionRec{q: q, k: k, v: v, oq: oq, ok: ok, ov: ov, shape: s, mask: mask, probs: probs}
	}
	return out
}

// With P = softmax(S), S = q·kᵀ/√Dh, out = P·v (per head):
//
//	dv += Pᵀ·dout;  dS = P ⊙ (dout·vᵀ − rowsum(dout ⊙ out));
//	dq += dS·k/√Dh;  dk += dSᵀ·q/√Dh.
//
// The kernel always writes all three; inputs without gradient get sinks.
func attentionBackward(g *Graph, nd *node) {
	r := &nd.attention
	q, k, v := r.q, r.k, r.v
	dq, dk, dv := gradOrSink(g, 0, q), gradOrSink(g, 1, k), gradOrSink(g, 2, v)
	kernels.AttentionBackward(r.shape, q.Data[r.oq:], k.Data[r.ok:], v.Data[r.ov:], r.probs, nd.out.Data, nd.out.Grad, r.mask,
		dq[r.oq:], dk[r.ok:], dv[r.ov:])
}

// ---------------------------------------------------------------------------
// Key/value cache for autoregressive decoding.

// KVCache holds the keys and values of the tokens decoded so far for one
// attention layer, so that each new token costs one query over the cache
// instead of a full forward pass. Keys and values are stored [B, Cap, H·Dh];
// attention runs over all Cap slots with a mask that admits only the filled
// ones, so no copies are needed as the cache grows.
type KVCache struct {
	B, Cap, Heads, Width int // batch, capacity in tokens, heads, H·Dh
	Len                  int // tokens cached so far

	K, V  []float32
	allow []bool
}

// NewKVCache returns an empty cache for batch b, up to capacity tokens,
// heads heads and model width width = H·Dh.
func NewKVCache(b, capacity, heads, width int) *KVCache {
	if heads <= 0 || width%heads != 0 {
		panic(fmt.Sprintf("engine: KVCache width %d not divisible into %d heads", width, heads))
	}
	return &KVCache{B: b, Cap: capacity, Heads: heads, Width: width,
		K: make([]float32, b*capacity*width), V: make([]float32, b*capacity*width)}
}

// Reset empties the cache, keeping its memory.
func (c *KVCache) Reset() { c.Len = 0 }

// Append copies n new tokens' keys and values into the cache. k and v are
// [B, n, stride] buffers whose rows hold the Width key (value) entries at
// column offset offK (offV); pass a fused qkv projection with offK = Width,
// offV = 2·Width, or plain [B, n, Width] tensors with offsets 0.
func (c *KVCache) Append(k *Tensor, offK int, v *Tensor, offV int) {
	if k.Rank() != 3 || v.Rank() != 3 || k.Shape[0] != c.B || v.Shape[0] != c.B || k.Shape[1] != v.Shape[1] ||
		offK+c.Width > k.Shape[2] || offV+c.Width > v.Shape[2] {
		panic(fmt.Sprintf("engine: KVCache.Append of k %v (offset %d), v %v (offset %d) to cache B=%d, width %d", k.Shape, offK, v.Shape, offV, c.B, c.Width))
	}
	n := k.Shape[1]
	if c.Len+n > c.Cap {
		panic(fmt.Sprintf("engine: KVCache full: %d + %d tokens > capacity %d", c.Len, n, c.Cap))
	}
	ldk, ldv := k.Shape[2], v.Shape[2]
	for b := range c.B {
		for t := range n {
			dst := (b*c.Cap + c.Len + t) * c.Width
			copy(c.K[dst:dst+c.Width], k.Data[(b*n+t)*ldk+offK:][:c.Width])
			copy(c.V[dst:dst+c.Width], v.Data[(b*n+t)*ldv+offV:][:c.Width])
		}
	}
	c.Len += n
}

// Attend runs attention of the newest queries over the cache: q has n ≤ Len
// tokens [B, n, stride] (Width columns at offset offQ), taken to be the last
// n cached positions, each attending causally to every cached key up to its
// own position. The result is [B, n, Width]. It never records a tape.
func (g *Graph) Attend(c *KVCache, q *Tensor, offQ int) *Tensor {
	if q.Rank() != 3 || q.Shape[0] != c.B || offQ+c.Width > q.Shape[2] || q.Shape[1] > c.Len {
		panic(fmt.Sprintf("engine: KVCache attend of q %v (offset %d) on cache B=%d, width %d, len %d", q.Shape, offQ, c.B, c.Width, c.Len))
	}
	n := q.Shape[1]
	if cap(c.allow) < n*c.Cap {
		c.allow = make([]bool, n*c.Cap)
	}
	allow := c.allow[:n*c.Cap]
	for i := range n {
		pos := c.Len - n + i
		for j := range c.Cap {
			allow[i*c.Cap+j] = j <= pos
		}
	}
	s := kernels.AttnShape{B: c.B, Tq: n, Tk: c.Cap, H: c.Heads, Dh: c.Width / c.Heads, LdQ: q.Shape[2], LdK: c.Width, LdV: c.Width, LdO: c.Width}
	out := g.newTensor(false, c.B, n, c.Width)
	kernels.AttentionForward(s, q.Data[offQ:], c.K, c.V, Mask{Allow: allow}, out.Data, nil)
	return out
}

// Segment is a run of consecutive batch rows of a query tensor that attend
// to one observation's keys and values: rows [Row, Row+Rows) use
// observation Obs (see CrossAttentionSegments).
type Segment struct {
	Row, Rows, Obs int
}

// CrossAttentionSegments is CrossAttention for rows that do not come in
// equal groups per observation: q [B, Tq, H·Dh], kv [Be, Tk, 2·H·Dh], and
// each segment's rows attend to kv[Obs]. The segments must cover the B
// rows in order. All queries of a segment attend independently to the same
// keys, so a segment runs as one attention call with Rows·Tq queries. It
// is an inference op: q and kv must not require gradients.
func (g *Graph) CrossAttentionSegments(q, kv *Tensor, heads int, segs []Segment) *Tensor {
	if q.Rank() != 3 || kv.Rank() != 3 || kv.Shape[2] != 2*q.Shape[2] {
		panic(fmt.Sprintf("engine: CrossAttentionSegments of q %v with kv %v: want kv [Be, Tk, 2·%d]", q.Shape, kv.Shape, q.Cols()))
	}
	if q.requiresGrad || kv.requiresGrad {
		panic("engine: CrossAttentionSegments is inference-only (no backward)")
	}
	b, tq, w := q.Shape[0], q.Shape[1], q.Shape[2]
	be, tk := kv.Shape[0], kv.Shape[1]
	if heads <= 0 || w%heads != 0 {
		panic(fmt.Sprintf("engine: attention width %d not divisible into %d heads", w, heads))
	}
	next := 0
	for _, s := range segs {
		if s.Row != next || s.Rows <= 0 || s.Obs < 0 || s.Obs >= be {
			panic(fmt.Sprintf("engine: CrossAttentionSegments segment %+v (next row %d, %d observations)", s, next, be))
		}
		next += s.Rows
	}
	if next != b {
		panic(fmt.Sprintf("engine: CrossAttentionSegments segments cover %d of %d rows", next, b))
	}
	out := g.newTensor(false, b, tq, w)
	// Segments run in parallel (each one's own split over heads then runs
	// inline): a segment of a few rows is too small to split, and
	// splitting only within segments left one core idle on short scans.
	perSeg := max(1, b*tq*tk*w/len(segs)) // multiply-adds per segment, roughly
	kernels.ParallelForGrain(len(segs), max(1, (1<<16)/perSeg), func(lo, hi int) {
		for _, s := range segs[lo:hi] {
			sh := kernels.AttnShape{B: 1, Tq: s.Rows * tq, Tk: tk, H: heads, Dh: w / heads, LdQ: w, LdK: 2 * w, LdV: 2 * w, LdO: w}
			kvo := s.Obs * tk * 2 * w
			kernels.AttentionForward(sh, q.Data[s.Row*tq*w:(s.Row+s.Rows)*tq*w], kv.Data[kvo:kvo+tk*2*w], kv.Data[kvo+w:kvo+tk*2*w], Mask{}, out.Data[s.Row*tq*w:(s.Row+s.Rows)*tq*w], nil)
		}
	})
	return out
}
