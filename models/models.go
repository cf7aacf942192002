// Package models holds the trained PRISM networks that ship with prism,
// compiled into the binary with go:embed, so that `--model b3s` or
// `--model symbolic-k15` works without a checkpoint directory.
//
// Each model is a weights file (docs/checkpoint-format.md: kind "weights",
// the EMA parameters under their bare names, the training configuration in
// the prism.config metadata) named NAME.safetensors in this directory.
// Export writes such a file from a `prism train` output directory; how the
// shipped files were trained and exported is in models/README.md. Info
// reports what a file holds (family, steps, configuration, the command that
// trains it, SHA-256), read from the embedded bytes themselves, so it
// cannot drift from the weights.
package models

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/prismsbi/prism/checkpoint"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/network"
	"github.com/prismsbi/prism/posterior"
	"github.com/prismsbi/prism/train"
)

//go:embed *.safetensors
var files embed.FS

// Ext is the file extension of a shipped model.
const Ext = ".safetensors"

// Info describes one shipped model.
type Info struct {
	// Name is the model's name for --model (the file name without Ext).
	Name string `json:"name"`
	// Family is the model family the network was trained for.
	Family string `json:"family"`
	// Step is the number of optimiser steps of the training run.
	Step int64 `json:"step"`
	// Weights says which weights the file holds ("ema").
	Weights string `json:"weights"`
	// Config is the training configuration (network, optimiser, batch,
	// designs, seed) the file records.
	Config train.Config `json:"config"`
	// Train is the command that trained the network (the configuration's
	// time or step limit), and Reproduce the one that trains exactly
	// Step steps with the same configuration and seed.
	Train     string `json:"train_command"`
	Reproduce string `json:"reproduce_command"`
	// Calibrate, for a file that carries a denoiser calibration, is the
	// `prism calibrate` command that adds it to the trained weights.
	Calibrate string `json:"calibrate_command,omitempty"`
	// SHA256 is the hex SHA-256 of the file; Bytes its size.
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
	// Params is the number of network parameter values.
	Params int `json:"params"`
}

// entry is one embedded model, parsed on first use.
type entry struct {
	file string
	once sync.Once
	info Info
	data []byte
	err  error
}

// parsed reads and describes the embedded file once.
func (e *entry) parsed() error {
	e.once.Do(func() {
		data, err := files.ReadFile(e.file)
		if err != nil {
			e.err = fmt.Errorf("models: %w", err)
			return
		}
		info, err := Describe(strings.TrimSuffix(e.file, Ext), data)
		if err != nil {
			e.err = fmt.Errorf("models: embedded %s: %w", e.file, err)
			return
		}
		e.info, e.data = info, data
	})
	return e.err
}

// entries maps the names of the embedded files to their entries.
var entries = func() map[string]*entry {
	des, err := fs.ReadDir(files, ".")
	if err != nil {
		panic("models: reading the embedded directory: " + err.Error())
	}
	m := map[string]*entry{}
	for _, de := range des {
		if name, ok := strings.CutSuffix(de.Name(), Ext); ok {
			m[name] = &entry{file: de.Name()}
		}
	}
	return m
}()

