package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// noiseStream is XORed into the training seed to select the per-sample
// random streams of the diffusion noise (σ, ε), distinct from the
// simulator's streams of the same seed.
const noiseStream = 0x6e6f697365c0ffee

// Batch holds the network inputs and targets of one training batch. Its
// buffers are reused by MakeBatch.
type Batch struct {
	B int // samples

	enc encInput

	Lambda  []float32 // [B, 1] complexity knob λ
	BitsIn  []int32   // [B, C] model-decoder inputs (start row, then M_{i−1})
	Targets []float32 // [B, C] mask bits M_i

	Sigma      []float64 // [B] noise level σ of each sample
	CIn        []float32 // [B, 1] c_in(σ)
	CNoise     []float32 // [B, 1] c_noise(σ)
	ThetaSigma []float32 // [B, DMax] θ_σ = θ + σ·ε
	FTarget    []float32 // [B, DMax] network target F* = (σ·θ − ε)/√(1+σ²)
	Active     []float32 // [B, DMax] 1 on active latent dimensions
	TokActive  []bool    // [B, T] parameter-token activity
	Allow      engine.Mask

	// MaskWeight ([B, C]) and, folded into Active, the θ-loss weights are
	// the samples' importance weights exp(LogWeight) when some sample came
	// from a training proposal (Weighted); otherwise MaskWeight is unused
	// and Active holds 0/1.
	Weighted   bool
	MaskWeight []float32

	// Categorical decoder only, K = max(1, LambdaNodes) rows per sample
	// (node-major, see fillCategorical): the class of each mask ([K·B]),
	// the prior log p(M | λ) of every class ([K·B, |S|]) and the row
	// weights ([K·B]).
	Class     []int32
	PriorBias []float32
	RowWeight []float32

	// Autoregressive decoder with LambdaStrata J > 1 only: J rows per
	// sample, sample-major (row i·J + j is stratum j of sample i): λ_j
	// ([J·B]), the decoder inputs and targets of the sample's mask
	// ([J·B, C]) and the loss weights, importance weight / J ([J·B, C]).
	SLambda  []float32
	SBitsIn  []int32
	STargets []float32
	SWeight  []float32

	active []bool    // [DMax] scratch
	prior  []float64 // [|S|] scratch of the categorical decoder
}

// MakeBatch converts simulated samples (all with the same number of
// measurements) into network inputs in b, reusing its buffers. The noise
// level of sample s, ln σ ~ N(LogSigmaMean, LogSigmaStd²) clipped to
// [SigmaMin, SigmaMax], and its noise ε ~ N(0, I_DMax) are drawn, in this
// order, from family.SampleRNG(seed ^ noiseStream, s.Index), so a batch
// depends only on seed and the samples' indices.
func (n *Net) MakeBatch(samples []family.Sample, seed uint64, b *Batch) error {
	bs := len(samples)
	designs := make([]family.Design, bs)
	xs := make([][]float64, bs)
	for i := range samples {
		s := &samples[i]
		if len(s.Mask) != n.c || len(s.Theta) != n.dmax {
			return fmt.Errorf("network: sample %d has a mask of %d and θ of %d entries, %s needs %d and %d", s.Index, len(s.Mask), len(s.Theta), n.fam.Name(), n.c, n.dmax)
		}
		designs[i], xs[i] = s.Design, s.X
	}
	if err := n.fillEncoder(&b.enc, designs, xs); err != nil {
		return fmt.Errorf("network: batch: %w", err)
	}
	c, dm, t := n.c, n.dmax, len(n.tokens)
	b.B = bs
	b.Lambda = resize(b.Lambda, bs)
	b.BitsIn = resize(b.BitsIn, bs*c)
	b.Targets = resize(b.Targets, bs*c)
	b.Sigma = resize(b.Sigma, bs)
	b.CIn = resize(b.CIn, bs)
	b.CNoise = resize(b.CNoise, bs)
	b.ThetaSigma = resize(b.ThetaSigma, bs*dm)
	b.FTarget = resize(b.FTarget, bs*dm)
	b.Active = resize(b.Active, bs*dm)
	b.TokActive = resize(b.TokActive, bs*t)
	b.active = resize(b.active, dm)
	cfg := n.cfg
	b.Weighted = false
	for i := range samples {
		b.Weighted = b.Weighted || samples[i].LogWeight != 0
	}
	if b.Weighted {
		b.MaskWeight = resize(b.MaskWeight, bs*c)
	}
	if n.cat != nil {
		if err := n.fillCategorical(samples, b); err != nil {
			return err
		}
	}
	b.SLambda = b.SLambda[:0]
	if j := n.cfg.LambdaStrata; n.cat == nil && j > 1 {
		if err := n.fillLambdaStrata(samples, j, b); err != nil {
			return err
		}
	}
	for i := range samples {
		s := &samples[i]
		w := float32(1)
		if b.Weighted {
			w = float32(math.Exp(s.LogWeight))
			for k := range c {
				b.MaskWeight[i*c+k] = w
			}
		}
		b.Lambda[i] = float32(s.Lambda)
		maskBitsIn(s.Mask, b.BitsIn[i*c:(i+1)*c])
		for k, on := range s.Mask {
			b.Targets[i*c+k] = boolf(on)
		}
		r := family.SampleRNG(seed^noiseStream, s.Index)
		sigma := min(max(math.Exp(cfg.LogSigmaMean+cfg.LogSigmaStd*r.NormFloat64()), cfg.SigmaMin), cfg.SigmaMax)
		b.Sigma[i] = sigma
		b.CIn[i] = float32(CIn(sigma))
		b.CNoise[i] = float32(CNoise(sigma))
		n.layout.Active(s.Mask, b.active)
		for j, th := range s.Theta {
			eps := r.NormFloat64()
			b.ThetaSigma[i*dm+j] = float32(th + sigma*eps)
			b.FTarget[i*dm+j] = float32(-VTarget(th, eps, sigma))
			b.Active[i*dm+j] = w * boolf(b.active[j])
		}
		n.tokenActivity(s.Mask, b.active, b.TokActive[i*t:(i+1)*t])
	}
	b.Allow = engine.ActivityMask(b.Allow.Allow, b.TokActive, bs, t)
	return nil
}

