package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/prismsbi/prism/configs"
	"github.com/prismsbi/prism/engine/optim"
	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/network"
)

// Config is everything that determines a training run. It is read from YAML
// (LoadConfig) and stored as JSON in every checkpoint (config.json), so a
// resumed run uses exactly the configuration it started with. Field names
// are the same in both formats.
type Config struct {
	// Family is the model family's registry name (family.Lookup).
	Family string `json:"family" yaml:"family"`
	// Spec holds the text of the family spec file when the family came
	// from one (prism train --spec; docs/spec.md), so that a checkpoint
	// re-creates its family by itself; SpecDir is the file's directory,
	// against which the simulator command resolves. Both are empty for
	// built-in families and never read from YAML configs.
	Spec    string `json:"spec,omitempty" yaml:"-"`
	SpecDir string `json:"spec_dir,omitempty" yaml:"-"`
	// Seed fixes everything random: the initial weights, the training and
	// validation simulation streams and the network's training noise.
	Seed uint64 `json:"seed" yaml:"seed"`
	// BatchSize is the number of simulations per design stream and step.
	BatchSize int `json:"batch_size" yaml:"batch_size"`
	// Steps is the number of optimiser steps to train for in total
	// (counting from step 0, also across resumes); 0 means no step limit
	// (Minutes must then be set).
	Steps int `json:"steps" yaml:"steps"`
	// Minutes limits the wall time of one invocation (not the total across
	// resumes); 0 means no time limit. With both Steps and Minutes set,
	// training stops at whichever comes first.
	Minutes float64 `json:"minutes" yaml:"minutes"`
	// CPUMinutes limits the process CPU time (all threads) of one
	// invocation; 0 means no limit. On a shared machine it gives runs the
	// same compute budget whatever their share of the cores.
	CPUMinutes float64 `json:"cpu_minutes,omitempty" yaml:"cpu_minutes"`
	// CheckpointMinutes is the wall time between checkpoints. A checkpoint
	// is also written at the start (step 0) and at the end.
	CheckpointMinutes float64 `json:"checkpoint_minutes" yaml:"checkpoint_minutes"`
	// CheckpointEvery additionally checkpoints every so many steps (0: only
	// by time). Useful for short runs and tests.
	CheckpointEvery int `json:"checkpoint_every" yaml:"checkpoint_every"`
	// LogEvery is the number of steps averaged into one line of log.jsonl.
	LogEvery int `json:"log_every" yaml:"log_every"`
	// Validation configures the fixed simulated validation set.
	Validation ValidationConfig `json:"validation" yaml:"validation"`
	// Designs lists the design streams (arguments of family.Designs). Each
	// step draws one batch of BatchSize simulations from every stream and
	// averages the streams' losses. Empty means one stream with the
	// family's default design ("").
	Designs []string `json:"designs" yaml:"designs"`
	// Prefetch is the number of steps' worth of batches simulated ahead of
	// the optimiser (at least SimWorkers).
	Prefetch int `json:"prefetch" yaml:"prefetch"`
	// SimWorkers is the number of simulator goroutines.
	SimWorkers int `json:"sim_workers" yaml:"sim_workers"`
	// Replicas splits every batch into this many contiguous shards whose
	// forward and backward passes run concurrently on copies of the network
	// that share its parameters (data-parallel training); their gradients
	// are summed into one optimiser step. The step is the same as with one
	// replica up to floating-point summation order, so a run's results do
	// not depend on the machine's core count. Small networks, whose matrix
	// products are too small to split over cores, train up to twice as fast
	// on 2 cores with 2 replicas (docs/benchmarks.md). 0 or 1: one.
	Replicas int `json:"replicas,omitempty" yaml:"replicas"`
	// Network is the network configuration; keys given in YAML override
	// network.DefaultConfig(family).
	Network network.Config `json:"network" yaml:"-"`
	// Optimizer holds the optimiser hyperparameters.
	Optimizer OptimConfig `json:"optimizer" yaml:"optimizer"`
	// Proposal, for families with mixing fractions, draws the training
	// simulations' fraction latents from a defensive mixture and weights
	// both losses by p/r (family.FractionProposal), so that rare fraction
	// configurations are seen more often while the amortised posterior
	// stays the prior's. Validation always simulates from the prior. A
	// resumed run may add, change or drop it (a fine-tune).
	Proposal *family.FractionProposal `json:"proposal,omitempty" yaml:"proposal"`
	// LambdaTrain is the distribution ρ of the training simulations' λ
	// (family.LambdaDist; nil: the paper's U(0, 1)). It moves training
	// effort towards λ near 1, where masks have more components, without
	// changing the posterior the network learns (docs/training.md).
	// Validation keeps U(0, 1). A resumed run may add, change or drop it.
	LambdaTrain *family.LambdaDist `json:"lambda_train,omitempty" yaml:"lambda_train"`
	// InitFrom, if set, is a training directory whose latest checkpoint's
	// EMA weights initialise the network instead of random weights (a warm
	// start: fine-tuning a trained network on another family with the same
	// components, or on changed priors). The network configurations must be
	// equal. The optimiser state starts fresh; the run counts its steps
	// from 0. A weights file (`prism export`'s output, prism.kind
	// "weights") may be given instead of a directory. Stored in the
	// checkpoints for provenance.
	InitFrom string `json:"init_from,omitempty" yaml:"init_from"`
}

