package network

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/family"
)

// TestMakeBatchDeterministic: a batch depends only on the seed and the
// samples' indices, not on how the stream is split into batches; the
// noise levels respect the clip range.
func TestMakeBatchDeterministic(t *testing.T) {
	n := newNet(t, "b3s", tinyConfig, 1)
	s := simulate(n.fam, 30, 100, 8)
	var whole, lo, hi Batch
	if err := n.MakeBatch(s, 31, &whole); err != nil {
		t.Fatal(err)
	}
	_ = n.MakeBatch(s[:4], 31, &lo)
	_ = n.MakeBatch(s[4:], 31, &hi)
	dm := n.dmax
	if !slices.Equal(whole.ThetaSigma[:4*dm], lo.ThetaSigma) || !slices.Equal(whole.ThetaSigma[4*dm:], hi.ThetaSigma) ||
		!slices.Equal(whole.Sigma[4:], hi.Sigma) || !slices.Equal(whole.enc.Feat[:len(lo.enc.Feat)], lo.enc.Feat) {
		t.Fatal("batch rows depend on the batch split")
	}
	var other Batch
	_ = n.MakeBatch(s, 32, &other)
	if slices.Equal(whole.Sigma, other.Sigma) {
		t.Fatal("noise levels do not depend on the seed")
	}
	for _, sg := range whole.Sigma {
		if sg < n.cfg.SigmaMin || sg > n.cfg.SigmaMax {
			t.Fatalf("σ = %v outside [%v, %v]", sg, n.cfg.SigmaMin, n.cfg.SigmaMax)
		}
	}
	// Mixed lengths are rejected.
	s2 := simulate(n.fam, 30, 0, 40)
	mixed := false
	for _, x := range s2[1:] {
		if x.Design.N != s2[0].Design.N {
			mixed = true
		}
	}
	if mixed && n.MakeBatch(s2, 1, &other) == nil {
		t.Fatal("MakeBatch accepted observations of different lengths")
	}
}

// TestParamLossExplicit recomputes the parameter term of Loss from its
// definition: ε is redrawn from the per-sample noise stream, D is the
// public Denoise at the batch's σ, v̂ = α̂(θ_σ − D)/σ − σ̂D and
// v = α̂ε − σ̂θ (float64), and the term is Σ_active (v̂ − v)²/(B·√DMax).
// σ is drawn from ln σ ~ N(0, 0.5²) here so that (θ_σ − D)/σ does not
// amplify float32 rounding; the tolerance 1e-3 relative covers float32
// denoiser outputs (relative error ~1e-6) amplified by 1/σ ≲ 10.
func TestParamLossExplicit(t *testing.T) {
	for _, name := range []string{"b3s", "lingauss-k6"} {
		f := lookup(t, name)
		cfg := tinyConfig(f)
		cfg.LogSigmaMean, cfg.LogSigmaStd = 0, 0.5
		n, err := New(f, cfg, 40)
		if err != nil {
			t.Fatal(err)
		}
		perturbParams(n, 0.3, 41)
		s := simulate(f, 42, 0, 6)
		const seed = 43
		var b Batch
		if err := n.MakeBatch(s, seed, &b); err != nil {
			t.Fatal(err)
		}
		g := engine.NewGraph()
		_, maskLoss, paramLoss := n.Loss(g, &b)

		ig := engine.NewInferenceGraph()
		enc := encodeSamples(t, n, ig, s)
		masks := make([][]bool, len(s))
		for i := range s {
			masks[i] = s[i].Mask
		}
		dm := n.dmax
		d, err := n.Denoise(ig, enc, masks, ig.Input(b.ThetaSigma, len(s), dm), b.Sigma)
		if err != nil {
			t.Fatal(err)
		}
		active := make([]bool, dm)
		want := 0.0
		for i := range s {
			r := family.SampleRNG(seed^noiseStream, s[i].Index)
			sigma := min(max(math.Exp(cfg.LogSigmaMean+cfg.LogSigmaStd*r.NormFloat64()), cfg.SigmaMin), cfg.SigmaMax)
			if sigma != b.Sigma[i] {
				t.Fatalf("σ of sample %d: batch %v, stream %v", i, b.Sigma[i], sigma)
			}
			f.Layout().Active(s[i].Mask, active)
			for j := range dm {
				eps := r.NormFloat64()
				if !active[j] {
					continue
				}
				vhat := VPred(float64(b.ThetaSigma[i*dm+j]), float64(d.Data[i*dm+j]), sigma)
				v := VTarget(s[i].Theta[j], eps, sigma)
				want += (vhat - v) * (vhat - v)
			}
		}
		want /= float64(len(s)) * math.Sqrt(float64(dm))
		if math.Abs(paramLoss-want) > 1e-3*want {
			t.Fatalf("%s: parameter loss %v, explicit v-loss %v", name, paramLoss, want)
		}
		// The mask term is −mean log q of the true masks.
		wantM := 0.0
		for i := range s {
			l1, _ := n.MaskLogits(ig, ig.Reshape(ig.Slice(enc, 0, i, i+1), 1, enc.Shape[1], enc.Shape[2]), s[i].Lambda, masks[i:i+1])
			wantM -= MaskLogProb(l1, masks[i:i+1], nil)[0]
		}
		wantM /= float64(len(s))
		if math.Abs(maskLoss-wantM) > 1e-4*wantM {
			t.Fatalf("%s: mask loss %v, −mean log q %v", name, maskLoss, wantM)
		}
	}
}

