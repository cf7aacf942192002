package dmri

import "github.com/prismsbi/prism/family"

func init() {
	family.Register("b3s", func() family.Family { return B3S() })
	family.Register("b3s-brain", func() family.Family { return B3SBrain() })
	family.Register("b3s-brain-sorted", func() family.Family { return B3SBrainSorted() })
	family.Register("bszt", func() family.Family { return BSZT() })
	family.Register("bszt-brain", func() family.Family { return BSZTBrain() })
	family.Register("bszt-conv", func() family.Family { return BSZTConv() })
}

// B3SAlpha is the informative B3S fraction prior Dirichlet(3.5, 1, 0.3, 0.1),
// ball first (paper App. C.2).
var B3SAlpha = []float64{3.5, 1.0, 0.3, 0.1}

// B3S returns the multi-shell Ball-and-three-Sticks family of the paper
// (§4.2, App. C.2; reference class MultiShellBall3StickSharedDiffusivity):
// components [Ball, Stick1, Stick2, Stick3, GaussianNoise]; Ball and Sticks
// share a Gamma-distributed diffusivity with mean d ~ U(0, 0.01) and
// standard deviation d_std ~ U(0, 0.005) mm²/s; fractions
// Dirichlet(3.5, 1, 0.3, 0.1); SNR ~ U(3, 80). The mask prior is
// Bernoulli(λ) on the four compartments with at least one forced on.
// θ has 3 + 2 + 0 + 3·2 + 1 = 12 dimensions.
func B3S() *Model { return mustNew(b3sSpec()) }

// b3sSpec is the paper's B3S specification, which b3s-brain modifies.
func b3sSpec() Spec {
	return Spec{
		Name:         "b3s",
		Description:  "multi-shell ball + 3 sticks, shared Gamma diffusivity, Dirichlet(3.5,1,0.3,0.1) fractions, Gaussian noise",
		Compartments: []Compartment{MultiShellBall, MultiShellStick, MultiShellStick, MultiShellStick},
		Noise:        []Noise{Gaussian},
		Alpha:        B3SAlpha,
		MaskPrior:    family.BernoulliPrior{NumBase: 4, NumNoise: 1, MinActive: 1},
	}
}

// mustNew builds a registered family from a spec that is known to be valid.
func mustNew(spec Spec) *Model {
	m, err := New(spec)
	if err != nil {
		panic(err)
	}
	return m
}

// B3SBrain returns b3s with priors for in-vivo brain tissue instead of the
// paper's (a prism extension, docs/dmri.md): the same compartments, noise
// and mask prior, but the shared diffusivity's mean d ~ U(1e−4, 3.5e−3)
// (white and grey matter up to free water at 37 °C, instead of up to
// 0.01) and standard deviation d_std ~ U(0, 2e−3) mm²/s, and uniform
// fractions Dirichlet(1, 1, 1, 1) over the active compartments (as the
// paper's BSZT). Under the paper's prior most simulations have d > 3.5e−3
// and a ball fraction near 0.7 with second and third sticks of a few
// percent, so a network trained on it sees few voxels like white-matter
// crossings (d ≈ 1.5e−3, two sticks of 0.3–0.4) and does not learn to
// count fibres there (docs/validation.md).
func B3SBrain() *Model {
	// Built from b3s's spec, so that the components (and with them a
	// network's tensors, for warm starts) stay those of b3s.
	spec := b3sSpec()
	spec.Name = "b3s-brain"
	spec.Description = "b3s with in-vivo brain priors: d ~ U(1e-4, 3.5e-3), d_std ~ U(0, 2e-3) mm²/s, uniform Dirichlet fractions"
	spec.Alpha = []float64{1, 1, 1, 1}
	spec.SharedD, spec.SharedDStd = Range{1e-4, 3.5e-3}, Range{0, 2e-3}
	return mustNew(spec)
}

// B3SBrainSorted returns b3s-brain with its sticks in canonical order
// (Spec.SortSticks, issue 20): every prior draw has its active sticks first,
// by decreasing fraction, as BedpostX labels them, so that the training
// data break the exchangeability of the sticks and a network learns one
// mode of the parameter posterior instead of a mixture of its relabellings.
// The models are b3s-brain's up to relabelling: its mask prior is the
// distribution of the packed mask (SortedPrior), so its model list has 7
// masks (at most one per set of components up to the sticks' labels).
func B3SBrainSorted() *Model {
	spec := B3SBrain().spec
	spec.Name = "b3s-brain-sorted"
	spec.Description = "b3s-brain with sticks in canonical order (active first, by decreasing fraction)"
	spec.MaskPrior = b3sSpec().MaskPrior
	spec.SortSticks = true
	return mustNew(spec)
}