// Names returns the names of the shipped models, sorted.
func Names() []string {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// lookup returns the parsed entry of name, or an error listing the names.
func lookup(name string) (*entry, error) {
	e, ok := entries[name]
	if !ok {
		return nil, fmt.Errorf("models: no shipped model %q (shipped: %s)", name, strings.Join(Names(), ", "))
	}
	if err := e.parsed(); err != nil {
		return nil, err
	}
	return e, nil
}

// Lookup returns the description of the shipped model name.
func Lookup(name string) (Info, error) {
	e, err := lookup(name)
	if err != nil {
		return Info{}, err
	}
	return e.info, nil
}

// Weights returns the bytes of the shipped model's weights file (a copy).
func Weights(name string) ([]byte, error) {
	e, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(e.data), nil
}

// Open builds the posterior of the shipped model name from the embedded
// weights (no file is read or written).
func Open(name string) (*posterior.Posterior, error) {
	e, err := lookup(name)
	if err != nil {
		return nil, err
	}
	net, h, err := checkpoint.Decode(e.data)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	p, err := posterior.FromHeader(net, h)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	return p, nil
}

// header is the part of a weights file's metadata that Describe and
// decodeNet need.
type header struct {
	cfg     train.Config
	step    int64
	weights string
	tensors []safetensors.Tensor
	cal     json.RawMessage // the denoiser calibration, if any
}

// parse decodes a weights file held in data: its checkpoint header
// (checked as every loader checks it), its training configuration and its
// tensors.
func parse(data []byte) (*header, error) {
	ts, meta, err := safetensors.Decode(data)
	if err != nil {
		return nil, err
	}
	ch, err := checkpoint.ParseHeader(meta)
	if err != nil {
		return nil, err
	}
	if ch.Kind != checkpoint.KindWeights {
		return nil, fmt.Errorf("prism.kind is %q, want %q", ch.Kind, checkpoint.KindWeights)
	}
	h := &header{weights: ch.Weights, step: ch.Step, tensors: ts, cal: ch.DenoiserCalibration}
	if err := json.Unmarshal(ch.Config, &h.cfg); err != nil {
		return nil, fmt.Errorf("prism.config: %w", err)
	}
	return h, nil
}

// decodeNet builds the network of a weights file held in data.
func decodeNet(data []byte) (*network.Net, error) {
	net, _, err := checkpoint.Decode(data)
	return net, err
}

// Describe returns the Info of a weights file held in data, to be shipped
// under name.
func Describe(name string, data []byte) (Info, error) {
	h, err := parse(data)
	if err != nil {
		return Info{}, err
	}
	sum := sha256.Sum256(data)
	info := Info{Name: name, Family: h.cfg.Family, Step: h.step, Weights: h.weights, Config: h.cfg,
		SHA256: hex.EncodeToString(sum[:]), Bytes: len(data)}
	for _, t := range h.tensors {
		info.Params += len(t.Data)
	}
	if h.cal != nil {
		if info.Calibrate, err = calibrateCommand(name, h.cal); err != nil {
			return Info{}, err
		}
	}
	limit := ""
	if h.cfg.Steps > 0 {
		limit += fmt.Sprintf(" --steps %d", h.cfg.Steps)
	}
	if h.cfg.Minutes > 0 {
		limit += fmt.Sprintf(" --minutes %g", h.cfg.Minutes)
	}
	// A warm start names its source run in the runs/NAME layout of
	// models/README.md (the recorded path is the training machine's), or
	// the shipped weights file it started from (models/NAME.safetensors).
	initFrom := ""
	if h.cfg.InitFrom != "" {
		src, dir := filepath.Base(h.cfg.InitFrom), "runs/"
		if strings.HasSuffix(src, Ext) {
			dir = "models/"
		}
		initFrom = " --init-from " + dir + src
	}
	// A learning-rate schedule is a function of the step only, so one run
	// with it equals a constant-rate run resumed with it (an annealed run).
	// A run resumed with a schedule that replaced another one (recorded in
	// EarlierSchedules) is reproduced by the same chain of invocations:
	// each earlier schedule up to its last step, then a resume with the
	// next.
	lr := func(s train.Schedule) string {
		if fl := s.String(); fl != "" {
			return " --lr-schedule " + fl
		}
		return ""
	}
	// A resume keeps the checkpoint's schedule unless told otherwise, so
	// it names a constant rate explicitly.
	lrResume := func(s train.Schedule) string {
		if fl := lr(s); fl != "" {
			return fl
		}
		return " --lr-schedule constant"
	}
	// The seed and the data-parallel split are named when they are not
	// the configs' own (every file in configs/ holds seed 0 and no
	// replicas): a different seed draws other data, and replicas change
	// the sums' rounding, so either changes the weights.
	first := fmt.Sprintf("prism train --config configs/%s.yaml", name)
	if h.cfg.Seed != 0 {
		first += fmt.Sprintf(" --seed %d", h.cfg.Seed)
	}
	if h.cfg.Replicas > 1 {
		first += fmt.Sprintf(" --replicas %d", h.cfg.Replicas)
	}
	// A rate given on the command line (ConfigLR holds the file's).
	if h.cfg.Optimizer.ConfigLR != 0 {
		first += fmt.Sprintf(" --lr %g", h.cfg.Optimizer.LR)
	}
	if spans := h.cfg.Optimizer.EarlierSchedules; len(spans) > 0 {
		first += fmt.Sprintf(" --steps %d%s%s --out runs/%s", spans[0].Until, lr(spans[0].Schedule), initFrom, name)
		for i := 1; i < len(spans); i++ {
			first += fmt.Sprintf(" && prism train --resume runs/%s --steps %d%s", name, spans[i].Until, lrResume(spans[i].Schedule))
		}
		last := fmt.Sprintf("%s && prism train --resume runs/%s", first, name)
		info.Train = last + limit + lrResume(h.cfg.Optimizer.Schedule)
		info.Reproduce = last + fmt.Sprintf(" --steps %d", h.step) + lrResume(h.cfg.Optimizer.Schedule)
		return info, nil
	}
	flags := lr(h.cfg.Optimizer.Schedule) + initFrom
	info.Train = fmt.Sprintf("%s%s%s --out runs/%s", first, limit, flags, name)
	info.Reproduce = fmt.Sprintf("%s --steps %d%s --out runs/%s", first, h.step, flags, name)
	return info, nil
}

// calibrateCommand returns the `prism calibrate` invocation that fits the
// calibration cal (JSON, posterior.DenoiserCalibration) on the run
// runs/name, naming the options that are not the command's defaults.
func calibrateCommand(name string, cal json.RawMessage) (string, error) {
	var c posterior.DenoiserCalibration
	if err := json.Unmarshal(cal, &c); err != nil {
		return "", fmt.Errorf("%s: %w", checkpoint.MetaDenoiserCalibration, err)
	}
	cmd := fmt.Sprintf("prism calibrate --checkpoint runs/%s --out models/%s%s --n %d", name, name, Ext, c.Simulations)
	if len(c.LogSigma) != posterior.DefaultCalibrationLevels {
		cmd += fmt.Sprintf(" --levels %d", len(c.LogSigma))
	}
	if c.PerLevel != posterior.DefaultCalibrationPerLevel {
		cmd += fmt.Sprintf(" --per-level %d", c.PerLevel)
	}
	switch w := c.Width; {
	case w == nil:
		cmd += " --width 0"
	default:
		cmd += fmt.Sprintf(" --width %d", w.Simulations)
		if w.Samples != posterior.DefaultWidthSamples {
			cmd += fmt.Sprintf(" --width-samples %d", w.Samples)
		}
	}
	return cmd + fmt.Sprintf(" --seed %d", c.Seed), nil
}

// Export writes the EMA weights of the committed checkpoint of a
// `prism train` output directory (its ema.safetensors) to path as a
// weights file, after checking that it builds a network, and returns its
// Info under the name path's base name without Ext. The file is
// byte-identical to the checkpoint's ema.safetensors. A checkpoint
// committed by a still running training between reading LATEST and the
// file is handled by reading LATEST again.
func Export(checkpointDir, path string) (Info, error) {
	return ExportAs(checkpointDir, path, "")
}

// ExportAs is Export with the training configuration's init_from replaced
// by initFrom when it is not empty: a warm start that began from a copy of
// a shipped file (e.g. the run folder's init.safetensors) then names the
// shipped file, models/NAME.safetensors, in its recipe (`prism models`). Only
// the prism.config metadata changes; the weights are written bit for bit.
func ExportAs(checkpointDir, path, initFrom string) (Info, error) {
	data, err := RunWeights(checkpointDir)
	if err != nil {
		return Info{}, fmt.Errorf("models: export: %w", err)
	}
	if initFrom != "" {
		if data, err = setInitFrom(data, initFrom); err != nil {
			return Info{}, fmt.Errorf("models: export %s: %w", checkpointDir, err)
		}
	}
	base := strings.TrimSuffix(filepath.Base(path), Ext)
	info, err := Describe(base, data)
	if err != nil {
		return Info{}, fmt.Errorf("models: export %s: %w", checkpointDir, err)
	}
	if info.Weights != "ema" {
		return Info{}, fmt.Errorf("models: export %s: the weights file holds %q weights, want \"ema\"", checkpointDir, info.Weights)
	}
	if _, err := decodeNet(data); err != nil {
		return Info{}, fmt.Errorf("models: export %s: %w", checkpointDir, err)
	}
	if err := atomicfile.WriteBytes(path, data); err != nil {
		return Info{}, fmt.Errorf("models: export: %w", err)
	}
	return info, nil
}

// setInitFrom returns the weights file data with the init_from of its
// training configuration (metadata prism.config) set to initFrom. The run
// must have been a warm start: a file without an init_from is refused, so a
// recipe never gains a starting point its run did not have.
func setInitFrom(data []byte, initFrom string) ([]byte, error) {
	ts, meta, err := safetensors.Decode(data)
	if err != nil {
		return nil, err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(meta["prism.config"]), &cfg); err != nil {
		return nil, fmt.Errorf("prism.config: %w", err)
	}
	var old string
	if raw, ok := cfg["init_from"]; ok {
		if err := json.Unmarshal(raw, &old); err != nil {
			return nil, fmt.Errorf("prism.config init_from: %w", err)
		}
	}
	if old == "" {
		return nil, fmt.Errorf("the run did not start from other weights (no init_from in its configuration), so it has none to rename to %q", initFrom)
	}
	v, err := json.Marshal(initFrom)
	if err != nil {
		return nil, err
	}
	cfg["init_from"] = v
	c, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	meta["prism.config"] = string(c)
	var buf bytes.Buffer
	if err := safetensors.Encode(&buf, ts, meta); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// RunWeights returns the EMA weights file (ema.safetensors) of the
// committed checkpoint of a `prism train` output directory. A checkpoint
// committed by a still running training between reading LATEST and the
// file is handled by reading LATEST again.
func RunWeights(dir string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		name := latestName(dir)
		if name == "" {
			return nil, fmt.Errorf("%s holds no committed checkpoint (no %s file)", dir, checkpoint.LatestFile)
		}
		data, err := os.ReadFile(filepath.Join(dir, name, checkpoint.EMAFile))
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 2 {
			return nil, err
		}
	}
}

// latestName is the committed checkpoint of a run directory, "" if none.
func latestName(dir string) string {
	name, err := checkpoint.Latest(dir)
	if err != nil {
		return ""
	}
	return name
}
