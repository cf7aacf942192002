// Package checkpoint owns prism's on-disk format for trained networks and
// is the one place that loads them. A trained network lives either in a
// training run directory (committed checkpoints, written by package train)
// or in a weights file (one safetensors file, e.g. a checkpoint's
// ema.safetensors or a shipped model). Both carry the same small header in
// their safetensors metadata: the family, its spec text for families from
// spec files, the network configuration and provenance (step, which
// weights, the full training configuration). Inference needs nothing else:
// it does not depend on the training code (docs/checkpoint-format.md).
package checkpoint

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// Layout of a training run directory (docs/training.md):
//
//	LATEST                      name of the committed checkpoint directory
//	ckpt-000000001200/
//	  checkpoint.safetensors    parameters + optimiser state (kind "checkpoint")
//	  ema.safetensors           EMA weights for inference (kind "weights", weights "ema")
//	  state.json                step, stream positions, validation history, skips
//	  config.json               the full training configuration
//	log.jsonl                   training log
const (
	LatestFile     = "LATEST"
	CheckpointFile = "checkpoint.safetensors"
	EMAFile        = "ema.safetensors"
	StateFile      = "state.json"
	ConfigFile     = "config.json"
	LogFile        = "log.jsonl"
	// Prefix starts the name of every checkpoint directory.
	Prefix = "ckpt-"
)

// FormatVersion is the prism.format_version of the files this package
// writes and reads.
const FormatVersion = "1"

// Kinds of safetensors file (metadata prism.kind).
const (
	KindCheckpoint = "checkpoint" // parameters and optimiser state of a run
	KindWeights    = "weights"    // parameters only, for inference
)

// Header is what a file's metadata says about its network.
type Header struct {
	Kind    string // KindCheckpoint or KindWeights
	Weights string // which weights a weights file holds ("ema" or "")
	Step    int64  // optimiser steps taken when it was written
	// Family is the family's registry name; Spec and SpecDir hold the spec
	// file's text and directory for a family built from a spec.
	Family, Spec, SpecDir string
	// Network is the network configuration.
	Network network.Config
	// Config is the full training configuration as stored (JSON), kept for
	// provenance; inference reads only the fields above.
	Config json.RawMessage
	// DenoiserCalibration is the weights file's calibration of the
	// parameter denoiser (JSON, posterior.DenoiserCalibration, written by
	// `prism calibrate` under MetaDenoiserCalibration); nil if it has none.
	DenoiserCalibration json.RawMessage
}

// MetaDenoiserCalibration is the metadata key of a weights file's
// denoiser calibration.
const MetaDenoiserCalibration = "prism.denoiser_calibration"

// configHead is the part of the stored training configuration that
// inference needs; other keys are provenance.
type configHead struct {
	Family  string         `json:"family"`
	Spec    string         `json:"spec"`
	SpecDir string         `json:"spec_dir"`
	Network network.Config `json:"network"`
}

// ParseHeader reads the header from a file's safetensors metadata.
func ParseHeader(meta map[string]string) (Header, error) {
	if v := meta["prism.format_version"]; v != FormatVersion {
		return Header{}, fmt.Errorf("unknown prism.format_version %q", v)
	}
	h := Header{Kind: meta["prism.kind"], Weights: meta["prism.weights"], Config: json.RawMessage(meta["prism.config"])}
	if c, ok := meta[MetaDenoiserCalibration]; ok {
		h.DenoiserCalibration = json.RawMessage(c)
	}
	if h.Kind != KindCheckpoint && h.Kind != KindWeights {
		return Header{}, fmt.Errorf("prism.kind %q is neither %q nor %q", h.Kind, KindCheckpoint, KindWeights)
	}
	var c configHead
	if err := json.Unmarshal(h.Config, &c); err != nil {
		return Header{}, fmt.Errorf("prism.config: %w", err)
	}
	h.Family, h.Spec, h.SpecDir, h.Network = c.Family, c.Spec, c.SpecDir, c.Network
	if f := meta["prism.family"]; f != "" && f != h.Family {
		return Header{}, fmt.Errorf("prism.family %q disagrees with the configuration's family %q", f, h.Family)
	}
	if s := meta["prism.step"]; s != "" {
		var err error
		if h.Step, err = strconv.ParseInt(s, 10, 64); err != nil {
			return Header{}, fmt.Errorf("prism.step %q: %w", s, err)
		}
	}
	return h, nil
}

// Metadata returns the safetensors metadata of a file of the given kind
// and weights written at step by a run whose training configuration (JSON)
// is config, for family; extra entries (the optimiser's settings) are
// added as they are.
func Metadata(kind, weights string, step int64, fam string, config []byte, extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range extra {
		m[k] = v
	}
	m["prism.format_version"] = FormatVersion
	m["prism.kind"] = kind
	if weights != "" {
		m["prism.weights"] = weights
	}
	m["prism.step"] = strconv.FormatInt(step, 10)
	m["prism.family"] = fam
	m["prism.config"] = string(config)
	return m
}

// LookupFamily returns the header's family: the registered family of that
// name, or the one its spec text builds.
func (h Header) LookupFamily() (family.Family, error) {
	return family.Resolve(h.Family, h.Spec, h.SpecDir)
}
