package network

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

func TestConfigJSONRoundTrip(t *testing.T) {
	c := DefaultConfig(lookup(t, "b3s"))
	c.MaskDecoder, c.LambdaNodes = CategoricalDecoder, 8
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back != c {
		t.Fatalf("round trip changed the config: %+v → %s → %+v", c, raw, back)
	}
	bad := c
	bad.ModelDim = 63
	if bad.Validate() == nil {
		t.Fatal("odd model_dim accepted")
	}
}

// TestTokenizer checks, for every family, that the parameter tokens tile θ
// in order, that only components with latents get a token, that token
// activity follows Layout.Active and the masks, that the block attention
// mask is outer(a, a) ∨ I, and the shapes of a batch.
func TestTokenizer(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			n := newNet(t, name, tinyConfig, 1)
			l := n.fam.Layout()
			comps := n.fam.Components()
			want := l.FractionLatents() + min(1, len(l.Shared))
			for _, c := range comps {
				if c.Latent > 0 {
					want++
				}
			}
			if len(n.tokens) != want {
				t.Fatalf("%d parameter tokens, want %d", len(n.tokens), want)
			}
			off := 0
			for i, tk := range n.tokens {
				if tk.Off != off || tk.Size <= 0 || tk.Size > n.dPad {
					t.Fatalf("token %d = %+v does not continue θ at %d", i, tk, off)
				}
				off += tk.Size
			}
			if off != l.DMax {
				t.Fatalf("tokens cover %d of %d latent dimensions", off, l.DMax)
			}
			for k, c := range comps {
				if (n.compTok[k] < 0) != (c.Latent == 0) {
					t.Fatalf("component %d (%d latents) has token %d", k, c.Latent, n.compTok[k])
				}
			}

			const b = 5
			s := simulate(n.fam, 11, 0, b)
			var bt Batch
			if err := n.MakeBatch(s, 3, &bt); err != nil {
				t.Fatal(err)
			}
			tt, dm, c := len(n.tokens), l.DMax, len(comps)
			if len(bt.ThetaSigma) != b*dm || len(bt.BitsIn) != b*c || len(bt.TokActive) != b*tt || len(bt.Allow.Allow) != b*tt*tt {
				t.Fatalf("batch sizes θ %d, bits %d, tokens %d, mask %d", len(bt.ThetaSigma), len(bt.BitsIn), len(bt.TokActive), len(bt.Allow.Allow))
			}
			active := make([]bool, dm)
			for i := range b {
				l.Active(s[i].Mask, active)
				for j, a := range active {
					if (bt.Active[i*dm+j] == 1) != a {
						t.Fatalf("sample %d dim %d: loss mask %v, Layout.Active %v", i, j, bt.Active[i*dm+j], a)
					}
				}
				for ti, tk := range n.tokens {
					a := bt.TokActive[i*tt+ti]
					for j := range tk.Size {
						if active[tk.Off+j] != a {
							t.Fatalf("sample %d token %d active %v but dim %d active %v", i, ti, a, tk.Off+j, active[tk.Off+j])
						}
					}
					if tk.Kind == componentToken && a != s[i].Mask[tk.Index] {
						t.Fatalf("component token %d active %v, mask bit %v", ti, a, s[i].Mask[tk.Index])
					}
					for tj := range tt {
						want := (a && bt.TokActive[i*tt+tj]) || ti == tj
						if bt.Allow.Allow[i*tt*tt+ti*tt+tj] != want {
							t.Fatalf("sample %d: attention %d→%d allowed %v, want %v", i, ti, tj, !want, want)
						}
					}
				}
				if bt.BitsIn[i*c] != 2 {
					t.Fatalf("position 0 reads bit row %d, want the start row", bt.BitsIn[i*c])
				}
				for k := 1; k < c; k++ {
					if (bt.BitsIn[i*c+k] == 1) != s[i].Mask[k-1] {
						t.Fatalf("position %d reads %d, want M_%d = %v", k, bt.BitsIn[i*c+k], k-1, s[i].Mask[k-1])
					}
				}
			}
			g := engine.NewGraph()
			enc := n.encode(g, &bt.enc)
			wantT := s[0].Design.N
			if family.ObservationKindOf(n.fam) == family.ObservationGrid {
				wantT = (wantT + n.cfg.Grid.PointsPerToken - 1) / n.cfg.Grid.PointsPerToken
			}
			if !slices.Equal(enc.Shape, []int{b, wantT, n.cfg.ModelDim}) {
				t.Fatalf("encoder output %v, want [%d %d %d]", enc.Shape, b, wantT, n.cfg.ModelDim)
			}
		})
	}
}

