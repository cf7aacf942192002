package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/network"
)

// Checkpoint layout inside the output directory (docs/training.md):
//
//	LATEST                      name of the committed checkpoint directory
//	ckpt-000000001200/
//	  checkpoint.safetensors    parameters + optimiser state (kind "checkpoint")
//	  ema.safetensors           EMA weights for inference (kind "weights", weights "ema")
//	  state.json                step, stream positions, validation history, skips
//	  config.json               the full Config
//	log.jsonl                   training log
const (
	LatestFile     = "LATEST"
	CheckpointFile = "checkpoint.safetensors"
	EMAFile        = "ema.safetensors"
	StateFile      = "state.json"
	ConfigFile     = "config.json"
	LogFile        = "log.jsonl"
	ckptPrefix     = "ckpt-"
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

// checkpoint is a checkpoint in memory.
type checkpoint struct {
	cfg     Config
	state   State
	tensors []safetensors.Tensor // parameters and optimiser state
}

func ckptName(step int64) string { return fmt.Sprintf("%s%012d", ckptPrefix, step) }

// latest returns the name of the committed checkpoint of dir, or "" if
// there is none.
func latest(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, LatestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	name := strings.TrimSpace(string(b))
	if !strings.HasPrefix(name, ckptPrefix) || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("train: %s: %q is not a checkpoint name", filepath.Join(dir, LatestFile), name)
	}
	return name, nil
}

// LatestCheckpoint returns the name of dir's committed checkpoint
// directory (e.g. "ckpt-000000001200"), or "" if there is none.
func LatestCheckpoint(dir string) string {
	name, err := latest(dir)
	if err != nil {
		return ""
	}
	return name
}

// IsCheckpointDir reports whether dir holds a committed checkpoint.
func IsCheckpointDir(dir string) bool {
	name, err := latest(dir)
	return err == nil && name != ""
}

// metadata returns the safetensors metadata shared by a run's files.
func metadata(cfg *Config, cfgJSON []byte, step int64, kind, weights string) map[string]string {
	m := cfg.Optimizer.optim().Metadata()
	m["prism.format_version"] = "1"
	m["prism.kind"] = kind
	if weights != "" {
		m["prism.weights"] = weights
	}
	m["prism.step"] = strconv.FormatInt(step, 10)
	m["prism.family"] = cfg.Family
	m["prism.config"] = string(cfgJSON)
	return m
}

// saveCheckpoint writes a checkpoint of the given parameters (ps), optimiser
// and state into dir and commits it: every file is written to a temporary
// name, fsynced and renamed, the whole checkpoint goes into a temporary
// directory that is renamed to ckpt-STEP, and only then LATEST is replaced
// (atomically) to point at it. A crash at any moment leaves LATEST naming a
// complete checkpoint, the old or the new one. Older checkpoint
// directories are removed after the commit.
func saveCheckpoint(dir string, cfg *Config, st *State, params []safetensors.Tensor, opt *optim.Optimizer) error {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("train: checkpoint: config: %w", err)
	}
	stJSON, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("train: checkpoint: state: %w", err)
	}
	name := ckptName(st.Step)
	old, err := latest(dir)
	if err != nil {
		return err
	}
	if old == name {
		return nil // already committed at this step
	}
	tmp, err := os.MkdirTemp(dir, "."+name+".tmp-")
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	defer os.RemoveAll(tmp)       // no-op after the rename
	defer atomicfile.Track(tmp)() // removed if the process is stopped by a signal
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	all := append(append([]safetensors.Tensor(nil), params...), opt.State()...)
	if err := safetensors.Write(filepath.Join(tmp, CheckpointFile), all,
		metadata(cfg, cfgJSON, st.Step, "checkpoint", "")); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := safetensors.Write(filepath.Join(tmp, EMAFile), opt.EMA(),
		metadata(cfg, cfgJSON, st.Step, "weights", "ema")); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, cfgJSON, "", " "); err != nil {
		return fmt.Errorf("train: checkpoint: config: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(tmp, ConfigFile), append(indented.Bytes(), '\n')); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(tmp, StateFile), append(stJSON, '\n')); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	// A directory of this name can only be a leftover of a crash between
	// this rename and the commit below (LATEST names another one).
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, LatestFile), []byte(name+"\n")); err != nil {
		return err
	}
	return cleanStale(dir, name)
}

