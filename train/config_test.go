package train

import (
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

func TestParseConfigOverridesDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`
family: symbolic-k15
batch_size: 99
steps: 5
designs: [""]
validation: {size: 10}
network: {model_dim: 32, mask_layers: 3}
optimizer: {lr: 1.0e-4}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := family.Lookup("symbolic-k15")
	want := DefaultConfig(f)
	want.BatchSize, want.Steps, want.Designs = 99, 5, []string{""}
	want.Validation.Size = 10
	want.Network.ModelDim, want.Network.MaskLayers = 32, 3
	want.Optimizer.LR = 1e-4
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", c, want)
	}
	if err := c.Validate(f); err != nil {
		t.Error(err)
	}
	// JSON round trip (checkpoints store the config as JSON).
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := decodeStrictJSON(js, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("JSON round trip: %v\n%+v", err, back)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct{ yaml, family, want string }{
		{"family: lingauss-k6\nbatch: 3\n", "", "batch"},
		{"family: lingauss-k6\nvalidation: {sise: 3}\n", "", "sise"},
		{"family: lingauss-k6\nnetwork: {model_dimm: 3}\n", "", "model_dimm"},
		{"family: lingauss-k6\noptimizer: {learning_rate: 3}\n", "", "learning_rate"},
		{"family: lingauss-k6\n", "b3s", "b3s"},
		{"batch_size: 3\n", "", "no family"},
		{"family: nope\n", "", "unknown family"},
		{"family: lingauss-k6\nbatch_size: [1]\n", "", "line 2"},
		// Integers given as fractions are errors, not truncated.
		{"family: lingauss-k6\nsteps: 5.7\n", "", "line 2: steps: 5.7 is not an integer"},
		{"family: lingauss-k6\nvalidation:\n  size: 2.5\n", "", "line 3: validation.size: 2.5 is not an integer"},
		{"family: lingauss-k6\nnetwork: {model_dim: 5.5}\n", "", "model_dim"},
		{"family: lingauss-k6\nseed: 1.5\n", "", "seed: 1.5 is not an integer"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml), c.family)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one mentioning %q", c.yaml, err, c.want)
		}
	}
	// An integral number in exponent form is still an integer.
	if c, err := ParseConfig([]byte("family: lingauss-k6\nsteps: 1e3\n"), ""); err != nil || c.Steps != 1000 {
		t.Errorf("steps: 1e3: %v, %d", err, c.Steps)
	}
	// The family may come from the caller alone.
	if c, err := ParseConfig([]byte("steps: 3\n"), "b3s"); err != nil || c.Family != "b3s" {
		t.Errorf("family from the caller: %v, %q", err, c.Family)
	}
	f, _ := family.Lookup("b3s")
	bad := DefaultConfig(f)
	bad.Designs = []string{"ukb-mix", "nonsense-protocol"}
	bad.BatchSize = 0
	err := bad.Validate(f)
	for _, want := range []string{"steps or minutes", "batch_size", "nonsense-protocol"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v does not mention %q", err, want)
		}
	}
	for _, r := range []int{-1, 5} {
		c := DefaultConfig(f)
		c.Steps, c.BatchSize, c.Replicas = 1, 4, r
		if err := c.Validate(f); err == nil || !strings.Contains(err.Error(), "replicas") {
			t.Errorf("Validate with replicas %d of batch 4: %v", r, err)
		}
	}
}

// TestShippedConfigs loads every file in configs/, validates it and builds
// its network.
func TestShippedConfigs(t *testing.T) {
	paths, err := filepath.Glob("../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b3s-brain-sorted", "b3s-brain", "b3s", "bszt-brain", "bszt-conv", "bszt", "lingauss-k6", "symbolic-k15", "symbolic-k50"}
	var got []string
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		got = append(got, name)
		c, err := LoadConfig(p, "")
		if err != nil {
			t.Error(err)
			continue
		}
		if c.Family != name {
			t.Errorf("%s is for family %s", p, c.Family)
		}
		f, _ := family.Lookup(c.Family)
		// DefaultConfig is the embedded file apart from the run length
		// (package configs embeds these very files), and differs from
		// the base settings (the file is read).
		d := c
		d.Steps, d.Minutes = 0, 0
		if def := DefaultConfig(f); !reflect.DeepEqual(d, def) {
			t.Errorf("%s differs from DefaultConfig(%s):\n%+v\n%+v", p, name, d, def)
		}
		if reflect.DeepEqual(DefaultConfig(f), baseConfig(f)) {
			t.Errorf("DefaultConfig(%s) ignores configs/%s.yaml", name, name)
		}
		if err := c.Validate(f); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		net, err := network.New(f, c.Network, 1)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		t.Logf("%s: %d parameters, batch %d × %d streams", name, net.Params().NumValues(), c.BatchSize, len(c.streams()))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs/ holds %v, want %v", got, want)
	}
}

// TestValidationConfigs loads the configurations of the recorded
// validation runs (configs/validation/, docs/validation.md): each must
// parse strictly, validate, bound its run and build its network.
func TestValidationConfigs(t *testing.T) {
	paths, err := filepath.Glob("../configs/validation/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no configs in configs/validation")
	}
	for _, p := range paths {
		c, err := LoadConfig(p, "")
		if err != nil {
			t.Error(err)
			continue
		}
		f, err := family.Lookup(c.Family)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if err := c.Validate(f); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, err := network.New(f, c.Network, 1); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestSetLR: --lr replaces the base rate and remembers the configuration
// file's; setting the file's rate again forgets it, and a non-positive or
// infinite rate is refused.
func TestSetLR(t *testing.T) {
	var c Config
	c.Optimizer.LR = 5e-4
	if err := c.SetLR(5e-4); err != nil || c.Optimizer.ConfigLR != 0 {
		t.Fatalf("same rate: err %v, config_lr %v", err, c.Optimizer.ConfigLR)
	}
	if err := c.SetLR(2.5e-4); err != nil || c.Optimizer.LR != 2.5e-4 || c.Optimizer.ConfigLR != 5e-4 {
		t.Fatalf("lower rate: err %v, %+v", err, c.Optimizer)
	}
	if err := c.SetLR(1e-4); err != nil || c.Optimizer.LR != 1e-4 || c.Optimizer.ConfigLR != 5e-4 {
		t.Fatalf("second change: err %v, %+v", err, c.Optimizer)
	}
	if err := c.SetLR(5e-4); err != nil || c.Optimizer.LR != 5e-4 || c.Optimizer.ConfigLR != 0 {
		t.Fatalf("back to the file's: err %v, %+v", err, c.Optimizer)
	}
	for _, bad := range []float64{0, -1e-4, math.Inf(1), math.NaN()} {
		if err := c.SetLR(bad); err == nil {
			t.Errorf("rate %v accepted", bad)
		}
	}
}
