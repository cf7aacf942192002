package refnet

import (
	"math/rand/v2"

	"github.com/prismsbi/prism/engine"
)

// Batch is one set of network inputs and targets, drawn like
// bench/torch_refnet.py's make_batch (random but fixed; generating it is
// not part of a timed step).
type Batch struct {
	N int // samples

	EncIn  []float32 // [N, EncTokens, EncIn] encoder input, N(0, 1)
	Lambda []float32 // [N, 1] model-decoder condition λ ~ U(0, 1)
	Bits   []float32 // [N, Components] BCE targets, Bernoulli(½)
	BitsIn []int32   // [N, Components+1] decoder tokens: 2 (start), then the bits
	Noise  []float32 // [N, 1] c_noise = ¼·log σ with log σ ~ N(−1.2, 1.2²)
	Theta  []float32 // [N, ParamTokens, ParamDim] noisy parameters, N(0, 1)
	Target []float32 // [N, ParamTokens, ParamDim] denoising target, N(0, 1)
	Active []bool    // [N, ParamTokens] activity, Bernoulli(ActiveProb)
	Weight []float32 // [N, ParamTokens, ParamDim] squared-error mask (1 where active)
	Allow  engine.Mask

	// Encoded is the encoder output [N, EncTokens, Dim] used by
	// InferParamDecoder, computed on its first call.
	Encoded []float32
}

// NewBatch draws a batch of n samples for cfg from r.
func NewBatch(cfg Config, n int, r *rand.Rand) *Batch {
	c, pt, pd := cfg.Components, cfg.ParamTokens, cfg.ParamDim
	b := &Batch{
		N:      n,
		EncIn:  normals(r, n*cfg.EncTokens*cfg.EncIn),
		Lambda: make([]float32, n),
		Bits:   make([]float32, n*c),
		BitsIn: make([]int32, n*(c+1)),
		Noise:  make([]float32, n),
	}
	for i := range b.Lambda {
		b.Lambda[i] = float32(r.Float64())
	}
	for s := range n {
		b.BitsIn[s*(c+1)] = 2
		for j := range c {
			if r.Float64() < 0.5 {
				b.Bits[s*c+j] = 1
				b.BitsIn[s*(c+1)+1+j] = 1
			}
		}
	}
	for i := range b.Noise {
		b.Noise[i] = float32(0.25 * (1.2*r.NormFloat64() - 1.2))
	}
	b.Theta = normals(r, n*pt*pd)
	b.Target = normals(r, n*pt*pd)
	b.Active = make([]bool, n*pt)
	b.Weight = make([]float32, n*pt*pd)
	for i := range b.Active {
		if r.Float64() < cfg.ActiveProb {
			b.Active[i] = true
			for k := range pd {
				b.Weight[i*pd+k] = 1
			}
		}
	}
	b.Allow = engine.ActivityMask(nil, b.Active, n, pt)
	return b
}

func normals(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}