// TestMaskDecoderNoLeak flips each mask bit M_i in turn: logits 0…i must
// not move (position i never sees its own target or later bits) and logit
// i+1 must (it does see M_i). Exact equality is expected: attention weights
// of masked keys are exactly zero and rows do not interact.
func TestMaskDecoderNoLeak(t *testing.T) {
	for _, name := range []string{"lingauss-k6", "b3s", "symbolic-k15"} {
		n := newNet(t, name, tinyConfig, 2)
		perturbParams(n, 0.3, 3)
		s := simulate(n.fam, 5, 0, 1)
		c := n.c
		masks := make([][]bool, c+1)
		for i := range masks {
			masks[i] = slices.Clone(s[0].Mask)
			if i < c {
				masks[i][i] = !masks[i][i]
			}
		}
		g := engine.NewInferenceGraph()
		enc := encodeSamples(t, n, g, s[:1])
		lg, err := n.MaskLogits(g, enc, 0.4, masks)
		if err != nil {
			t.Fatal(err)
		}
		ref := lg.Data[c*c : (c+1)*c] // the unflipped mask
		for i := range c {
			row := lg.Data[i*c : (i+1)*c]
			for j := 0; j <= i; j++ {
				if row[j] != ref[j] {
					t.Fatalf("%s: flipping M_%d changed logit %d: %v → %v", name, i, j, ref[j], row[j])
				}
			}
			if i+1 < c && row[i+1] == ref[i+1] {
				t.Fatalf("%s: flipping M_%d left logit %d unchanged: the decoder does not see earlier bits", name, i, i+1)
			}
		}
	}
}

// TestEDMIdentities checks the σ_data = 1 preconditioning against its
// closed-form identities and the v-prediction algebra: the ideal denoiser
// D = θ gives v̂ = v, and v̂ = −F for D = c_skip·θ_σ + c_out·F. All in
// float64; the tolerance is a few ulps of the O(1) quantities.
func TestEDMIdentities(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		sigma := math.Exp(-9 + 14*r.Float64())
		cin, cout, cskip := CIn(sigma), COut(sigma), CSkip(sigma)
		// (θ_σ − D)/σ cancels: its rounding error is ~1e-16·|θ_σ|/σ.
		cancel := 0.0
		check := func(what string, got, want float64) {
			if math.Abs(got-want) > 1e-12*max(1, math.Abs(want))+cancel {
				t.Fatalf("σ = %v: %s = %v, want %v", sigma, what, got, want)
			}
		}
		check("c_skip + c_out²", cskip+cout*cout, 1)
		check("c_in²·(1+σ²)", cin*cin*(1+sigma*sigma), 1)
		check("c_out", cout, sigma*cin)
		check("c_skip", cskip, cin*cin)
		check("c_noise(e^{4u})", CNoise(math.Exp(4*sigma)), sigma)
		theta, eps, f := r.NormFloat64(), r.NormFloat64(), r.NormFloat64()
		ts := theta + sigma*eps
		cancel = 4e-16 * (1 + math.Abs(ts)) / sigma
		check("v̂(D = θ)", VPred(ts, theta, sigma), VTarget(theta, eps, sigma))
		check("v̂(D = c_skip θ_σ + c_out F)", VPred(ts, cskip*ts+cout*f, sigma), -f)
	}
}