// LookupFamily returns the run's family: the one its stored spec file
// describes (installed in the registry under its name), or the registered
// family of that name.
func (c *Config) LookupFamily() (family.Family, error) {
	return family.Resolve(c.Family, c.Spec, c.SpecDir)
}

// ValidationConfig describes the validation set: Size simulations per
// design stream, drawn once from a seed stream disjoint from training, and
// evaluated every Every steps (0 disables validation).
type ValidationConfig struct {
	Size  int `json:"size" yaml:"size"`
	Every int `json:"every" yaml:"every"`
}

// OptimConfig mirrors optim.Config with snake_case keys.
type OptimConfig struct {
	LR        float64 `json:"lr" yaml:"lr"`
	Beta1     float64 `json:"beta1" yaml:"beta1"`
	Beta2     float64 `json:"beta2" yaml:"beta2"`
	Eps       float64 `json:"eps" yaml:"eps"`
	Threshold float64 `json:"threshold" yaml:"threshold"`
	Clip      float64 `json:"clip" yaml:"clip"`
	ClipEps   float64 `json:"clip_eps" yaml:"clip_eps"`
	EMADecay  float64 `json:"ema_decay" yaml:"ema_decay"`
	// Schedule multiplies LR by a factor that depends on the step (none:
	// constant LR, as in the paper).
	Schedule Schedule `json:"schedule" yaml:"schedule"`
	// EarlierSchedules records, oldest first, the schedules a resumed run
	// replaced and the last step each governed, so that a checkpoint (and
	// a weights file exported from it) says how its whole run was trained.
	// Written by Resume, never read from a configuration file.
	EarlierSchedules []ScheduleSpan `json:"earlier_schedules,omitempty" yaml:"-"`
	// ConfigLR is the configuration file's rate when the command line
	// replaced it (SetLR), so that a checkpoint names the --lr flag that
	// reproduces it; 0 when LR is the file's. Never read from a file.
	ConfigLR float64 `json:"config_lr,omitempty" yaml:"-"`
}

// SetLR replaces the base learning rate of a new run (prism train --lr),
// remembering the configuration's own in ConfigLR.
func (c *Config) SetLR(rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("learning rate %v must be positive and finite", rate)
	}
	if c.Optimizer.ConfigLR == 0 {
		c.Optimizer.ConfigLR = c.Optimizer.LR
	}
	if rate == c.Optimizer.ConfigLR {
		c.Optimizer.ConfigLR = 0 // the file's own rate: nothing to name
	}
	c.Optimizer.LR = rate
	return nil
}

// ScheduleSpan is a learning-rate schedule that governed the steps of a
// run up to and including Until.
type ScheduleSpan struct {
	Until    int64    `json:"until"`
	Schedule Schedule `json:"schedule"`
}

// recordScheduleChange appends to next's EarlierSchedules the schedule of
// prev, which governed steps 1..step, when next's schedule alone would not
// give those steps the same rates: a changed schedule, unless both are
// constant up to step (a constant-rate run annealed from step on, which
// next's schedule alone reproduces).
func recordScheduleChange(prev, next *OptimConfig, step int64) {
	old, cur := prev.Schedule, next.Schedule
	if step == 0 || old == cur || old.constant() && (cur.constant() || int64(cur.Start) >= step) {
		return
	}
	next.EarlierSchedules = append(append([]ScheduleSpan(nil), prev.EarlierSchedules...), ScheduleSpan{Until: step, Schedule: old})
}

