package network

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/integrate/quad"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// Model decoders (Config.MaskDecoder).
const (
	// AutoregressiveDecoder is the paper's model decoder: q(M | x, λ) =
	// Π_i Bern(M_i; σ(logit_i(M_{<i}, x, λ))) under causal self-attention.
	AutoregressiveDecoder = "autoregressive"
	// CategoricalDecoder is a prism extension for families whose prior
	// support holds at most MaxCategoricalMasks masks: one categorical over
	// the whole support S,
	//
	//	q(M | x, λ) = softmax_{M ∈ S}( f(x, M) + log p(M | λ) ),
	//
	// where f is the network's output and log p(M | λ) the family's exact
	// prior, added as a constant. The exact model posterior has this form
	// with f = log p(x | M) (plus anything constant in M), which does not
	// depend on λ, so the network is not given λ at all: every simulation,
	// whatever its λ, trains the same function f, and the posterior's
	// dependence on λ is exact by construction.
	CategoricalDecoder = "categorical"
)

// MaxCategoricalMasks bounds the prior support of a family for the
// categorical model decoder (its output layer has one unit per mask), and
// maxCategoricalComponents the number of components whose 2^C masks are
// enumerated to find that support.
const (
	MaxCategoricalMasks      = 4096
	maxCategoricalComponents = 20
)

// categorical is the state of a categorical model decoder: the prior
// support in a fixed order and the index of each of its masks.
type categorical struct {
	masks [][]bool         // support S, in increasing order of the bit code Σ M_k 2^k
	class map[uint32]int32 // bit code → index in masks
	prior family.MaskPriorTable

	// λ quadrature (Config.LambdaNodes): the Gauss–Legendre nodes on
	// (0, 1), the prior bias of every class at each node ([J][|S|]) and
	// each class's normalised node weights ([|S|][J], see planLambdaNodes).
	nodes      []float64
	nodeBias   [][]float32
	nodeWeight [][]float64
}

// supportLambda is the λ at which the prior support is enumerated. Every
// prior in the project has the same support for all λ in (0, 1) (λ is
// clipped away from 0 and 1).
const supportLambda = 0.5

// planCategorical enumerates the prior support of the network's family.
func (n *Net) planCategorical() error {
	if n.c > maxCategoricalComponents {
		return fmt.Errorf("network: mask_decoder categorical enumerates 2^C masks; %s has C = %d > %d", n.fam.Name(), n.c, maxCategoricalComponents)
	}
	prior := n.fam.MaskPrior()
	cat := &categorical{class: map[uint32]int32{}}
	m := make([]bool, n.c)
	for code := uint32(0); code < 1<<n.c; code++ {
		family.MaskFromCode(code, m)
		if math.IsInf(prior.LogProb(m, supportLambda), -1) {
			continue
		}
		if len(cat.masks) == MaxCategoricalMasks {
			return fmt.Errorf("network: mask_decoder categorical needs a prior support of at most %d masks; %s has more", MaxCategoricalMasks, n.fam.Name())
		}
		cat.class[code] = int32(len(cat.masks))
		cat.masks = append(cat.masks, append([]bool(nil), m...))
	}
	if len(cat.masks) == 0 {
		return fmt.Errorf("network: the mask prior of %s has an empty support", n.fam.Name())
	}
	cat.prior = family.NewMaskPriorTable(prior, cat.masks)
	n.cat = cat
	if j := n.cfg.LambdaNodes; j > 0 {
		n.planLambdaNodes(j)
	}
	return nil
}