// TestDenoiseAtInit: with zero-initialised value decoders F ≡ 0, so at
// initialisation D = c_skip·θ_σ on active dimensions and θ_σ on inactive
// ones (float32 products: relative 1e-6).
func TestDenoiseAtInit(t *testing.T) {
	for _, name := range families {
		n := newNet(t, name, tinyConfig, 4)
		s := simulate(n.fam, 6, 0, 3)
		g := engine.NewInferenceGraph()
		enc := encodeSamples(t, n, g, s)
		masks := [][]bool{s[0].Mask, s[1].Mask, s[2].Mask}
		th := make([]float32, 3*n.dmax)
		r := rand.New(rand.NewPCG(9, 9))
		for i := range th {
			th[i] = float32(3 * r.NormFloat64())
		}
		sig := []float64{0.01, 1, 30}
		d, err := n.Denoise(g, enc, masks, g.Input(th, 3, n.dmax), sig)
		if err != nil {
			t.Fatal(err)
		}
		active := make([]bool, n.dmax)
		for i := range 3 {
			n.layout.Active(masks[i], active)
			for j, a := range active {
				want := float64(th[i*n.dmax+j])
				if a {
					want *= CSkip(sig[i])
				}
				if got := float64(d.Data[i*n.dmax+j]); math.Abs(got-want) > 1e-6*math.Abs(want)+1e-30 {
					t.Fatalf("%s: row %d dim %d: D = %v, want %v", name, i, j, got, want)
				}
			}
		}
	}
}

// TestInactiveParamsCannotInfluence perturbs θ_σ on the inactive
// dimensions (inactive components and fractions): D on the active
// dimensions must not change at all (masked attention weights are exactly
// zero), and D on inactive dimensions stays θ_σ. A perturbation of an
// active dimension must change other active outputs (so the test can
// fail).
func TestInactiveParamsCannotInfluence(t *testing.T) {
	for _, name := range []string{"b3s", "bszt", "symbolic-k15"} {
		n := newNet(t, name, tinyConfig, 5)
		perturbParams(n, 0.3, 6)
		s := simulate(n.fam, 7, 0, 8)
		b, dm := len(s), n.dmax
		masks := make([][]bool, b)
		th := make([]float32, b*dm)
		for i := range s {
			masks[i] = s[i].Mask
			for j, v := range s[i].Theta {
				th[i*dm+j] = float32(v)
			}
		}
		g := engine.NewInferenceGraph()
		enc := encodeSamples(t, n, g, s)
		d0, err := n.Denoise(g, enc, masks, g.Input(th, b, dm), []float64{0.5})
		if err != nil {
			t.Fatal(err)
		}
		th2 := slices.Clone(th)
		r := rand.New(rand.NewPCG(8, 8))
		active := make([]bool, dm)
		perturbed := 0
		for i := range b {
			n.layout.Active(masks[i], active)
			for j, a := range active {
				if !a {
					th2[i*dm+j] += float32(10 * r.NormFloat64())
					perturbed++
				}
			}
		}
		if perturbed == 0 {
			t.Fatalf("%s: no inactive dimension in the test masks", name)
		}
		d1, _ := n.Denoise(g, enc, masks, g.Input(th2, b, dm), []float64{0.5})
		for i := range b {
			n.layout.Active(masks[i], active)
			for j, a := range active {
				k := i*dm + j
				if a && d1.Data[k] != d0.Data[k] {
					t.Fatalf("%s: row %d: inactive θ changed active output %d: %v → %v", name, i, j, d0.Data[k], d1.Data[k])
				}
				if !a && d1.Data[k] != th2[k] {
					t.Fatalf("%s: row %d: inactive output %d = %v, want θ_σ = %v", name, i, j, d1.Data[k], th2[k])
				}
			}
		}
		// Control: moving an active dimension moves other active outputs.
		n.layout.Active(masks[0], active)
		first := slices.Index(active, true)
		th3 := slices.Clone(th)
		th3[first] += 1
		d3, _ := n.Denoise(g, enc, masks, g.Input(th3, b, dm), []float64{0.5})
		moved := false
		for j, a := range active {
			if a && j != first && d3.Data[j] != d0.Data[j] {
				moved = true
			}
		}
		if !moved && family.ActiveCount(active) > 1 {
			t.Fatalf("%s: perturbing active dimension %d changed no other active output", name, first)
		}
	}
}

