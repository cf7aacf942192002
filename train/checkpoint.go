package train

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/prismsbi/prism/checkpoint"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
)

// FormatVersion is the version of the checkpoint layout and of state.json.
const FormatVersion = 1

// State is the training state beyond weights and optimiser moments.
type State struct {
	FormatVersion int `json:"format_version"`
	// Step is the number of optimiser steps taken.
	Step int64 `json:"step"`
	// Next is, per design stream, the global index of the next training
	// simulation (Step·BatchSize unless batches were skipped).
	Next []uint64 `json:"next_sample"`
	// Validation is the history of validation losses.
	Validation []ValRecord `json:"validation"`
	// Skipped records batches dropped after a non-finite loss or gradient.
	Skipped []Skip `json:"skipped"`
}

// ValRecord is one validation evaluation (EMA weights).
type ValRecord struct {
	Step      int64   `json:"step"`
	Loss      float64 `json:"loss"`
	MaskLoss  float64 `json:"mask_loss"`
	ParamLoss float64 `json:"param_loss"`
}

// Skip records a step whose batch gave a non-finite loss or gradient: the
// run went back to the checkpoint at RestoredStep and continued after the
// offending batch (Start holds its first sample index per stream).
type Skip struct {
	Step         int64    `json:"step"`
	RestoredStep int64    `json:"restored_step"`
	Start        []uint64 `json:"start"`
	Reason       string   `json:"reason"`
}

// runCheckpoint is a committed checkpoint of a run, in memory.
type runCheckpoint struct {
	cfg     Config
	state   State
	tensors []safetensors.Tensor // parameters and optimiser state
}

// metadata returns the safetensors metadata shared by a run's files.
func metadata(cfg *Config, cfgJSON []byte, step int64, kind, weights string) map[string]string {
	return checkpoint.Metadata(kind, weights, step, cfg.Family, cfgJSON, cfg.Optimizer.optim().Metadata())
}

// saveCheckpoint writes a checkpoint of the given parameters (ps), optimiser
// and state into dir and commits it (checkpoint.Commit: a crash at any
// moment leaves LATEST naming a complete checkpoint, the old or the new
// one).
func saveCheckpoint(dir string, cfg *Config, st *State, params []safetensors.Tensor, opt *optim.Optimizer) error {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("train: checkpoint: config: %w", err)
	}
	stJSON, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("train: checkpoint: state: %w", err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, cfgJSON, "", " "); err != nil {
		return fmt.Errorf("train: checkpoint: config: %w", err)
	}
	return checkpoint.Commit(dir, checkpoint.Name(st.Step), func(tmp string) error {
		all := append(append([]safetensors.Tensor(nil), params...), opt.State()...)
		if err := safetensors.Write(filepath.Join(tmp, checkpoint.CheckpointFile), all,
			metadata(cfg, cfgJSON, st.Step, checkpoint.KindCheckpoint, "")); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
		if err := safetensors.Write(filepath.Join(tmp, checkpoint.EMAFile), opt.EMA(),
			metadata(cfg, cfgJSON, st.Step, checkpoint.KindWeights, "ema")); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
		if err := checkpoint.WriteFile(filepath.Join(tmp, checkpoint.ConfigFile), append(indented.Bytes(), '\n')); err != nil {
			return err
		}
		return checkpoint.WriteFile(filepath.Join(tmp, checkpoint.StateFile), append(stJSON, '\n'))
	})
}

// loadCheckpoint reads the committed checkpoint of dir.
func loadCheckpoint(dir string) (*runCheckpoint, error) {
	name, err := checkpoint.Latest(dir)
	if err != nil {
		return nil, err
	}
	if name == "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		return nil, fmt.Errorf("train: %s holds no checkpoint (no %s file)", dir, checkpoint.LatestFile)
	}
	cdir := filepath.Join(dir, name)
	ck := &runCheckpoint{}
	cfgJSON, err := os.ReadFile(filepath.Join(cdir, checkpoint.ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := decodeStrictJSON(cfgJSON, &ck.cfg); err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", filepath.Join(cdir, checkpoint.ConfigFile), err)
	}
	stJSON, err := os.ReadFile(filepath.Join(cdir, checkpoint.StateFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := decodeStrictJSON(stJSON, &ck.state); err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", filepath.Join(cdir, checkpoint.StateFile), err)
	}
	if ck.state.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("train: checkpoint %s has format version %d, this prism reads %d",
			cdir, ck.state.FormatVersion, FormatVersion)
	}
	ts, meta, err := safetensors.Read(filepath.Join(cdir, checkpoint.CheckpointFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	h, err := checkpoint.ParseHeader(meta)
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", cdir, err)
	}
	if h.Kind != checkpoint.KindCheckpoint {
		return nil, fmt.Errorf("train: checkpoint %s: prism.kind is %q, want %q", cdir, h.Kind, checkpoint.KindCheckpoint)
	}
	ck.tensors = ts
	return ck, nil
}
