package view

import (
	"fmt"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/posterior"
)

// SimulatedExample draws one observation of f on its fixed design from
// the prior at λ (family.SimulateBatch with this seed, the first sample
// of `prism simulate --seed SEED --lambda λ`) and returns it with its
// true mask.
func SimulatedExample(f family.Family, seed uint64, lambda float64) (posterior.Observation, []bool, error) {
	designs, err := f.Designs("")
	if err != nil {
		return posterior.Observation{}, nil, fmt.Errorf("view: %w", err)
	}
	batch := make([]family.Sample, 1)
	family.SimulateBatch(f, family.SimOptions{Seed: seed, Lambda: lambda, Designs: designs}, 0, batch)
	s := batch[0]
	return posterior.Observation{Design: s.Design, X: s.X}, s.Mask, nil
}