// Schedule is a learning-rate decay by step number, so that a run is
// reproducible whatever its wall time: the rate is LR until step Start,
// then falls to LR·Final over Steps steps (Kind "cosine": half a cosine
// period; "linear": a straight line) and stays there. Kind "" or
// "constant" keeps LR. A resumed run may change its schedule (to anneal a
// finished constant-rate run, say); nothing else of the optimiser.
type Schedule struct {
	Kind  string  `json:"kind,omitempty" yaml:"kind"`
	Start int     `json:"start,omitempty" yaml:"start"`
	Steps int     `json:"steps,omitempty" yaml:"steps"`
	Final float64 `json:"final,omitempty" yaml:"final"`
}

// constant reports whether s keeps the base rate at every step.
func (s Schedule) constant() bool { return s.Kind == "" || s.Kind == "constant" }

// Factor returns the multiplier of the base learning rate at step (the
// 1-based number of the update about to be taken).
func (s Schedule) Factor(step int64) float64 {
	if s.constant() || step <= int64(s.Start) {
		return 1
	}
	u := 1.0
	if s.Steps > 0 {
		u = math.Min(float64(step-int64(s.Start))/float64(s.Steps), 1)
	}
	if s.Kind == "linear" {
		return 1 - (1-s.Final)*u
	}
	return s.Final + (1-s.Final)*0.5*(1+math.Cos(math.Pi*u))
}

// String is the command-line form KIND:START:STEPS:FINAL that
// ParseSchedule reads ("" for the constant rate).
func (s Schedule) String() string {
	if s.constant() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d:%s", s.Kind, s.Start, s.Steps, strconv.FormatFloat(s.Final, 'g', -1, 64))
}

// ParseSchedule reads the command-line form KIND:START:STEPS:FINAL, e.g.
// "cosine:0:100000:0.02"; "constant" alone is the constant rate.
func ParseSchedule(text string) (Schedule, error) {
	if text == "constant" {
		return Schedule{Kind: "constant"}, nil
	}
	parts := strings.Split(text, ":")
	if len(parts) != 4 {
		return Schedule{}, fmt.Errorf("schedule %q: want KIND:START:STEPS:FINAL, e.g. cosine:0:100000:0.02", text)
	}
	s := Schedule{Kind: parts[0]}
	var err1, err2, err3 error
	s.Start, err1 = strconv.Atoi(parts[1])
	s.Steps, err2 = strconv.Atoi(parts[2])
	s.Final, err3 = strconv.ParseFloat(parts[3], 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", text, err)
	}
	if err := s.validate(); err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", text, err)
	}
	return s, nil
}

// ParseLambdaTrain reads the command-line form MIX:POWER of a training λ
// distribution (family.LambdaDist), e.g. "0.75:4", or "uniform" for the
// paper's U(0, 1) (nil).
func ParseLambdaTrain(text string) (*family.LambdaDist, error) {
	if text == "uniform" {
		return nil, nil
	}
	var d family.LambdaDist
	if err := parsePair(text, "λ distribution", "MIX:POWER, e.g. 0.75:4, or uniform", &d.Mix, &d.Power, func() error { return d.Validate() }); err != nil {
		return nil, err
	}
	return &d, nil
}

// ParseProposal reads the command-line form SCALE:MIX of a fraction
// proposal, e.g. "2.5:0.5".
func ParseProposal(text string) (*family.FractionProposal, error) {
	var p family.FractionProposal
	if err := parsePair(text, "proposal", "SCALE:MIX, e.g. 2.5:0.5", &p.Scale, &p.Mix, func() error { return p.Validate() }); err != nil {
		return nil, err
	}
	return &p, nil
}

// parsePair reads text of the form A:B into *a and *b and then runs
// validate (which sees the new values); errors name what and the expected
// form.
func parsePair(text, what, form string, a, b *float64, validate func() error) error {
	parts := strings.Split(text, ":")
	if len(parts) != 2 {
		return fmt.Errorf("%s %q: want %s", what, text, form)
	}
	var err1, err2 error
	*a, err1 = strconv.ParseFloat(parts[0], 64)
	*b, err2 = strconv.ParseFloat(parts[1], 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s %q: %w", what, text, err)
	}
	if err := validate(); err != nil {
		return fmt.Errorf("%s %q: %w", what, text, err)
	}
	return nil
}

func (s Schedule) validate() error {
	switch s.Kind {
	case "", "constant":
		return nil
	case "cosine", "linear":
	default:
		return fmt.Errorf("optimizer.schedule.kind %q: want constant, cosine or linear", s.Kind)
	}
	if s.Start < 0 || s.Steps < 1 {
		return fmt.Errorf("optimizer.schedule: start %d must be non-negative and steps %d positive", s.Start, s.Steps)
	}
	if !(s.Final > 0 && s.Final <= 1) {
		return fmt.Errorf("optimizer.schedule.final %v must be in (0, 1] (the rate stays positive)", s.Final)
	}
	return nil
}