// tokenActivity writes the activity of each parameter token for a mask
// whose latent activity is active: a fraction token is active with its
// latent, the shared token always, a component token with its component.
func (n *Net) tokenActivity(mask, active []bool, dst []bool) {
	for ti, tk := range n.tokens {
		switch tk.Kind {
		case fractionToken:
			dst[ti] = active[tk.Off]
		case sharedToken:
			dst[ti] = true
		default:
			dst[ti] = mask[tk.Index]
		}
	}
}

func boolf(on bool) float32 {
	if on {
		return 1
	}
	return 0
}

// Loss builds the training graph of batch b on g: the encoder (shared),
// the model decoder's negative log-likelihood −log q(M | x, λ) (the sum of
// the autoregressive decoder's BCE terms, or the categorical decoder's
// softmax cross-entropy) and the parameter decoder's v-loss, and returns
// total = Σ −log q / B + Σ_active (F − F*)² / (B·√DMax) together with its two
// terms. The caller resets g beforehand and runs g.Backward(total).
func (n *Net) Loss(g *engine.Graph, b *Batch) (total *engine.Tensor, maskLoss, paramLoss float64) {
	bs, c, dm := b.B, n.c, n.dmax
	enc := n.encode(g, &b.enc)
	var nll *engine.Tensor // Σ_b −log q(M_b | x_b, λ_b)
	if n.cat != nil {
		f := n.categoricalForward(g, enc)
		if nodes := len(b.Class) / bs; nodes > 1 {
			fs := make([]*engine.Tensor, nodes)
			for d := range fs {
				fs[d] = f
			}
			f = g.Concat(0, fs...)
		}
		rows, k := len(b.Class), len(n.cat.masks)
		nll = g.SoftmaxCrossEntropy(f, g.Input(b.PriorBias, rows, k), b.Class, g.Input(b.RowWeight, rows))
	} else if rows := len(b.SLambda); rows > 0 {
		// J query sets per observation share its encoder keys and values.
		logits := n.maskForward(g, enc, g.Input(b.SLambda, rows, 1), b.SBitsIn)
		nll = g.BCEWithLogits(logits, g.Input(b.STargets, rows, c, 1), g.Input(b.SWeight, rows, c, 1))
	} else {
		logits := n.maskForward(g, enc, g.Input(b.Lambda, bs, 1), b.BitsIn)
		var mw *engine.Tensor
		if b.Weighted {
			mw = g.Input(b.MaskWeight, bs, c, 1)
		}
		nll = g.BCEWithLogits(logits, g.Input(b.Targets, bs, c, 1), mw)
	}
	thIn := g.Mul(g.Input(b.ThetaSigma, bs, dm), g.Input(b.CIn, bs, 1))
	f := n.paramForward(g, enc, thIn, g.Input(b.CNoise, bs, 1), b.Allow)
	mse := g.MaskedSquaredError(f, g.Input(b.FTarget, bs, dm), g.Input(b.Active, bs, dm))
	wm := 1 / float32(bs)
	wp := float32(1 / (float64(bs) * math.Sqrt(float64(dm))))
	total = g.Add(g.Scale(nll, wm), g.Scale(mse, wp))
	return total, float64(nll.Item()) * float64(wm), float64(mse.Item()) * float64(wp)
}

// fillCategorical writes the categorical decoder's targets of samples into
// b: each mask's class, the prior bias and the row weights. Without λ
// quadrature there is one row per sample: its own λ, weight = its
// importance weight. With J nodes there are J rows per sample, node-major
// (row j·B + i is node j of sample i), with the prior bias at node λ_j and
// weight = importance weight × w_j(M) (see planLambdaNodes).
func (n *Net) fillCategorical(samples []family.Sample, b *Batch) error {
	bs, k, cat := len(samples), len(n.cat.masks), n.cat
	nodes := max(1, len(cat.nodes))
	b.Class = resize(b.Class, nodes*bs)
	b.PriorBias = resize(b.PriorBias, nodes*bs*k)
	b.RowWeight = resize(b.RowWeight, nodes*bs)
	for i := range samples {
		s := &samples[i]
		class := n.classOf(s.Mask)
		if class < 0 {
			return fmt.Errorf("network: sample %d has a mask outside the prior support of %s", s.Index, n.fam.Name())
		}
		w := float32(math.Exp(s.LogWeight))
		if len(cat.nodes) == 0 {
			b.Class[i], b.RowWeight[i] = class, w
			b.prior = n.priorBias(s.Lambda, b.PriorBias[i*k:(i+1)*k], b.prior)
			continue
		}
		for j, wj := range cat.nodeWeight[class] {
			row := j*bs + i
			b.Class[row], b.RowWeight[row] = class, w*float32(wj)
			copy(b.PriorBias[row*k:(row+1)*k], cat.nodeBias[j])
		}
	}
	return nil
}
