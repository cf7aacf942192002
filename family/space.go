package family

import "math/big"

// ModelSpaceSizer is implemented by families whose number of possible masks
// is not what ModelSpaceSize derives from their mask prior.
type ModelSpaceSizer interface {
	ModelSpaceSize() *big.Int
}

// Counts returns the numbers of base and noise components of f.
func Counts(f Family) (base, noise int) {
	for _, c := range f.Components() {
		if c.Kind == Noise {
			noise++
		} else {
			base++
		}
	}
	return base, noise
}

// ModelSpaceSize returns the exact number of masks with positive prior
// probability (for some λ ∈ (0,1)): 2^K·M for K base and M noise components,
// minus the base sets a BernoulliPrior with MinActive = m excludes
// (Σ_{i<m} C(K,i) of them). Families can override it by implementing
// ModelSpaceSizer.
func ModelSpaceSize(f Family) *big.Int {
	if s, ok := f.(ModelSpaceSizer); ok {
		return s.ModelSpaceSize()
	}
	K, M := Counts(f)
	base := new(big.Int).Lsh(big.NewInt(1), uint(K))
	if p, ok := f.MaskPrior().(BernoulliPrior); ok {
		for i := 0; i < min(p.MinActive, K+1); i++ {
			base.Sub(base, new(big.Int).Binomial(int64(K), int64(i)))
		}
	}
	return base.Mul(base, big.NewInt(int64(M)))
}
