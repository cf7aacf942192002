package network

import (
	"bytes"
	"encoding/json"
	"errors"
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
	// Grid and Diffusion configure the observation encoders' input
	// embeddings; the family's observation kind chooses which one a network
	// uses (family.ObservationKindOf), the other is ignored.
	Grid      GridEncoderConfig      `json:"grid"`
	Diffusion DiffusionEncoderConfig `json:"diffusion"`
	Points    PointsEncoderConfig    `json:"points"`
	// Training noise levels: ln σ ~ N(LogSigmaMean, LogSigmaStd²), σ
	// clipped to [SigmaMin, SigmaMax] (reference: −1.2, 1.2, 2e-4, 80).
	LogSigmaMean float64 `json:"log_sigma_mean"`
	LogSigmaStd  float64 `json:"log_sigma_std"`
	SigmaMin     float64 `json:"sigma_min"`
	SigmaMax     float64 `json:"sigma_max"`
}

// GridEncoderConfig configures the input embedding of grid observations
// (family.ObservationGrid: symbolic regression, lingauss, spec families).
type GridEncoderConfig struct {
	// PointsPerToken groups consecutive values into one encoder token
	// (paper: 10).
	PointsPerToken int `json:"points_per_token"`
	// Linear appends each token's raw values y_j to its features and gives
	// every token position its own input projection (a prism extension;
	// the reference shares one projection and adds a positional
	// embedding). Mean pooling over tokens can then represent any linear
	// statistic Σ_j w_j y_j of the whole grid exactly, such as Φᵀy, the
	// sufficient statistic of a linear-Gaussian model. Meant for data of
	// order one (lingauss); the input width grows by the number of token
	// positions.
	Linear bool `json:"linear,omitempty"`
}

// DiffusionEncoderConfig configures the input embedding of diffusion MRI
// observations (family.ObservationDiffusion: one token per measurement
// (b, gx, gy, gz, signal)).
type DiffusionEncoderConfig struct {
	// MaxB [s/mm²] is the b-value mapped to +1 by
	// b̃ = 2·clip(b, 0, MaxB)/MaxB − 1 (reference: 4000).
	MaxB float64 `json:"max_b"`
	// BEmbed is the width of the Fourier embedding of b̃ (reference: 12;
	// the signal and the b-vector are repeated to the same width).
	BEmbed int `json:"b_embed"`
	// TensorFeatures appends to every token the six unique entries of
	// g gᵀ and of s·g gᵀ (off-diagonals scaled by √2), a prism extension
	// of the reference's token. Attention pooling of these gives the
	// signal-weighted second moment Σ s_j g_j g_jᵀ, the quantity a
	// diffusion-tensor fit works from, so fibre directions are a smooth
	// function of pooled features instead of something every layer has to
	// discover; the reference width 36 is kept when false.
	TensorFeatures bool `json:"tensor_features,omitempty"`
}

// PointsEncoderConfig configures the input embedding of observations
// measured at covariate values of their own (family.ObservationPoints).
type PointsEncoderConfig struct {
	// Fourier is the width of the learnable Gaussian-Fourier embedding of
	// the scaled covariate.
	Fourier int `json:"fourier"`
}

// UnmarshalJSON reads a Config strictly (unknown keys are errors) and also
// accepts the flat keys of checkpoints and configuration files written
// before the encoders had their own sections: points_per_token and
// grid_linear (now grid.points_per_token, grid.linear), max_b, b_embed and
// tensor_features (now diffusion.…). A key given both ways must agree.
func (c *Config) UnmarshalJSON(data []byte) error {
	type plain Config // without methods: no recursion
	var v struct {
		plain
		PointsPerToken *int     `json:"points_per_token"`
		GridLinear     *bool    `json:"grid_linear"`
		MaxB           *float64 `json:"max_b"`
		BEmbed         *int     `json:"b_embed"`
		TensorFeatures *bool    `json:"tensor_features"`
	}
	v.plain = plain(*c)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	// A legacy key overrides the default (or earlier) value in *c unless
	// the new section set a different value from the same document.
	var fresh struct {
		Grid      *json.RawMessage `json:"grid"`
		Diffusion *json.RawMessage `json:"diffusion"`
	}
	_ = json.Unmarshal(data, &fresh) // the strict decode above already accepted data
	out := Config(v.plain)
	g, d := fresh.Grid != nil, fresh.Diffusion != nil
	if err := errors.Join(
		adoptLegacy("points_per_token", v.PointsPerToken, &out.Grid.PointsPerToken, g),
		adoptLegacy("grid_linear", v.GridLinear, &out.Grid.Linear, g),
		adoptLegacy("max_b", v.MaxB, &out.Diffusion.MaxB, d),
		adoptLegacy("b_embed", v.BEmbed, &out.Diffusion.BEmbed, d),
		adoptLegacy("tensor_features", v.TensorFeatures, &out.Diffusion.TensorFeatures, d),
	); err != nil {
		return err
	}
	*c = out
	return nil
}

// adoptLegacy copies the value of a legacy top-level key (nil: not given)
// into its section's field dst; when the document also has the section
// and dst holds a different value, that is an error.
func adoptLegacy[T comparable](name string, old, dst *T, sectionGiven bool) error {
	if old == nil {
		return nil
	}
	if sectionGiven && *dst != *old {
		return fmt.Errorf("network: %s is given both at the top level and in its encoder section, with different values", name)
	}
	*dst = *old
	return nil
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
		Grid:         GridEncoderConfig{PointsPerToken: 10},
		Diffusion:    DiffusionEncoderConfig{MaxB: 4000, BEmbed: 12},
		Points:       PointsEncoderConfig{Fourier: 16},
		LogSigmaMean: -1.2, LogSigmaStd: 1.2, SigmaMin: 2e-4, SigmaMax: 80,
	}
}

// Validate reports the first invalid field of c. The encoder sections are
// checked by the encoder of the family's observation kind, which alone
// reads its section.
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
	case !(c.LogSigmaStd >= 0) || !(c.SigmaMin > 0) || !(c.SigmaMax >= c.SigmaMin):
		return fmt.Errorf("network: noise distribution (log σ ~ N(%v, %v²), σ ∈ [%v, %v]) invalid", c.LogSigmaMean, c.LogSigmaStd, c.SigmaMin, c.SigmaMax)
	}
	return nil
}

// SameFor reports whether a and b build the same network for family f:
// equal in every field but the input-embedding sections of observation
// kinds f does not have (files written before a section existed lack it)
// and the training noise distribution (LogSigmaMean, LogSigmaStd,
// SigmaMin, SigmaMax), which only MakeBatch reads: it changes what a run
// trains on, not the tensors or the function they compute, so weights
// trained under one distribution can be fine-tuned under another.
func SameFor(f family.Family, a, b Config) bool {
	kind := family.ObservationKindOf(f)
	for _, c := range []*Config{&a, &b} {
		c.LogSigmaMean, c.LogSigmaStd, c.SigmaMin, c.SigmaMax = 0, 0, 0, 0
		if kind != family.ObservationGrid {
			c.Grid = GridEncoderConfig{}
		}
		if kind != family.ObservationDiffusion {
			c.Diffusion = DiffusionEncoderConfig{}
		}
		if kind != family.ObservationPoints {
			c.Points = PointsEncoderConfig{}
		}
	}
	return a == b
}