// TestTokenGatherRoundTrip: for every family, moving θ [B, DMax] into the
// token layout [T, B, dPad] and back through the index tables is the
// identity, padding slots read the zero row, and the assembled per-token
// weights have the shapes the batched products need.
func TestTokenGatherRoundTrip(t *testing.T) {
	for _, name := range families {
		n := newNet(t, name, tinyConfig, 1)
		const b = 3
		gi := n.gatherFor(b)
		dm, dp, tt := n.dmax, n.dPad, len(n.tokens)
		for i, slot := range gi.out {
			if got := gi.in[slot]; int(got) != i {
				t.Fatalf("%s: θ entry %d goes to token slot %d, which reads entry %d", name, i, slot, got)
			}
		}
		pads := 0
		for _, src := range gi.in {
			if int(src) == b*dm {
				pads++
			}
		}
		if pads != tt*b*dp-b*dm {
			t.Fatalf("%s: %d padding slots read the zero row, want %d", name, pads, tt*b*dp-b*dm)
		}
		for s := range b {
			for ti := range tt {
				if gi.toTB[gi.toBT[s*tt+ti]] != int32(s*tt+ti) {
					t.Fatalf("%s: token transposes are not inverse at (%d, %d)", name, s, ti)
				}
			}
		}
		g := engine.NewGraph()
		ids, enc, dec, decB := n.tokenWeights(g)
		d := n.cfg.ModelDim
		if !slices.Equal(ids.Shape, []int{tt, 1, d}) || !slices.Equal(enc.Shape, []int{tt, dp, d}) ||
			!slices.Equal(dec.Shape, []int{tt, d, dp}) || !slices.Equal(decB.Shape, []int{tt, 1, dp}) {
			t.Fatalf("%s: token weights %v %v %v %v", name, ids.Shape, enc.Shape, dec.Shape, decB.Shape)
		}
	}
}

// TestDenoiseMaskedMatchesDenoise checks the active-token path: for every
// mask of a batch, DenoiseMasked over the rows (from several observations,
// in unequal numbers) that carry that mask reproduces Denoise of the whole
// batch. The two differ only in float32 summation order (GEMM blocking
// over a different number of rows), so agreement to 2e-5 relative to the
// output scale is required.
func TestDenoiseMaskedMatchesDenoise(t *testing.T) {
	for _, name := range []string{"b3s", "bszt", "symbolic-k15", "lingauss-k6"} {
		n := newNet(t, name, tinyConfig, 5)
		perturbParams(n, 0.3, 6)
		const nObs, r = 3, 6
		s := simulate(n.fam, 9, 0, nObs)
		dm := n.dmax
		masks := make([][]bool, 0, nObs*r)
		prior := simulate(n.fam, 10, 0, nObs*r)
		th := make([]float32, nObs*r*dm)
		rr := rand.New(rand.NewPCG(3, 3))
		for i := range nObs * r {
			masks = append(masks, prior[i%4].Mask) // four distinct masks at most, shared across observations
			for j := range dm {
				th[i*dm+j] = float32(rr.NormFloat64())
			}
		}
		g := engine.NewInferenceGraph()
		enc := encodeSamples(t, n, g, s)
		const sigma = 0.7
		full, err := n.Denoise(g, enc, masks, g.Input(th, nObs*r, dm), []float64{sigma})
		if err != nil {
			t.Fatal(err)
		}
		scale := 0.0
		for _, v := range full.Data {
			scale = max(scale, math.Abs(float64(v)))
		}
		done := make([]bool, nObs*r)
		for i := range masks {
			if done[i] {
				continue
			}
			var rows, rowObs []int
			for k := i; k < len(masks); k++ {
				if slices.Equal(masks[k], masks[i]) {
					rows, rowObs, done[k] = append(rows, k), append(rowObs, k/r), true
				}
			}
			sub := make([]float32, len(rows)*dm)
			for a, k := range rows {
				copy(sub[a*dm:(a+1)*dm], th[k*dm:(k+1)*dm])
			}
			got, err := n.DenoiseMasked(g, enc, n.ParamCrossKV(g, enc), masks[i], rowObs, g.Input(sub, len(rows), dm), sigma)
			if err != nil {
				t.Fatal(err)
			}
			for a, k := range rows {
				for j := range dm {
					w, v := float64(full.Data[k*dm+j]), float64(got.Data[a*dm+j])
					if math.Abs(w-v) > 2e-5*scale {
						t.Fatalf("%s mask %v row %d dim %d: DenoiseMasked %v, Denoise %v", name, masks[i], k, j, v, w)
					}
				}
			}
		}
	}
}

