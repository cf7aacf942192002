package refnet

// flopCounter accumulates the floating-point operations of matrix products,
// forward only and forward + backward.
//
// What is counted: every GEMM (Linear, LinearGELU, the Fourier projection)
// as 2·M·N·K forward; its backward as 2·M·N·K for the weight gradient plus
// 2·M·N·K for the input gradient when the input requires one (everything
// but the raw encoder input, the noisy parameters θ and the scalar
// conditions). Attention per sample and head as the GEMM-like products
// Q·Kᵀ and P·V forward (2·Tq·Tk·Dh each) and dV = Pᵀ·dO, dP = dO·Vᵀ,
// dQ = dS·K, dK = dSᵀ·Q backward, all dense (masked-out entries of the
// causal and activity masks included, as the kernels compute them).
//
// Not counted: elementwise work (bias, GELU, LayerNorm, AdaLN modulation,
// softmax, residual adds, losses, gradient zeroing) and the optimiser, all
// O(size) and together a few per cent of the GEMM work.
type flopCounter struct{ fwd, total float64 }

// gemm counts y[m, n] = x[m, k]·W[k, n].
func (f *flopCounter) gemm(m, n, k int, inputGrad bool) {
	v := 2 * float64(m) * float64(n) * float64(k)
	f.fwd += v
	f.total += 2 * v // forward + weight gradient
	if inputGrad {
		f.total += v
	}
}

// attn counts b·h heads of attention of tq queries over tk keys of width dh.
func (f *flopCounter) attn(b, h, tq, tk, dh int) {
	v := 2 * float64(b) * float64(h) * float64(tq) * float64(tk) * float64(dh)
	f.fwd += 2 * v
	f.total += 6 * v
}

// block counts one block over b samples of t tokens (tk encoder tokens for
// cross-attention; tk 0 for an encoder block).
func (c Config) block(f *flopCounter, b, t, tk int) {
	d, w, h := c.Dim, c.MLPRatio*c.Dim, c.Heads
	r := b * t
	f.gemm(r, 3*d, d, true)
	f.attn(b, h, t, t, d/h)
	f.gemm(r, d, d, true)
	if tk > 0 {
		f.gemm(r, d, d, true)
		f.gemm(b*tk, 2*d, d, true)
		f.attn(b, h, t, tk, d/h)
		f.gemm(r, d, d, true)
	}
	f.gemm(r, w, d, true)
	f.gemm(r, d, w, true)
}

// decoder counts a conditioned decoder stack of layers blocks over t tokens
// with an output head of width out, including its conditioning MLPs.
func (c Config) decoder(f *flopCounter, b, layers, t, out int) {
	d := c.Dim
	f.gemm(b, d/2, 1, false) // Fourier projection of the scalar condition
	f.gemm(b, 2*layers*2*d, d, true)
	for range layers {
		for range 4 { // scale and shift of two AdaLNs
			f.gemm(b, d, 2*d, true)
		}
		c.block(f, b, t, c.EncTokens)
	}
	f.gemm(b*t, out, d, true)
}

func (c Config) encoder(f *flopCounter, b int) {
	f.gemm(b*c.EncTokens, c.Dim, c.EncIn, false)
	for range c.EncLayers {
		c.block(f, b, c.EncTokens, 0)
	}
}

func (c Config) paramDecoder(f *flopCounter, b int) {
	f.gemm(b*c.ParamTokens, c.Dim, c.ParamDim, false)
	c.decoder(f, b, c.ParamLayers, c.ParamTokens, c.ParamDim)
}

// StepFLOPs is the analytic floating-point operation count of one training
// step (forward + backward, see flopCounter for what is counted) at batch
// c.Batch.
func (c Config) StepFLOPs() float64 {
	var f flopCounter
	c.encoder(&f, c.Batch)
	c.decoder(&f, c.Batch, c.ModelLayers, c.Components+1, 1)
	c.paramDecoder(&f, c.Batch)
	return f.total
}

// InferFLOPs is the forward floating-point operation count of the parameter
// decoder at batch c.InferBatch (InferParamDecoder; the encoder output is
// precomputed and not counted).
func (c Config) InferFLOPs() float64 {
	var f flopCounter
	c.paramDecoder(&f, c.InferBatch)
	return f.fwd
}

// FLOPs is the floating-point operation count of one Step (Config.StepFLOPs).
func (n *Net) FLOPs() float64 { return n.cfg.StepFLOPs() }