// TestLossGradient compares the backpropagated gradient of Loss with
// central differences along random directions, for several parameter
// tensors of every part of the network (encoder, tokenizer, both decoders,
// AdaLN layers, Fourier projections). Parameters are perturbed first so
// that the zero-initialised layers carry gradient. The loss is O(10) in
// float32 with float64 reductions, so its rounding error is ~1e-6 and the
// difference quotient with h = 1e-3 has noise ~1e-3; the truncation error
// h²·L‴/6 stays below 1e-4 even for the Fourier projections, whose third
// derivatives carry a factor (2π)³ (at h = 1e-2 they are off by ~10%).
// Tolerance 3e-3 + 2e-2·|g·u|.
func TestLossGradient(t *testing.T) {
	categoricalNodes := func(f family.Family) Config {
		c := categoricalConfig(f)
		c.LambdaNodes = 3
		return c
	}
	for _, tc := range []struct {
		fam    string
		cfg    func(family.Family) Config
		params []string
	}{
		{"b3s", tinyConfig, []string{"enc.fourier", "enc.in.w", "enc.layer0.attn.wqkv", "tok.id", "tok.bit", "tok.mask.start",
			"tok.frac.enc", "tok.frac.dec.w", "tok.shared.dec.w", "tok.comp1.enc", "tok.comp4.dec.b",
			"mdec.fourier", "mdec.ctx.w", "mdec.layer1.ada1.ws", "mdec.layer0.cross.wkv", "mdec.head.w",
			"pdec.fourier", "pdec.layer0.ada3.wc", "pdec.layer1.mlp.w1", "pdec.ln.g"}},
		{"lingauss-k6", tinyConfig, []string{"enc.pos", "enc.in.w", "tok.comp2.enc", "tok.comp0.dec.w", "mdec.layer0.attn.wo", "pdec.layer1.cross.wq"}},
		// The categorical model decoder with λ nodes (softmax cross-entropy
		// over replicated rows).
		{"lingauss-k6", categoricalNodes, []string{"enc.in.w", "tok.bit", "tok.mask.w", "mdec.ctx.w", "mdec.layer1.cross.wkv", "mdec.layer0.mlp.w1", "mdec.cat.w", "mdec.cat.b"}},
		{"b3s", categoricalConfig, []string{"enc.fourier", "tok.id", "mdec.layer0.attn.wqkv", "mdec.cat.w"}},
		// The autoregressive decoder with λ strata (J query sets per
		// observation in the cross-attention).
		{"lingauss-k6", strataConfig, []string{"enc.in.w", "tok.bit", "mdec.fourier", "mdec.layer0.cross.wkv", "mdec.layer1.attn.wo", "mdec.head.w"}},
	} {
		n := newNet(t, tc.fam, tc.cfg, 50)
		perturbParams(n, 0.3, 51)
		s := simulate(n.fam, 52, 0, 4)
		var b Batch
		if err := n.MakeBatch(s, 53, &b); err != nil {
			t.Fatal(err)
		}
		g := engine.NewGraph()
		loss := func() float64 {
			g.Reset()
			l, _, _ := n.Loss(g, &b)
			return float64(l.Item())
		}
		g.Reset()
		tot, _, _ := n.Loss(g, &b)
		n.Params().ZeroGrad()
		g.Backward(tot)
		r := rand.New(rand.NewPCG(54, 55))
		for _, name := range tc.params {
			p := n.Params().Get(name)
			if p == nil {
				t.Fatalf("%s: no parameter %q", tc.fam, name)
			}
			grad := slices.Clone(p.Grad)
			u := make([]float32, len(p.Data))
			norm := 0.0
			for i := range u {
				v := r.NormFloat64()
				u[i] = float32(v)
				norm += v * v
			}
			gu := 0.0
			for i := range u {
				u[i] /= float32(math.Sqrt(norm))
				gu += float64(u[i]) * float64(grad[i])
			}
			const h = 1e-3
			orig := slices.Clone(p.Data)
			for i := range p.Data {
				p.Data[i] = orig[i] + h*u[i]
			}
			lp := loss()
			for i := range p.Data {
				p.Data[i] = orig[i] - h*u[i]
			}
			lm := loss()
			copy(p.Data, orig)
			fd := (lp - lm) / (2 * h)
			if math.Abs(fd-gu) > 3e-3+2e-2*math.Abs(gu) {
				t.Errorf("%s %s: directional derivative %v, finite difference %v", tc.fam, name, gu, fd)
			}
		}
	}
}