// optim converts to the engine's configuration.
func (o OptimConfig) optim() optim.Config {
	return optim.Config{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, Threshold: o.Threshold,
		Clip: o.Clip, ClipEps: o.ClipEps, EMADecay: o.EMADecay}
}

func optimFromEngine(c optim.Config) OptimConfig {
	return OptimConfig{LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, Threshold: c.Threshold,
		Clip: c.Clip, ClipEps: c.ClipEps, EMADecay: c.EMADecay}
}

// DefaultConfig returns the defaults for family f. The base settings are
// batch 256, checkpoints every 5 minutes, a log line every 10 steps, 1024
// validation simulations per stream every 500 steps, 4 steps of prefetch
// on one simulator goroutine, network.DefaultConfig(f) and
// optim.DefaultConfig() (RAdam 5e-4, AGC 2.0, EMA 0.999). Families with a
// shipped configuration (configs/FAMILY.yaml, embedded by package configs:
// lingauss-k6, symbolic-k15, symbolic-k50, b3s, b3s-brain, bszt) get its
// settings over these (see that file and docs/training.md), so that
// `prism train --family F` without --config trains the shipped setting.
// Neither Steps nor Minutes is set.
func DefaultConfig(f family.Family) Config {
	c := baseConfig(f)
	if data, ok := configs.Lookup(f.Name()); ok {
		shipped, err := decodeConfig(data, c)
		if err != nil {
			// The shipped files are parsed by TestShippedConfigs.
			panic(fmt.Sprintf("train: configs/%s.yaml: %v", f.Name(), err))
		}
		c = shipped
		c.Family = f.Name()
		c.Steps, c.Minutes, c.CPUMinutes = 0, 0, 0
	}
	return c
}

// baseConfig is DefaultConfig without a shipped configuration.
func baseConfig(f family.Family) Config {
	return Config{
		Family:            f.Name(),
		BatchSize:         256,
		CheckpointMinutes: 5,
		LogEvery:          10,
		Validation:        ValidationConfig{Size: 1024, Every: 500},
		Prefetch:          4,
		SimWorkers:        1,
		Network:           network.DefaultConfig(f),
		Optimizer:         optimFromEngine(optim.DefaultConfig()),
	}
}