// BSZT returns the Ball–Stick–Zeppelin–Tensor family of the paper (App. C.2;
// reference class AllGaussianModelsParamCountPrior): components [Ball,
// Stick1–3, Zeppelin1–3, Tensor1–3, GaussianNoise, RicianNoise], every
// compartment with its own parameters, uniform Dirichlet(1, …, 1)
// fractions over the 10 compartments, SNR ~ U(3, 80) for either noise
// model, and the paper's dimension-penalised mask prior
// (logit p_k = logit(0.5) − (1−λ)·4·dim_k with dim_k the compartment's
// latent dimension). θ has 9 + 1 + 9 + 12 + 18 + 2 = 51 dimensions.
func BSZT() *Model { return mustNew(bsztSpec()) }

// BSZTBrain returns bszt with in-vivo priors for the own diffusivities of
// its balls, sticks and zeppelins, d ~ U(1e−4, 3.5e−3) mm²/s instead of
// the paper's U(0, 0.01), as b3s-brain does for b3s (a prism extension,
// docs/dmri.md): white and grey matter (1–2·10⁻³) are in the bulk of the
// prior instead of its lowest 10–20 %, where a network trained on bszt
// called every white-matter-like voxel "Ball" (docs/validation.md,
// model-selection phantom). Components, noise models, tensor prior and
// mask prior are bszt's, so bszt's networks warm-start it.
func BSZTBrain() *Model {
	spec := bsztSpec()
	spec.Name = "bszt-brain"
	spec.Description = "bszt with in-vivo diffusivity priors U(1e-4, 3.5e-3) mm²/s for balls, sticks and zeppelins"
	spec.Diffusivity = Range{1e-4, 3.5e-3}
	return mustNew(spec)
}

// bsztSpec is the paper's BSZT specification, which bszt-brain modifies.
func bsztSpec() Spec {
	comps := []Compartment{Ball, Stick, Stick, Stick, Zeppelin, Zeppelin, Zeppelin, Tensor, Tensor, Tensor}
	alpha := make([]float64, len(comps))
	dims := make([]int, len(comps))
	for k, c := range comps {
		alpha[k] = 1
		dims[k] = c.latents()
	}
	return Spec{
		Name:         "bszt",
		Description:  "ball, 3 sticks, 3 zeppelins, 3 tensors, uniform fractions, Gaussian or Rician noise, dimension-penalised prior",
		Compartments: comps,
		Noise:        []Noise{Gaussian, Rician},
		Alpha:        alpha,
		MaskPrior:    family.DimPenalisedPrior{Dims: dims, NumNoise: 2, P0: family.DefaultP0, LambdaMax: family.DefaultLambdaMax},
	}
}

// BSZTConvCompartments are the 19 signal compartments of bszt-conv in mask
// order: the BSZT list, then Dot and the dispersed compartments.
var BSZTConvCompartments = []Compartment{
	Ball, Stick, Stick, Stick, Zeppelin, Zeppelin, Zeppelin, Tensor, Tensor, Tensor,
	Dot, WatsonStick, WatsonZeppelin, BinghamStick, BinghamZeppelin,
	NODDIWatson, NODDIBingham, SANDIWatson, SANDIBingham,
}

// BSZTConv returns the BSZT+conv family of the paper (§4.2.2, App. C.2;
// reference class AllGaussianAndConvolvedModels): the BSZT compartments plus
// Dot, Watson and Bingham sticks and zeppelins, NODDI and SANDI with Watson
// and Bingham ODFs (19 compartments), Gaussian and Rician noise (C = 21),
// uniform Dirichlet(1, …, 1) fractions and the dimension-penalised mask
// prior. θ has 18 + 40 + 54 + 2 = 114 dimensions.
func BSZTConv() *Model {
	comps := BSZTConvCompartments
	alpha := make([]float64, len(comps))
	dims := make([]int, len(comps))
	for k, c := range comps {
		alpha[k] = 1
		dims[k] = c.latents()
	}
	return mustNew(Spec{
		Name:         "bszt-conv",
		Description:  "bszt + dot, Watson/Bingham sticks and zeppelins, NODDI and SANDI (Watson, Bingham); uniform fractions, Gaussian or Rician noise, dimension-penalised prior",
		Compartments: append([]Compartment(nil), comps...),
		Noise:        []Noise{Gaussian, Rician},
		Alpha:        alpha,
		MaskPrior:    family.DimPenalisedPrior{Dims: dims, NumNoise: 2, P0: family.DefaultP0, LambdaMax: family.DefaultLambdaMax},
	})
}