// planLambdaNodes precomputes the λ quadrature of the mask loss. With
// λ ~ ρ (U(0, 1) unless SetTrainingLambda said otherwise) the posterior of
// λ given a simulated mask is p(λ | M) ∝ ρ(λ) p(M | λ), so
// E[g(λ) | M] ≈ Σ_j w_j(M) g(λ_j) with the J-point Gauss–Legendre rule
// (nodes λ_j, weights v_j) and
//
//	w_j(M) = v_j ρ(λ_j) p(M | λ_j) / Σ_j' v_j' ρ(λ_j') p(M | λ_j').
//
// The rule is exact for polynomials of degree < 2J, which includes the
// Bernoulli priors' p(M | λ) = c·λ^a (1−λ)^b (times ρ's polynomial, and
// any polynomial of degree < 2J − C − deg ρ). The normalisation makes
// Σ_M p_ρ(M)·w_j(M)/(ρ(λ_j) p(M | λ_j)) the quadrature of
// ∫ ρ(λ) p(M | λ) dλ = p_ρ(M), so the loss's minimiser is still the exact
// posterior: q(M | x, λ_j) ∝ p(x | M) p(M | λ_j) wherever the rule
// integrates ρ(λ) p(M | λ) exactly, and close to it elsewhere.
func (n *Net) planLambdaNodes(j int) {
	cat := n.cat
	k := len(cat.masks)
	cat.nodes = make([]float64, j)
	v := make([]float64, j)
	quad.Legendre{}.FixedLocations(cat.nodes, v, 0, 1)
	logp := make([][]float64, j)
	cat.nodeBias = make([][]float32, j)
	for i, l := range cat.nodes {
		cat.nodeBias[i] = make([]float32, k)
		logp[i] = n.priorBias(l, cat.nodeBias[i], nil)
	}
	cat.nodeWeight = make([][]float64, k)
	for c := range k {
		w := make([]float64, j)
		for i := range j {
			w[i] = math.Log(v[i]*n.trainLambda.Density(cat.nodes[i])) + logp[i][c]
		}
		z := floats.LogSumExp(w)
		for i := range w {
			w[i] = math.Exp(w[i] - z)
		}
		cat.nodeWeight[c] = w
	}
}

// Categorical reports whether the network's model decoder is categorical.
func (n *Net) Categorical() bool { return n.cat != nil }

// SupportMasks returns the masks of the categorical decoder's classes in
// class order (nil for the autoregressive decoder). The slices are shared:
// do not modify them.
func (n *Net) SupportMasks() [][]bool {
	if n.cat == nil {
		return nil
	}
	return n.cat.masks
}

// classOf returns the class of mask m, or −1 outside the prior support.
func (n *Net) classOf(m []bool) int32 {
	if c, ok := n.cat.class[family.MaskCode(m)]; ok {
		return c
	}
	return -1
}

// priorBias writes log p(M | λ) of every class into dst (length |S|),
// using scratch (reused if it has room) and returning it. log p is finite
// on the support for λ in (0, 1); a −Inf at λ = 0 or 1 (priors that do not
// clip λ) becomes −1e30, which the softmax turns into probability 0
// without producing NaN.
func (n *Net) priorBias(lambda float64, dst []float32, scratch []float64) []float64 {
	scratch = resize(scratch, len(dst))
	n.cat.prior.LogProbs(lambda, scratch)
	for j, lp := range scratch {
		dst[j] = float32(max(lp, -1e30))
	}
	return scratch
}

// categoricalForward returns f(x, M) for every class, [Be, |S|], for the
// Be observations encoded in enc: the model decoder runs without a causal
// mask on C tokens that carry the component identities (and the bit
// embedding's start row), its AdaLN condition fixed at 0 (no λ), and a
// linear head maps the flattened [C·D] output to one unit per class.
func (n *Net) categoricalForward(g *engine.Graph, enc *engine.Tensor) *engine.Tensor {
	be, c, d := enc.Shape[0], n.c, n.cfg.ModelDim
	bits := make([]int32, be*c)
	for i := range bits {
		bits[i] = 2
	}
	x := g.Add(g.Embedding(n.bit, bits, be, c), n.maskTokens(g))
	mods := n.mdec.modulations(g, g.Input([]float32{0}, 1, 1))
	kv := n.mdec.crossKV(g, enc)
	h := n.mdec.decode(g, n.cfg.Heads, x, mods, kv, engine.Mask{}, nil)
	return g.Linear(g.Reshape(h, be, c*d), n.catW, n.catB)
}