// Validate checks the configuration against family f (design names are
// resolved, the network configuration is left to network.New).
func (c *Config) Validate(f family.Family) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Family != f.Name() {
		bad("family %q does not match %q", c.Family, f.Name())
	}
	if c.BatchSize < 1 {
		bad("batch_size %d must be positive", c.BatchSize)
	}
	if c.Steps < 0 {
		bad("steps %d is negative", c.Steps)
	}
	if !(c.Minutes >= 0) || math.IsInf(c.Minutes, 0) {
		bad("minutes %v must be non-negative and finite", c.Minutes)
	}
	if !(c.CPUMinutes >= 0) || math.IsInf(c.CPUMinutes, 0) {
		bad("cpu_minutes %v must be non-negative and finite", c.CPUMinutes)
	}
	if c.Steps == 0 && c.Minutes == 0 && c.CPUMinutes == 0 {
		bad("set steps or minutes (or cpu_minutes) to bound the run")
	}
	if !(c.CheckpointMinutes > 0) {
		bad("checkpoint_minutes %v must be positive", c.CheckpointMinutes)
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint_every %d is negative", c.CheckpointEvery)
	}
	if c.LogEvery < 1 {
		bad("log_every %d must be positive", c.LogEvery)
	}
	if c.Validation.Size < 0 || c.Validation.Every < 0 {
		bad("validation size %d and every %d must be non-negative", c.Validation.Size, c.Validation.Every)
	}
	if c.Validation.Every > 0 && c.Validation.Size == 0 {
		bad("validation.every %d needs a positive validation.size", c.Validation.Every)
	}
	if err := c.Optimizer.Schedule.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.LambdaTrain != nil {
		if err := c.LambdaTrain.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Proposal != nil {
		if err := c.Proposal.Validate(); err != nil {
			errs = append(errs, err)
		} else if f.Layout().FractionLatents() == 0 {
			bad("proposal: family %s has no mixing fractions", f.Name())
		}
	}
	if c.SimWorkers < 1 {
		bad("sim_workers %d must be positive", c.SimWorkers)
	}
	if c.Replicas < 0 || (c.BatchSize > 0 && c.Replicas > c.BatchSize) {
		bad("replicas %d must be between 1 and batch_size %d", c.Replicas, c.BatchSize)
	}
	if c.Prefetch < c.SimWorkers {
		bad("prefetch %d must be at least sim_workers %d", c.Prefetch, c.SimWorkers)
	}
	seen := map[string]bool{}
	for _, d := range c.streams() {
		if seen[d] {
			bad("design stream %q listed twice", d)
		}
		seen[d] = true
		if _, err := f.Designs(d); err != nil {
			bad("designs: %w", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("train: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// streams returns the design stream names (at least one).
func (c *Config) streams() []string {
	if len(c.Designs) == 0 {
		return []string{""}
	}
	return c.Designs
}

// yamlConfig is Config as read from YAML: the network section is kept as a
// node and merged into the family's defaults through JSON, so that its keys
// are exactly network.Config's JSON names.
type yamlConfig struct {
	Config  `yaml:",inline"`
	Network yaml.Node `yaml:"network"`
}

// LoadConfig reads a YAML training configuration. Keys that are not set
// keep the defaults of DefaultConfig for the family named in the file, or
// for familyName when the file names none; a file naming a different
// family than a non-empty familyName is an error. Unknown keys are errors.
func LoadConfig(path, familyName string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("train: %w", err)
	}
	c, err := ParseConfig(data, familyName)
	if err != nil {
		return Config{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return c, nil
}

// ParseConfig is LoadConfig for YAML in memory.
func ParseConfig(data []byte, familyName string) (Config, error) {
	// First pass: find the family, to know the defaults.
	var head struct {
		Family string `yaml:"family"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return Config{}, fmt.Errorf("train: config: %w", err)
	}
	name := head.Family
	switch {
	case name == "" && familyName == "":
		return Config{}, errors.New("train: config names no family (set family: or pass --family)")
	case name == "":
		name = familyName
	case familyName != "" && familyName != name:
		return Config{}, fmt.Errorf("train: config is for family %q, not %q", name, familyName)
	}
	f, err := family.Lookup(name)
	if err != nil {
		return Config{}, fmt.Errorf("train: config: %w", err)
	}
	c, err := decodeConfig(data, DefaultConfig(f))
	if err != nil {
		return Config{}, err
	}
	c.Family = name
	return c, nil
}

// decodeConfig decodes YAML over the configuration base: keys given
// replace base's values, network keys one by one.
func decodeConfig(data []byte, base Config) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, fmt.Errorf("train: config: %w", err)
	}
	if err := checkIntegers(&root, reflect.TypeFor[yamlConfig](), ""); err != nil {
		return Config{}, fmt.Errorf("train: config: %w", err)
	}
	yc := yamlConfig{Config: base}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&yc); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("train: config: %w", err)
	}
	c := yc.Config
	if yc.Network.Kind != 0 {
		var generic any
		if err := yc.Network.Decode(&generic); err != nil {
			return Config{}, fmt.Errorf("train: config: network: %w", err)
		}
		if generic != nil {
			js, err := json.Marshal(generic)
			if err != nil {
				return Config{}, fmt.Errorf("train: config: network: %w", err)
			}
			if err := decodeStrictJSON(js, &c.Network); err != nil {
				return Config{}, fmt.Errorf("train: config: network (line %d): %w", yc.Network.Line, err)
			}
		}
	}
	return c, nil
}

// decodeStrictJSON decodes data into v, refusing unknown fields and
// trailing data.
func decodeStrictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// checkIntegers walks a YAML document against the struct type t it is
// decoded into and refuses a non-integral number for an integer field
// (yaml.v3 would truncate steps: 5.7 to 5; 1e3 stays allowed).
func checkIntegers(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkIntegers(c, t, path); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if ft, ok := yamlField(t, key); ok {
				sub := key
				if path != "" {
					sub = path + "." + key
				}
				if err := checkIntegers(n.Content[i+1], ft, sub); err != nil {
					return err
				}
			}
		}
	case yaml.ScalarNode:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n.Tag == "!!float" {
				v, err := strconv.ParseFloat(n.Value, 64)
				if err != nil || v != math.Trunc(v) {
					return fmt.Errorf("line %d: %s: %s is not an integer", n.Line, path, n.Value)
				}
			}
		}
	}
	return nil
}

// yamlField returns the type of the field of struct type t that the YAML
// key decodes into, looking through inline fields.
func yamlField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			if ft, ok := yamlField(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f.Type, true
		}
	}
	return nil, false
}
