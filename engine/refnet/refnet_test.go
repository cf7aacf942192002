package refnet

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/engine"
)

// tinyConfig is the reference architecture shrunk so that a step takes
// well under a millisecond: every component (encoder, both decoders,
// AdaLN, causal and activity masks, cross-attention) is still present.
func tinyConfig() Config {
	return Config{
		Dim: 16, Heads: 2, MLPRatio: 4,
		Batch: 8, InferBatch: 6,
		EncLayers: 1, EncTokens: 3, EncIn: 4,
		ModelLayers: 2, Components: 5,
		ParamLayers: 2, ParamTokens: 4, ParamDim: 2,
		ActiveProb: 0.5,
	}
}

func newNet(t *testing.T, cfg Config, seed uint64) *Net {
	t.Helper()
	n, err := New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// The default network must have exactly the parameter count PyTorch reports
// for bench/torch_refnet.py (sum of p.numel() over net.parameters()), and
// the analytic formula must agree with the store for other sizes too.
func TestNumParams(t *testing.T) {
	const torchParams = 1040131
	if got := DefaultConfig().NumParams(); got != torchParams {
		t.Errorf("DefaultConfig().NumParams() = %d, PyTorch twin has %d", got, torchParams)
	}
	for _, cfg := range []Config{tinyConfig(), DefaultConfig()} {
		n := newNet(t, cfg, 1)
		if got, want := n.Store.NumValues(), cfg.NumParams(); got != want {
			t.Errorf("D=%d: store holds %d values, formula says %d", cfg.Dim, got, want)
		}
	}
}

// The FLOP count of the default step against a hand count of its
// multiply-adds per forward pass (rows × in × out summed by component), with
// the backward as twice the forward except for the two embedding GEMMs whose
// inputs are data (no input gradient) and the Fourier projections (K = 1).
func TestStepFLOPs(t *testing.T) {
	const (
		b, d, w          = 256.0, 64.0, 256.0
		encR, mR, pR, kR = b * 10, b * 51, b * 50, b * 10
	)
	perRow := 3*d*d + d*d + d*w + w*d // qkv, out, MLP
	cross := 2 * d * d                // q and out of cross-attention
	macs := encR*perRow*2 + (mR+pR)*(perRow+cross)*4 + kR*2*d*d*8
	macs += b * 4 * (51*51 + 50*50) * 16 * 2 * 4 // self-attention: 4 layers, QKᵀ and PV
	macs += b * 4 * 2 * (51 + 50) * 10 * 16 * 4  // cross-attention over 10 keys
	macs += b * 10 * 10 * d                      // encoder input
	macs += b * 50 * 2 * d                       // θ embedding
	macs += b * 4 * 10 * 10 * 16 * 2 * 2         // encoder self-attention: 2 layers
	macs += 2 * b * (d*8*2*d + 8*2*d*2*d)        // AdaLN MLPs of both decoders
	macs += mR*d + pR*d*2                        // heads
	fourier := 2 * b * d / 2                     // two Fourier projections, K = 1
	noInput := b*10*10*d + b*50*2*d + fourier    // GEMMs without input gradient
	want := 3*2*(macs+fourier) - 2*noInput
	got := DefaultConfig().StepFLOPs()
	if math.Abs(got-want) > 1e-9*want {
		t.Errorf("StepFLOPs = %.0f, hand count %.0f", got, want)
	}
}

// Thirty steps on the fixed batch must lower the loss at every step. The
// batch is fixed and the steps are small (RAdam: momentum steps of 5e-4 for
// five steps, then rectified Adam steps of at most ~5e-4 per weight), so
// each update moves along a descent direction with a first-order decrease
// (~lr·Σ|g|) that dwarfs the second-order term: the loss must fall
// strictly every step (it does so by 0.1–0.3 % per step on the tiny net).
// A sign error in any gradient, a broken update or an update applied to
// the wrong tensor raises or stalls it. Over 30 steps the drop must also
// reach 2 % (about 4 % is observed for the seeds used here).
func TestLossDecreases(t *testing.T) {
	n := newNet(t, tinyConfig(), 3)
	var first, prev float32
	for i := range 30 {
		l, err := n.Step()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l
		} else if !(l < prev) {
			t.Errorf("step %d: loss %.6f did not fall below %.6f", i, l, prev)
		}
		prev = l
	}
	t.Logf("loss %.4f → %.4f", first, prev)
	if !(prev < 0.98*first) {
		t.Errorf("loss went from %.4f to %.4f in 30 steps, want a drop of at least 2%%", first, prev)
	}
}

