package train

import "github.com/prismsbi/prism/family"

// Overrides are settings given for one invocation (the command line) that
// replace a configuration's, for a new run or a resumed one. Zero fields
// (nil pointers) leave the configuration's value.
type Overrides struct {
	// Proposal replaces the training proposal when SetProposal is set.
	Proposal    *family.FractionProposal
	SetProposal bool
	// LambdaTrain replaces the training λ distribution when SetLambdaTrain
	// is set (nil: U(0, 1)).
	LambdaTrain    *family.LambdaDist
	SetLambdaTrain bool
	// Schedule replaces the learning-rate schedule.
	Schedule *Schedule
	// Replicas replaces the number of data-parallel replicas.
	Replicas int
	// Minutes or Steps replace the run's length (the other is cleared);
	// Minutes wins when both are set.
	Minutes float64
	Steps   int
	// CPUMinutes replaces the CPU-time limit. The limit bounds one
	// invocation, so a new length (Minutes or Steps) without it clears
	// the one stored with a checkpoint: a run first trained under
	// --cpu-minutes and resumed with --steps trains to those steps.
	CPUMinutes float64
}

// Apply writes the overrides into c.
func (o Overrides) Apply(c *Config) {
	if o.SetProposal {
		c.Proposal = o.Proposal
	}
	if o.SetLambdaTrain {
		c.LambdaTrain = o.LambdaTrain
	}
	if o.Schedule != nil {
		c.Optimizer.Schedule = *o.Schedule
	}
	if o.Replicas > 0 {
		c.Replicas = o.Replicas
	}
	switch {
	case o.Minutes > 0:
		c.Minutes, c.Steps, c.CPUMinutes = o.Minutes, 0, 0
	case o.Steps > 0:
		c.Steps, c.Minutes, c.CPUMinutes = o.Steps, 0, 0
	}
	if o.CPUMinutes > 0 {
		c.CPUMinutes = o.CPUMinutes
	}
}
