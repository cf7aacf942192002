package checkpoint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/engine/safetensors"
	"github.com/prismsbi/prism/network"
)

// Load reads a trained network for inference: path is a training run
// directory (its committed checkpoint's EMA weights, the weights meant for
// inference) or a weights file.
func Load(path string) (*network.Net, Header, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, Header{}, fmt.Errorf("checkpoint: %w", err)
	}
	if st.IsDir() {
		return LoadRun(path, true)
	}
	return LoadWeightsFile(path)
}

// LoadRun reads the network of the committed checkpoint in run directory
// dir with its EMA weights (ema true) or its raw training weights.
func LoadRun(dir string, ema bool) (*network.Net, Header, error) {
	name, err := Latest(dir)
	if err != nil {
		return nil, Header{}, err
	}
	if name == "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, Header{}, fmt.Errorf("checkpoint: %w", err)
		}
		return nil, Header{}, fmt.Errorf("checkpoint: %s holds no checkpoint (no %s file)", dir, LatestFile)
	}
	path := filepath.Join(dir, name, CheckpointFile)
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return nil, Header{}, fmt.Errorf("checkpoint: %w", err)
	}
	prefix := ""
	if ema {
		prefix = optim.EMAPrefix
	}
	net, h, err := build(ts, meta, KindCheckpoint, prefix)
	if err != nil {
		return nil, Header{}, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	return net, h, nil
}

// LoadWeightsFile reads a weights file (kind "weights").
func LoadWeightsFile(path string) (*network.Net, Header, error) {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return nil, Header{}, fmt.Errorf("checkpoint: %w", err)
	}
	net, h, err := build(ts, meta, KindWeights, "")
	if err != nil {
		return nil, Header{}, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	return net, h, nil
}

// WithMetadata returns the weights file held in data with metadata key
// set to value (its tensors and other metadata unchanged), after checking
// that it is a weights file that builds a network.
func WithMetadata(data []byte, key, value string) ([]byte, error) {
	ts, meta, err := safetensors.Decode(data)
	if err != nil {
		return nil, err
	}
	if _, _, err := build(ts, meta, KindWeights, ""); err != nil {
		return nil, err
	}
	meta[key] = value
	var buf bytes.Buffer
	if err := safetensors.Encode(&buf, ts, meta); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode builds the network of a weights file held in data (shipped
// models are embedded in the binary).
func Decode(data []byte) (*network.Net, Header, error) {
	ts, meta, err := safetensors.Decode(data)
	if err != nil {
		return nil, Header{}, err
	}
	return build(ts, meta, KindWeights, "")
}

// build checks the header and builds the network with the tensors whose
// names start with prefix ("" for a weights file's bare names, "ema/" for
// a checkpoint's EMA weights).
func build(ts []safetensors.Tensor, meta map[string]string, kind, prefix string) (*network.Net, Header, error) {
	h, err := ParseHeader(meta)
	if err != nil {
		return nil, Header{}, err
	}
	if h.Kind != kind {
		hint := ""
		if kind == KindWeights {
			hint = " (pass the run directory for a training checkpoint)"
		}
		return nil, Header{}, fmt.Errorf("prism.kind is %q, want %q%s", h.Kind, kind, hint)
	}
	f, err := h.LookupFamily()
	if err != nil {
		return nil, Header{}, err
	}
	// Every parameter is assigned below, so the initialisation seed does
	// not matter.
	net, err := network.New(f, h.Network, 0)
	if err != nil {
		return nil, Header{}, err
	}
	if err := net.Params().Assign(ts, prefix); err != nil {
		return nil, Header{}, err
	}
	return net, h, nil
}
