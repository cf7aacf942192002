package network

import "math"

// EDM preconditioning with σ_data = 1 (Karras et al. 2022,
// as the reference implementation). The denoiser is D(θ_σ; σ) = c_skip(σ)·θ_σ + c_out(σ)·F(c_in(σ)·θ_σ;
// c_noise(σ)), with F the parameter decoder's transformer.

// CIn is c_in(σ) = 1/√(σ² + 1): scales θ_σ to unit variance.
func CIn(sigma float64) float64 { return 1 / math.Sqrt(1+sigma*sigma) }

// COut is c_out(σ) = σ/√(σ² + 1): the scale of the network's correction.
func COut(sigma float64) float64 { return sigma / math.Sqrt(1+sigma*sigma) }

// CSkip is c_skip(σ) = 1/(σ² + 1): the weight of the skip connection.
func CSkip(sigma float64) float64 { return 1 / (1 + sigma*sigma) }

// CNoise is c_noise(σ) = ¼·ln σ: the noise level the decoder is
// conditioned on (through AdaLN on its Fourier embedding).
func CNoise(sigma float64) float64 { return 0.25 * math.Log(sigma) }

// VTarget is the v-prediction target of one latent dimension,
// v = α̂·ε − σ̂·θ with α̂ = 1/√(1+σ²) and σ̂ = σ/√(1+σ²).
//
// With σ_data = 1 the prediction v̂ = α̂·(θ_σ − D)/σ − σ̂·D equals −F
// exactly (insert D = c_skip·θ_σ + c_out·F), and the reference's loss weight
// is w ≡ 1, so the v-loss Σ(v̂ − v)² is the EDM loss Σ(F − F*)² with the
// network target F* = −v = (σ·θ − ε)/√(1+σ²). Loss trains F against F*.
func VTarget(theta, eps, sigma float64) float64 {
	r := math.Sqrt(1 + sigma*sigma)
	return (eps - sigma*theta) / r
}

// VPred is the v-prediction of a denoiser output d at θ_σ (the explicit
// formula v̂ = α̂·(θ_σ − D)/σ − σ̂·D).
func VPred(thetaSigma, d, sigma float64) float64 {
	r := math.Sqrt(1 + sigma*sigma)
	return (thetaSigma-d)/(sigma*r) - sigma/r*d
}