// TestDenoiseMaskedChunks checks DenoiseMasked on batches large enough to
// be split into row chunks that run concurrently on their own graphs
// (maskedChunks > 1), with observations in unequal numbers of rows so that
// chunk boundaries cut segments, with and without precomputed
// cross-attention keys (and cached token weights, reused at a second noise
// level): every row must match Denoise of the whole batch to the
// summation-order tolerance of TestDenoiseMaskedMatchesDenoise (Denoise
// runs all tokens with an attention mask, other arithmetic), and bit for bit
// DenoiseMasked of each observation's rows on their own in one chunk (the
// kernels compute every row the same wherever it sits in its call).
func TestDenoiseMaskedChunks(t *testing.T) {
	n := newNet(t, "b3s", tinyConfig, 7)
	perturbParams(n, 0.3, 8)
	const nObs, r = 3, 200
	s := simulate(n.fam, 11, 0, nObs)
	dm := n.dmax
	mask := make([]bool, n.c)
	for i := range mask {
		mask[i] = true
	}
	masks := make([][]bool, nObs*r)
	th := make([]float32, nObs*r*dm)
	rr := rand.New(rand.NewPCG(4, 4))
	for i := range masks {
		masks[i] = mask
		for j := range dm {
			th[i*dm+j] = float32(rr.NormFloat64())
		}
	}
	// Observation 1 keeps a third of its rows.
	var rows, rowObs []int
	for k := range nObs * r {
		if k/r != 1 || k%3 == 0 {
			rows, rowObs = append(rows, k), append(rowObs, k/r)
		}
	}
	active := make([]bool, dm)
	n.layout.Active(mask, active)
	tokActive := make([]bool, len(n.tokens))
	n.tokenActivity(mask, active, tokActive)
	nt := 0
	for _, a := range tokActive {
		if a {
			nt++
		}
	}
	if c := maskedChunks(len(rows), nt); c < 2 {
		t.Fatalf("%d rows of %d tokens run as %d chunk(s); the test needs several", len(rows), nt, c)
	}
	g := engine.NewInferenceGraph()
	enc := encodeSamples(t, n, g, s)
	sub := make([]float32, len(rows)*dm)
	for a, k := range rows {
		copy(sub[a*dm:(a+1)*dm], th[k*dm:(k+1)*dm])
	}
	cross := n.ParamCrossKV(g, enc)
	for _, sigma := range []float64{0.7, 3} {
		full, err := n.Denoise(g, enc, masks, g.Input(th, nObs*r, dm), []float64{sigma})
		if err != nil {
			t.Fatal(err)
		}
		scale := 0.0
		for _, v := range full.Data {
			scale = max(scale, math.Abs(float64(v)))
		}
		for _, c := range []*ParamCross{cross, nil} {
			got, err := n.DenoiseMasked(g, enc, c, mask, rowObs, g.Input(sub, len(rows), dm), sigma)
			if err != nil {
				t.Fatal(err)
			}
			for a, k := range rows {
				for j := range dm {
					w, v := float64(full.Data[k*dm+j]), float64(got.Data[a*dm+j])
					if math.Abs(w-v) > 2e-5*scale {
						t.Fatalf("σ %v cross %v row %d dim %d: DenoiseMasked %v, Denoise %v", sigma, c != nil, k, j, v, w)
					}
				}
			}
			for a0 := 0; a0 < len(rows); {
				a1 := a0
				for a1 < len(rows) && rowObs[a1] == rowObs[a0] {
					a1++
				}
				one, err := n.DenoiseMasked(g, enc, c, mask, rowObs[a0:a1], g.Input(sub[a0*dm:a1*dm], a1-a0, dm), sigma)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range one.Data {
					if w := got.Data[a0*dm+i]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("σ %v cross %v row %d dim %d: %v in row chunks, %v with observation %d alone", sigma, c != nil, rows[a0+i/dm], i%dm, w, v, rowObs[a0])
					}
				}
				a0 = a1
			}
		}
	}
}