// After warm-up a step must allocate (almost) nothing: the graph arena and
// tape are reused and the optimiser's workers use preallocated state. The
// engine hands a closure to the second core when it zeroes the graph's
// gradients (one allocation, 16 bytes), and at larger sizes in a few
// broadcasting elementwise ops; two per step are allowed for that. The
// inference pass must not allocate at all.
func TestStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	n := newNet(t, tinyConfig(), 4)
	for range 2 {
		if _, err := n.Step(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := n.Step(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Step allocates %v times per call after warm-up, want at most 2", allocs)
	}
	n.InferParamDecoder(n.Infer)
	if allocs := testing.AllocsPerRun(10, func() { n.InferParamDecoder(n.Infer) }); allocs != 0 {
		t.Errorf("InferParamDecoder allocates %v times per call after warm-up, want 0", allocs)
	}
}

// randomizeHeads gives the zero-initialised parameter head and AdaLN
// second layers random weights so that every path of the network reaches
// the outputs.
func randomizeHeads(n *Net, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for _, p := range n.Store.All() {
		allZero := true
		for _, v := range p.Data {
			if v != 0 {
				allZero = false
				break
			}
		}
		if allZero && p.Rank() == 2 {
			for i := range p.Data {
				p.Data[i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
}

// maxAbsDiff returns max |a−b| and max |a|.
func maxAbsDiff(a, b []float32) (diff, scale float64) {
	for i := range a {
		diff = max(diff, math.Abs(float64(a[i]-b[i])))
		scale = max(scale, math.Abs(float64(a[i])))
	}
	return diff, scale
}

// The inference pass (no tape, no saved activations, encoder output
// precomputed) must equal the parameter decoder's output of the training
// graph on the same inputs. Both run the same kernels on the same data, so
// they differ at most by float32 rounding of differently ordered sums
// (attention without saved probabilities): 1e-5 relative to the output
// scale is ~100 ulps, far below any real discrepancy (a wrong mask or a
// missing term changes outputs at O(1) relative).
func TestInferMatchesTraining(t *testing.T) {
	n := newNet(t, tinyConfig(), 5)
	randomizeHeads(n, 5)
	g := engine.NewGraph()
	_, _, pred := n.forward(g, n.Infer)
	got := n.InferParamDecoder(n.Infer)
	if !slices.Equal(got.Shape, pred.Shape) {
		t.Fatalf("inference shape %v, training %v", got.Shape, pred.Shape)
	}
	diff, scale := maxAbsDiff(pred.Data, got.Data)
	if scale == 0 || diff > 1e-5*scale {
		t.Errorf("inference differs from training forward by %g (output scale %g)", diff, scale)
	}
}

// The model decoder must be autoregressive: logit i (predicting bit i) may
// depend on bits 0…i−1 only. Flipping bit j changes no logit ≤ j, and
// (with random weights) does change logit j+1.
func TestModelDecoderCausal(t *testing.T) {
	cfg := tinyConfig()
	n := newNet(t, cfg, 6)
	randomizeHeads(n, 6)
	b := n.Train
	c := cfg.Components
	logits := func() []float32 {
		g := engine.NewInferenceGraph()
		y := n.encode(g, b)
		return append([]float32(nil), n.modelDecoder(g, b, y).Data...)
	}
	base := logits()
	for j := range c - 1 {
		b.BitsIn[1+j] = 1 - b.BitsIn[1+j] // sample 0, bit j (token j+1)
		alt := logits()
		b.BitsIn[1+j] = 1 - b.BitsIn[1+j]
		for i := 0; i <= j; i++ {
			if alt[i] != base[i] {
				t.Errorf("flipping bit %d changed logit %d: %g → %g", j, i, base[i], alt[i])
			}
		}
		if alt[j+1] == base[j+1] {
			t.Errorf("flipping bit %d left logit %d unchanged", j, j+1)
		}
		for i := c; i < len(base); i++ { // other samples
			if alt[i] != base[i] {
				t.Fatalf("flipping a bit of sample 0 changed logit %d of sample %d", i%c, i/c)
			}
		}
	}
}

// The parameter decoder must respect the activity mask: an inactive token's
// output depends only on its own θ, and an active token's output does not
// depend on the θ of inactive tokens.
func TestParamDecoderMask(t *testing.T) {
	cfg := tinyConfig()
	cfg.InferBatch = 16
	n := newNet(t, cfg, 7)
	randomizeHeads(n, 7)
	b := n.Infer
	pt, pd := cfg.ParamTokens, cfg.ParamDim
	out := func() []float32 { return append([]float32(nil), n.InferParamDecoder(b).Data...) }
	base := out()
	checked := 0
	for s := range b.N {
		for j := range pt {
			orig := b.Theta[(s*pt+j)*pd]
			b.Theta[(s*pt+j)*pd] = orig + 1
			alt := out()
			b.Theta[(s*pt+j)*pd] = orig // restore exactly (x+1−1 may round)
			for i := range pt {
				o := (s*pt + i) * pd
				changed := alt[o] != base[o] || alt[o+1] != base[o+1]
				mayDepend := i == j || (b.Active[s*pt+i] && b.Active[s*pt+j])
				if changed && !mayDepend {
					t.Errorf("sample %d: θ of token %d (active %v) changed output of token %d (active %v)",
						s, j, b.Active[s*pt+j], i, b.Active[s*pt+i])
				}
				if mayDepend && !changed {
					t.Errorf("sample %d: θ of token %d did not change output of token %d", s, j, i)
				}
				if mayDepend && i != j {
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no pair of active tokens in the test batch")
	}
}

// New must reject inconsistent sizes with an error.
func TestConfigErrors(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.Heads = 3 },
		func(c *Config) { c.Batch = 0 },
		func(c *Config) { c.Components = 0 },
		func(c *Config) { c.ActiveProb = 1.5 },
	} {
		cfg := tinyConfig()
		mod(&cfg)
		if n, err := New(cfg, 1); err == nil {
			n.Close()
			t.Errorf("New accepted %+v", cfg)
		}
	}
}
