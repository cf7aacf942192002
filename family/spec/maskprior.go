package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"

	"github.com/prismsbi/prism/family"
)

// buildMaskPrior compiles the mask prior. Without one_of groups the
// Bernoulli prior is family.BernoulliPrior itself (so a spec re-creating a
// built-in family draws the same masks); with groups it is groupPrior.
func (f *Family) buildMaskPrior(m *MaskPriorSpec, index map[string]int) error {
	K, M := family.Counts(f)
	switch m.Kind {
	case "dim_penalised":
		if m.MinActive != 0 || len(m.OneOf) > 0 {
			return errors.New("min_active and one_of belong to the bernoulli prior")
		}
		if m.P0 < 0 || m.P0 >= 1 || m.LambdaMax < 0 {
			return fmt.Errorf("p0 %v must lie in (0, 1) and lambda_max %v be positive (0: the paper's 0.5 and 4)", m.P0, m.LambdaMax)
		}
		dims := make([]int, K)
		for k := range dims {
			dims[k] = f.comps[k].Latent
		}
		f.prior = family.DimPenalisedPrior{Dims: dims, NumNoise: M, P0: m.P0, LambdaMax: m.LambdaMax}
		return nil
	case "", "bernoulli":
	default:
		return fmt.Errorf("kind %q must be bernoulli or dim_penalised", m.Kind)
	}
	if m.P0 != 0 || m.LambdaMax != 0 {
		return errors.New("p0 and lambda_max belong to the dim_penalised prior")
	}
	inGroup := make([]bool, K)
	var groups [][]int
	for _, g := range m.OneOf {
		if len(g) < 2 {
			return fmt.Errorf("one_of group %v needs at least two components", g)
		}
		var idx []int
		for _, name := range g {
			k, ok := index[name]
			if !ok || k >= K {
				return fmt.Errorf("one_of: %q is not a base component", name)
			}
			if inGroup[k] {
				return fmt.Errorf("one_of: %q is in two groups", name)
			}
			inGroup[k] = true
			idx = append(idx, k)
		}
		groups = append(groups, idx)
	}
	var free []int
	for k := 0; k < K; k++ {
		if !inGroup[k] {
			free = append(free, k)
		}
	}
	if m.MinActive < 0 || m.MinActive > len(free) {
		return fmt.Errorf("min_active %d must lie in 0…%d (the base components outside one_of groups)", m.MinActive, len(free))
	}
	bern := family.BernoulliPrior{NumBase: len(free), NumNoise: M, MinActive: m.MinActive}
	if len(groups) == 0 {
		f.prior = bern
		return nil
	}
	gp := groupPrior{bern: bern, free: free, groups: groups, numBase: K}
	f.prior = gp
	size := new(big.Int).Lsh(big.NewInt(1), uint(len(free)))
	for i := 0; i < m.MinActive; i++ {
		size.Sub(size, new(big.Int).Binomial(int64(len(free)), int64(i)))
	}
	for _, g := range groups {
		size.Mul(size, big.NewInt(int64(len(g))))
	}
	f.spaceSize = size.Mul(size, big.NewInt(int64(M)))
	return nil
}

// groupPrior is a Bernoulli(λ) prior (with minimum activity) on the free
// base components, times a uniform choice of exactly one component in each
// one_of group, times a uniform choice of the noise component:
//
//	p(M | λ) = p_Bernoulli(M_free | λ) · Π_g 1/|g|
//
// (the Bernoulli factor includes the noise choice).
type groupPrior struct {
	bern    family.BernoulliPrior
	free    []int
	groups  [][]int
	numBase int
}

// sub copies the free and noise entries of mask into a scratch mask of the
// Bernoulli prior's size.
func (p groupPrior) sub(mask []bool, buf *[64]bool) []bool {
	n := len(p.free) + p.bern.NumNoise
	var s []bool
	if n <= len(buf) {
		s = buf[:n]
	} else {
		s = make([]bool, n)
	}
	for i, k := range p.free {
		s[i] = mask[k]
	}
	copy(s[len(p.free):], mask[p.numBase:])
	return s
}

// Sample draws the free components and noise, then one member per group.
func (p groupPrior) Sample(r *rand.Rand, lambda float64, mask []bool) {
	var buf [64]bool
	s := p.sub(mask, &buf)
	p.bern.Sample(r, lambda, s)
	for i, k := range p.free {
		mask[k] = s[i]
	}
	copy(mask[p.numBase:], s[len(p.free):])
	for _, g := range p.groups {
		pick := r.IntN(len(g))
		for i, k := range g {
			mask[k] = i == pick
		}
	}
}

// LogProb returns log p(mask | λ): −Inf unless every group has exactly one
// member on.
func (p groupPrior) LogProb(mask []bool, lambda float64) float64 {
	lp := 0.0
	for _, g := range p.groups {
		on := 0
		for _, k := range g {
			if mask[k] {
				on++
			}
		}
		if on != 1 {
			return math.Inf(-1)
		}
		lp -= math.Log(float64(len(g)))
	}
	var buf [64]bool
	return lp + p.bern.LogProb(p.sub(mask, &buf), lambda)
}
