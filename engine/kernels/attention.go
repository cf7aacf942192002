package kernels

import "fmt"

// AttnShape describes a multi-head attention call. q and out are [B, Tq, ·]
// and k, v are [B, Tk, ·] row-major buffers whose rows are LdQ, LdO, LdK,
// LdV elements apart (0 means H·Dh); head h of a token occupies columns
// [h·Dh, (h+1)·Dh) of its row. The strides let q, k and v be column slices of
// one fused QKV projection: q = qkv, k = qkv[H·Dh:], v = qkv[2·H·Dh:] with all
// strides 3·H·Dh.
type AttnShape struct {
	B, Tq, Tk, H, Dh   int
	LdQ, LdK, LdV, LdO int
}

// Mask restricts attention. Allow[b·BatchStride + i·Tk + j] says whether query
// i of batch b may attend key j. BatchStride 0 shares one [Tq, Tk] mask over
// the batch (e.g. causal); BatchStride Tq·Tk gives each sample its own. A nil
// Allow lets every query attend every key.
type Mask struct {
	Allow       []bool
	BatchStride int
}

// CausalMask returns the [t, t] mask in which query i attends keys 0..i.
func CausalMask(t int) Mask {
	a := make([]bool, t*t)
	for i := 0; i < t; i++ {
		for j := 0; j <= i; j++ {
			a[i*t+j] = true
		}
	}
	return Mask{Allow: a}
}

func (s AttnShape) norm() AttnShape {
	w := s.H * s.Dh
	for _, ld := range []*int{&s.LdQ, &s.LdK, &s.LdV, &s.LdO} {
		if *ld == 0 {
			*ld = w
		}
	}
	return s
}

// span is the buffer length needed for rows rows of stride ld.
func (s AttnShape) span(rows, ld int) int {
	if rows == 0 {
		return 0
	}
	return (rows-1)*ld + s.H*s.Dh
}

func (s AttnShape) check(q, k, v, out []float32, m Mask) {
	if s.B < 0 || s.Tq < 0 || s.Tk < 0 || s.H < 0 || s.Dh < 0 {
		panic(fmt.Sprintf("kernels: negative dimension in %+v", s))
	}
	w := s.H * s.Dh
	if s.LdQ < w || s.LdK < w || s.LdV < w || s.LdO < w {
		panic(fmt.Sprintf("kernels: row stride below H·Dh in %+v", s))
	}
	checkLen("q", q, s.span(s.B*s.Tq, s.LdQ))
	checkLen("k", k, s.span(s.B*s.Tk, s.LdK))
	checkLen("v", v, s.span(s.B*s.Tk, s.LdV))
	checkLen("out", out, s.span(s.B*s.Tq, s.LdO))
	if m.Allow != nil && s.B > 0 && len(m.Allow) < (s.B-1)*m.BatchStride+s.Tq*s.Tk {
		panic(fmt.Sprintf("kernels: mask has length %d, need %d", len(m.Allow), (s.B-1)*m.BatchStride+s.Tq*s.Tk))
	}
}

func (s AttnShape) grain() int {
	return max(1, grainFlops/max(1, s.Tq*s.Tk*s.Dh))
}

type attnJob struct {
	s                         AttnShape
	q, k, v, probs, out, dout []float32
	dq, dk, dv                []float32
	m                         Mask
	bwd                       bool
}

func (j *attnJob) run(_, lo, hi int) {
	if j.bwd {
		attnBwdImpl(j.s, j.q, j.k, j.v, j.probs, j.out, j.dout, j.m, lo, hi, j.dq, j.dk, j.dv)
	} else {
		attnFwdImpl(j.s, j.q, j.k, j.v, j.m, j.out, j.probs, lo, hi)
	}
}

var attnJobs jobPool[attnJob]

// AttentionForward computes scaled dot-product attention per head,
// out = softmax(q·kᵀ/√Dh masked by m)·v, parallel over (batch, head) pairs.
// probs ([B, H, Tq, Tk], zero where masked) is saved for AttentionBackward;
// it may be nil in inference. A query with no allowed key gets a zero output.
// Decoding with a key/value cache is the case Tq = 1 over Tk cached rows.
func AttentionForward(s AttnShape, q, k, v []float32, m Mask, out []float32, probs []float32) {
	s = s.norm()
	s.check(q, k, v, out, m)
	checkOpt("probs", probs, s.B*s.H*s.Tq*s.Tk)
	j := attnJobs.get()
	*j = attnJob{s: s, q: q, k: k, v: v, m: m, out: out, probs: probs}
	parallelRun(s.B*s.H, s.grain(), j)
	attnJobs.put(j)
}

// AttentionBackward accumulates the gradients of AttentionForward into dq,
// dk and dv, which have the strides of q, k and v (so they may be column
// slices of one dQKV buffer); dout has the stride of out. probs and out are
// the forward's results and m must be the forward's mask.
func AttentionBackward(s AttnShape, q, k, v, probs, out, dout []float32, m Mask, dq, dk, dv []float32) {
	s = s.norm()
	s.check(q, k, v, out, m)
	checkLen("probs", probs, s.B*s.H*s.Tq*s.Tk)
	checkLen("dout", dout, s.span(s.B*s.Tq, s.LdO))
	checkLen("dq", dq, s.span(s.B*s.Tq, s.LdQ))
	checkLen("dk", dk, s.span(s.B*s.Tk, s.LdK))
	checkLen("dv", dv, s.span(s.B*s.Tk, s.LdV))
	j := attnJobs.get()
	*j = attnJob{s: s, q: q, k: k, v: v, probs: probs, out: out, dout: dout, m: m, dq: dq, dk: dk, dv: dv, bwd: true}
	parallelRun(s.B*s.H, s.grain(), j)
	attnJobs.put(j)
}
