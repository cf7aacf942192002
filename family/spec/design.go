package spec

import (
	"math/rand/v2"
	"slices"

	"github.com/prismsbi/prism/family"
)

// covariate describes per-observation designs (observation.covariate in
// the spec file): each observation is measured at values of one covariate
// of its own.
type covariate struct {
	name   string
	prior  paramPrior
	sorted bool
	n      int     // measurements per simulated observation
	lo, hi float64 // 0.1 % and 99.9 % prior quantiles: the network's scale
}

// covariateDesigns draws the design of each simulated observation: n
// covariate values from the prior, sorted if the spec asks.
type covariateDesigns struct{ c *covariate }

// SampleDesign implements family.DesignSampler.
func (s covariateDesigns) SampleDesign(r *rand.Rand) family.Design {
	c := s.c
	v := make([]float64, c.n)
	for j := range v {
		v[j] = c.prior.natural(r.NormFloat64())
	}
	if c.sorted {
		slices.Sort(v)
	}
	return family.Design{N: c.n, CovDim: 1, Cov: v, Name: c.name}
}

// ObservationKind implements family.ObservationKinder: a fixed grid, or
// points at covariate values of each observation's own.
func (f *Family) ObservationKind() string {
	if f.covariate != nil {
		return family.ObservationPoints
	}
	return family.ObservationGrid
}

// CovariateRange implements family.CovariateRanger for per-observation
// designs: the central 99.8 % of the covariate's prior.
func (f *Family) CovariateRange() (lo, hi float64) {
	if f.covariate == nil {
		return 0, 0
	}
	return f.covariate.lo, f.covariate.hi
}

// PerObservation reports whether observations carry their own designs,
// and the covariate's name.
func (f *Family) PerObservation() (bool, string) {
	if f.covariate == nil {
		return false, ""
	}
	return true, f.covariate.name
}