// TestTrainingReducesLoss trains a tiny network on lingauss-k6 for 300
// steps of 64 fresh simulations with engine/optim and requires the mean
// loss of the last 50 steps to be clearly below that of the first 10. At
// initialisation the loss is about C·ln 2 + E[active dims]/√6 ≈ 6; a
// network that has learnt only the prior already reaches ≈ 3 + 0.9, so the
// 0.75 factor demands real learning yet leaves a wide margin over the
// step-to-step noise (standard deviation ≈ 0.3 per step, 0.05 for a
// 50-step mean).
func TestTrainingReducesLoss(t *testing.T) {
	f := lookup(t, "lingauss-k6")
	cfg := tinyConfig(f)
	cfg.ModelDim, cfg.HeadDim = 32, 16
	n, err := New(f, cfg, 60)
	if err != nil {
		t.Fatal(err)
	}
	oc := optim.DefaultConfig()
	oc.LR = 2e-3
	opt, err := optim.New(n.Params().OptimParams(), oc)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	const steps, bs = 300, 64
	samples := make([]family.Sample, bs)
	var b Batch
	g := engine.NewGraph()
	losses := make([]float64, steps)
	for step := range steps {
		family.SimulateBatch(f, family.SimOptions{Seed: 61, Lambda: math.NaN()}, uint64(step*bs), samples)
		if err := n.MakeBatch(samples, 61, &b); err != nil {
			t.Fatal(err)
		}
		g.Reset()
		tot, _, _ := n.Loss(g, &b)
		n.Params().ZeroGrad()
		g.Backward(tot)
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		losses[step] = float64(tot.Item())
	}
	mean := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s / float64(len(x))
	}
	first, last := mean(losses[:10]), mean(losses[steps-50:])
	t.Logf("loss: first 10 steps %.3f, last 50 steps %.3f", first, last)
	if !(last < 0.75*first) {
		t.Fatalf("loss did not drop clearly: first 10 steps %.3f, last 50 steps %.3f", first, last)
	}
}
