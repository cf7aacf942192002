package family

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// LambdaDist is the distribution ρ from which training simulations draw λ
// when SimOptions.Lambda is NaN: with probability Mix, λ ~ Beta(Power, 1)
// (density Power·λ^(Power−1), weight towards λ = 1, where masks have the
// most components), otherwise λ ~ U(0, 1), the paper's choice. The zero
// value is U(0, 1).
//
// The amortised posterior does not depend on ρ as long as ρ > 0 where it
// is used: q(M | x, λ) is trained at each λ against the exact
// p(M | x, λ) ∝ p(x | M) p(M | λ), and q(θ | x, M) does not involve λ. ρ
// only moves the network's training effort. Under the dimension-penalised
// prior of bszt and U(0, 1), 72 % of simulations have no compartment at
// all (pure noise) and 12 % have two or more; ρ = 0.25·U(0, 1) +
// 0.75·Beta(4, 1) gives 46 % and 33 % (docs/training.md). For the
// categorical decoder, whose network output f(x, M) does not see λ, this
// is the whole story; the autoregressive decoder sees λ, so keep Mix < 1
// there to train it at every λ.
type LambdaDist struct {
	Mix   float64 `json:"mix" yaml:"mix"`     // probability of the Beta(Power, 1) component, in [0, 1]
	Power float64 `json:"power" yaml:"power"` // its exponent a ≥ 1 (density a·λ^(a−1))
}

// Uniform reports whether d is U(0, 1).
func (d LambdaDist) Uniform() bool { return d.Mix == 0 || d.Power == 1 }

// Validate reports a distribution outside its range.
func (d LambdaDist) Validate() error {
	if !(d.Mix >= 0 && d.Mix <= 1) || (d.Mix > 0 && !(d.Power >= 1 && d.Power <= 64)) {
		return fmt.Errorf("family: λ distribution mix %v must lie in [0, 1] and power %v in [1, 64]", d.Mix, d.Power)
	}
	return nil
}

// Sample draws λ from d. U(0, 1) takes one r.Float64(), exactly as the
// simulators did before ρ existed, so their streams are unchanged;
// otherwise two (the component, then the value by inversion:
// F(λ) = λ^a).
func (d LambdaDist) Sample(r *rand.Rand) float64 {
	if d.Uniform() {
		return r.Float64()
	}
	beta := r.Float64() < d.Mix
	u := r.Float64()
	if beta {
		return math.Pow(u, 1/d.Power)
	}
	return u
}

// Density returns ρ(λ) for λ in [0, 1].
func (d LambdaDist) Density(lambda float64) float64 {
	if d.Uniform() {
		return 1
	}
	return (1 - d.Mix) + d.Mix*d.Power*math.Pow(lambda, d.Power-1)
}

// CDF returns ρ's distribution function at λ in [0, 1].
func (d LambdaDist) CDF(lambda float64) float64 {
	if d.Uniform() {
		return lambda
	}
	return (1-d.Mix)*lambda + d.Mix*math.Pow(lambda, d.Power)
}
