package network

import (
	"fmt"

	"github.com/prismsbi/prism/family"
)

// Config fixes the sizes of a PRISM network. It is JSON-serialisable so
// that checkpoints can carry it. Field meanings and the paper's values are
// given beside each field; DefaultConfig documents the sizes chosen for a
// 2-core CPU.
type Config struct {
	// ModelDim is the width D of every token (paper: 32/64/128 symbolic,
	// 128 dMRI).
	ModelDim int `json:"model_dim"`
	// Heads and HeadDim give the attention width Heads·HeadDim (paper: 4
	// heads of size 16).
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim"`
	// MLPWidth is the MLP expansion factor: hidden width MLPWidth·ModelDim
	// (paper: 4).
	MLPWidth int `json:"mlp_width"`
	// EncoderLayers, MaskLayers and ParamLayers are the depths of the
	// observation encoder, the autoregressive model decoder and the
	// diffusion parameter decoder (paper: symbolic 2/6/6, SBMI comparison
	// 2/4/4, B3S 2/4/6, BSZT 2/6/8).
	EncoderLayers int `json:"encoder_layers"`
	MaskLayers    int `json:"mask_layers"`
	ParamLayers   int `json:"param_layers"`
	// MaskDecoder selects the model decoder: "" or "autoregressive" (the
	// paper's) or "categorical" (a prism extension for families with at
	// most MaxCategoricalMasks masks in the prior support; see
	// CategoricalDecoder).
	MaskDecoder string `json:"mask_decoder,omitempty"`
	// LambdaNodes (categorical decoder, training only) is the number J of
	// Gauss–Legendre nodes λ_j on (0, 1) over which each sample's mask loss
	// is averaged, with weights ∝ w_j·p(M | λ_j), the posterior p(λ | M)
	// of the simulator's λ ~ U(0, 1), instead of being taken at the
	// sample's own λ: the same loss without the noise of λ. 0: the
	// sample's own λ.
	LambdaNodes int `json:"lambda_nodes,omitempty"`
	// LambdaStrata (autoregressive decoder, training only; prism
	// extension) is the number J of λ values at which each sample's mask
	// loss is taken and averaged: a stratified draw from the posterior
	// p(λ | M) ∝ p(M | λ) of the simulator's λ ~ U(0, 1) that contains the
	// sample's own λ (see fillLambdaStrata). The loss keeps its
	// expectation and loses the noise of λ; the model decoder runs J times
	// per sample. 0 or 1: the sample's own λ.
	LambdaStrata int `json:"lambda_strata,omitempty"`
	// LambdaEmbed and NoiseEmbed are the Gaussian-Fourier embedding widths
	// of λ (model decoder) and c_noise (parameter decoder) (reference: 64).
	LambdaEmbed int `json:"lambda_embed"`
	NoiseEmbed  int `json:"noise_embed"`
	// PointsPerToken groups consecutive values of grid observations
	// (symbolic, lingauss) into one encoder token (paper: 10).
	PointsPerToken int `json:"points_per_token"`
	// MaxB [s/mm²] is the b-value mapped to +1 by the dMRI encoder's
	// b̃ = 2·clip(b, 0, MaxB)/MaxB − 1 (reference: 4000).
	MaxB float64 `json:"max_b"`
	// BEmbed is the width of the dMRI encoder's Fourier embedding of b̃
	// (reference: 12; the signal and the b-vector are repeated to the same
	// width).
	BEmbed int `json:"b_embed"`
	// TensorFeatures appends to every dMRI token the six unique entries of
	// g gᵀ and of s·g gᵀ (off-diagonals scaled by √2), a prism extension
	// of the reference's token (reference-spec §3.4). Attention pooling of
	// these gives the signal-weighted second moment Σ s_j g_j g_jᵀ, the
	// quantity a diffusion-tensor fit works from, so fibre directions are
	// a smooth function of pooled features instead of something every
	// layer has to discover; the reference width 36 is kept when false.
	TensorFeatures bool `json:"tensor_features,omitempty"`
	// GridLinear (grid families) appends each token's raw values y_j to
	// its features and gives every token position its own input
	// projection (a prism extension; the reference shares one projection
	// and adds a positional embedding). Mean pooling over tokens can then
	// represent any linear statistic Σ_j w_j y_j of the whole grid exactly,
	// such as Φᵀy, the sufficient statistic of a linear-Gaussian model.
	// Meant for data of order one (lingauss); the input width grows by the
	// number of token positions.
	GridLinear bool `json:"grid_linear,omitempty"`
	// Training noise levels: ln σ ~ N(LogSigmaMean, LogSigmaStd²), σ
	// clipped to [SigmaMin, SigmaMax] (reference: −1.2, 1.2, 2e-4, 80).
	LogSigmaMean float64 `json:"log_sigma_mean"`
	LogSigmaStd  float64 `json:"log_sigma_std"`
	SigmaMin     float64 `json:"sigma_min"`
	SigmaMax     float64 `json:"sigma_max"`
}