// cleanStale removes checkpoint directories and temporaries other than keep.
func cleanStale(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		stale := (strings.HasPrefix(n, ckptPrefix) && n != keep) ||
			strings.HasPrefix(n, "."+ckptPrefix) || strings.HasPrefix(n, "."+LatestFile+".tmp") ||
			strings.HasPrefix(n, "."+LogFile+".tmp")
		if stale {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("train: removing stale %s: %w", n, err)
			}
		}
	}
	return nil
}

// loadCheckpoint reads the committed checkpoint of dir.
func loadCheckpoint(dir string) (*checkpoint, error) {
	name, err := latest(dir)
	if err != nil {
		return nil, err
	}
	if name == "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		return nil, fmt.Errorf("train: %s holds no checkpoint (no %s file)", dir, LatestFile)
	}
	cdir := filepath.Join(dir, name)
	ck := &checkpoint{}
	cfgJSON, err := os.ReadFile(filepath.Join(cdir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := decodeStrictJSON(cfgJSON, &ck.cfg); err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", filepath.Join(cdir, ConfigFile), err)
	}
	stJSON, err := os.ReadFile(filepath.Join(cdir, StateFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := decodeStrictJSON(stJSON, &ck.state); err != nil {
		return nil, fmt.Errorf("train: checkpoint %s: %w", filepath.Join(cdir, StateFile), err)
	}
	if ck.state.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("train: checkpoint %s has format version %d, this prism reads %d",
			cdir, ck.state.FormatVersion, FormatVersion)
	}
	ts, meta, err := safetensors.Read(filepath.Join(cdir, CheckpointFile))
	if err != nil {
		return nil, fmt.Errorf("train: checkpoint: %w", err)
	}
	if v := meta["prism.format_version"]; v != "1" {
		return nil, fmt.Errorf("train: checkpoint %s: unknown prism.format_version %q", cdir, v)
	}
	if k := meta["prism.kind"]; k != "checkpoint" {
		return nil, fmt.Errorf("train: checkpoint %s: prism.kind is %q, want \"checkpoint\"", cdir, k)
	}
	ck.tensors = ts
	return ck, nil
}

// writeFileAtomic writes data to path through a fsynced temporary file in
// the same directory renamed over path, then fsyncs the directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	untrack := atomicfile.Track(f.Name())
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
		untrack()
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("train: syncing %s: %w", dir, err)
	}
	return nil
}

// LoadNetwork rebuilds the network of the committed checkpoint in dir and
// loads its EMA weights (ema true, the weights to use for inference) or
// its raw weights. It returns the run's configuration and training state
// too.
func LoadNetwork(dir string, ema bool) (*network.Net, Config, State, error) {
	ck, err := loadCheckpoint(dir)
	if err != nil {
		return nil, Config{}, State{}, err
	}
	f, err := ck.cfg.LookupFamily()
	if err != nil {
		return nil, Config{}, State{}, fmt.Errorf("train: checkpoint: %w", err)
	}
	net, err := network.New(f, ck.cfg.Network, deriveSeed(ck.cfg.Seed, tagInit))
	if err != nil {
		return nil, Config{}, State{}, fmt.Errorf("train: checkpoint: %w", err)
	}
	prefix := ""
	if ema {
		prefix = optim.EMAPrefix
	}
	if err := net.Params().Assign(ck.tensors, prefix); err != nil {
		return nil, Config{}, State{}, fmt.Errorf("train: checkpoint %s: %w", dir, err)
	}
	return net, ck.cfg, ck.state, nil
}