// categoricalLogQ returns log q(M | x, λ) of every class for every encoded
// observation, observation-major ([Be·|S|]), in float64.
func (n *Net) categoricalLogQ(g *engine.Graph, enc *engine.Tensor, lambda float64) []float64 {
	f := n.categoricalForward(g, enc)
	k := len(n.cat.masks)
	bias := make([]float32, k)
	n.priorBias(lambda, bias, nil)
	out := make([]float64, f.Size())
	for s := range f.Shape[0] {
		row, lq := f.Data[s*k:(s+1)*k], out[s*k:(s+1)*k]
		for j, v := range row {
			lq[j] = float64(v) + float64(bias[j])
		}
		floats.AddConst(-floats.LogSumExp(lq), lq)
	}
	return out
}

// MaskLogProbs returns log q(M | x, λ) of the given masks, written into
// out (reused if it has room), for either model decoder. As for
// MaskLogits, enc holds Be encoded observations and the rows of masks are
// split evenly over them, observation-major. Masks outside the prior
// support get −Inf under the categorical decoder.
func (n *Net) MaskLogProbs(g *engine.Graph, enc *engine.Tensor, lambda float64, masks [][]bool, out []float64) ([]float64, error) {
	if n.cat == nil {
		logits, err := n.MaskLogits(g, enc, lambda, masks)
		if err != nil {
			return out, err
		}
		return MaskLogProb(logits, masks, out), nil
	}
	per, err := rowsPerObs(enc, len(masks))
	if err != nil {
		return out, err
	}
	for i, m := range masks {
		if len(m) != n.c {
			return out, fmt.Errorf("network: mask %d has %d entries, want %d", i, len(m), n.c)
		}
	}
	lq := n.categoricalLogQ(g, enc, lambda)
	k := len(n.cat.masks)
	out = resize(out, len(masks))
	for i, m := range masks {
		out[i] = math.Inf(-1)
		if c := n.classOf(m); c >= 0 {
			out[i] = lq[(i/per)*k+int(c)]
		}
	}
	return out, nil
}

// sampleCategorical draws count masks per encoded observation by inverse
// CDF, one rng.Float64 per mask in row order (observation-major, as
// SampleMasks).
func (n *Net) sampleCategorical(enc *engine.Tensor, lambda float64, count int, rng *rand.Rand, masks [][]bool, logq []float64) {
	g := engine.NewInferenceGraph()
	lq := n.categoricalLogQ(g, enc, lambda)
	k := len(n.cat.masks)
	cdf := make([]float64, k)
	for s := range enc.Shape[0] {
		row := lq[s*k : (s+1)*k]
		acc := 0.0
		for j, v := range row {
			acc += math.Exp(v)
			cdf[j] = acc
		}
		for r := range count {
			u := rng.Float64() * acc
			// The first class whose CDF exceeds u (never a class of zero mass).
			j := min(sort.Search(k, func(j int) bool { return cdf[j] > u }), k-1)
			i := s*count + r
			copy(masks[i], n.cat.masks[j])
			logq[i] = row[j]
		}
	}
}

// SetTrainingLambda tells the network the distribution ρ of its training
// simulations' λ (family.SimOptions.LambdaDist), which the λ quadrature
// (LambdaNodes) and strata (LambdaStrata) of the mask loss weight by:
// p(λ | M) ∝ ρ(λ) p(M | λ). Training only; inference does not use it.
// The default is U(0, 1).
func (n *Net) SetTrainingLambda(d family.LambdaDist) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	n.trainLambda = d
	if n.cat != nil && len(n.cat.nodes) > 0 {
		n.planLambdaNodes(len(n.cat.nodes))
	}
	return nil
}