// DefaultConfig returns the network sizes used on this project's 2-core
// CPU for family f: D = 64, 4 heads × 16, MLP 4×, encoder 2 layers, model
// decoder 4, parameter decoder 4, 64-dim Fourier embeddings of λ and
// c_noise, 10 points per token, MaxB 4000, BEmbed 12 and the reference
// training noise distribution. This is the paper's SBMI-comparison size
// (model_dim 64, decoders 4 layers); the paper's larger runs use
// model_dim 128 and decoders of 6 (symbolic), 4/6 (B3S) or 6/8 (BSZT)
// layers, which cost 4–8× more per step.
func DefaultConfig(f family.Family) Config {
	_ = f // every family currently shares one size; f is kept so per-family sizes can differ later
	return Config{
		ModelDim: 64, Heads: 4, HeadDim: 16, MLPWidth: 4,
		EncoderLayers: 2, MaskLayers: 4, ParamLayers: 4,
		LambdaEmbed: 64, NoiseEmbed: 64,
		PointsPerToken: 10, MaxB: 4000, BEmbed: 12,
		LogSigmaMean: -1.2, LogSigmaStd: 1.2, SigmaMin: 2e-4, SigmaMax: 80,
	}
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.ModelDim <= 0 || c.ModelDim%2 != 0:
		return fmt.Errorf("network: model_dim %d must be positive and even", c.ModelDim)
	case c.Heads <= 0 || c.HeadDim <= 0:
		return fmt.Errorf("network: heads %d and head_dim %d must be positive", c.Heads, c.HeadDim)
	case c.MLPWidth <= 0:
		return fmt.Errorf("network: mlp_width %d must be positive", c.MLPWidth)
	case c.EncoderLayers < 0 || c.MaskLayers <= 0 || c.ParamLayers <= 0:
		return fmt.Errorf("network: layers (encoder %d, mask %d, param %d) invalid: the decoders need at least one", c.EncoderLayers, c.MaskLayers, c.ParamLayers)
	case c.MaskDecoder != "" && c.MaskDecoder != AutoregressiveDecoder && c.MaskDecoder != CategoricalDecoder:
		return fmt.Errorf("network: mask_decoder %q unknown (want %q or %q)", c.MaskDecoder, AutoregressiveDecoder, CategoricalDecoder)
	case c.LambdaNodes < 0 || c.LambdaNodes > 256 || (c.LambdaNodes > 0 && c.MaskDecoder != CategoricalDecoder):
		return fmt.Errorf("network: lambda_nodes %d must be in [0, 256] and needs mask_decoder %q", c.LambdaNodes, CategoricalDecoder)
	case c.LambdaStrata < 0 || c.LambdaStrata > 64 || (c.LambdaStrata > 1 && c.MaskDecoder == CategoricalDecoder):
		return fmt.Errorf("network: lambda_strata %d must be in [0, 64] and needs the autoregressive decoder (the categorical one has lambda_nodes)", c.LambdaStrata)
	case c.LambdaEmbed <= 0 || c.NoiseEmbed <= 0:
		return fmt.Errorf("network: lambda_embed %d and noise_embed %d must be positive", c.LambdaEmbed, c.NoiseEmbed)
	case c.PointsPerToken <= 0:
		return fmt.Errorf("network: points_per_token %d must be positive", c.PointsPerToken)
	case !(c.MaxB > 0):
		return fmt.Errorf("network: max_b %v must be positive", c.MaxB)
	case c.BEmbed <= 0:
		return fmt.Errorf("network: b_embed %d must be positive", c.BEmbed)
	case !(c.LogSigmaStd >= 0) || !(c.SigmaMin > 0) || !(c.SigmaMax >= c.SigmaMin):
		return fmt.Errorf("network: noise distribution (log σ ~ N(%v, %v²), σ ∈ [%v, %v]) invalid", c.LogSigmaMean, c.LogSigmaStd, c.SigmaMin, c.SigmaMax)
	}
	return nil
}
