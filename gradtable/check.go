package gradtable

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/prismsbi/prism/family"
)

// Limits of CheckDesign.
const (
	// MinWeighted is the fewest diffusion-weighted (b > BZero) volumes a
	// table must hold: as many as a diffusion tensor has unknowns, the
	// least from which fibre directions can be told apart.
	MinWeighted = 6
	// BMaxLow and BMaxHigh bound the largest b-value of a plausible table
	// in s/mm². Below BMaxLow the signal barely decays (b-values in ms/µm²,
	// e.g. 2.5 for 2500 s/mm², land here); above BMaxHigh lie b-values in
	// s/m² or ×10⁶ typos (ex-vivo and preclinical tables stay below it).
	BMaxLow  = 200.0
	BMaxHigh = 5e4
	// unitTol is the accepted deviation from unit length of a direction.
	unitTol = 1e-3
	// minDyadicRatio is the smallest accepted ratio of the sixth to the
	// first singular value of the diffusion-weighted directions' dyadic
	// matrix (rows gx², gy², gz², 2gxgy, 2gxgz, 2gygz): zero when the
	// directions span fewer than six distinct axes or lie in one plane
	// or on a cone; well-spread tables have ratios above 0.1.
	minDyadicRatio = 1e-3
)

// ErrUninformative marks a design from which a diffusion model cannot be
// identified (CheckDesign).
var ErrUninformative = errors.New("the acquisition table carries no usable diffusion weighting")

// CheckDesign returns an error when the table d (b [s/mm²], gx, gy, gz per
// measurement) cannot inform a diffusion model, so that a posterior
// fitted to it would only repeat the prior: a non-finite or negative b,
// a diffusion-weighted row without a unit direction, fewer than
// MinWeighted diffusion-weighted rows, a largest b outside [BMaxLow,
// BMaxHigh] (with a hint when the values look like ms/µm² or s/m²), or
// directions that do not span six distinct axes. Errors wrap
// ErrUninformative, except those for malformed rows.
func CheckDesign(d family.Design) error {
	if d.CovDim != 4 {
		return fmt.Errorf("design %q has %d covariates per measurement, want 4 (b, gx, gy, gz)", d.Name, d.CovDim)
	}
	if d.N <= 0 || len(d.Cov) < 4*d.N {
		return fmt.Errorf("design %q has no measurements", d.Name)
	}
	var weighted [][3]float64
	bmax := 0.0
	for j := range d.N {
		r := d.Row(j)
		b := r[0]
		if math.IsNaN(b) || math.IsInf(b, 0) || b < 0 {
			return fmt.Errorf("measurement %d: b-value %v; b-values must be finite and non-negative (s/mm²)", j+1, b)
		}
		bmax = math.Max(bmax, b)
		if b <= BZero {
			continue
		}
		g := [3]float64{r[1], r[2], r[3]}
		if n := math.Sqrt(dot(g, g)); !(math.Abs(n-1) <= unitTol) {
			return fmt.Errorf("measurement %d: b = %v s/mm² with direction %v of length %v; diffusion-weighted measurements need a unit direction", j+1, b, g, n)
		}
		weighted = append(weighted, g)
	}
	if bmax < BMaxLow || bmax > BMaxHigh {
		hint := ""
		switch {
		case bmax > 0 && bmax < 10:
			hint = fmt.Sprintf("; they look like ms/µm² (e.g. %v = %v s/mm²): multiply them by 1000", bmax, bmax*1000)
		case bmax > 1e8:
			hint = fmt.Sprintf("; they look like s/m² (%v s/m² = %v s/mm²): divide them by 10⁶", bmax, bmax/1e6)
		case bmax <= BZero:
			hint = fmt.Sprintf("; every volume is a b ≤ %v s/mm² (b≈0) volume", BZero)
		}
		return fmt.Errorf("%w: the largest b-value is %v, want one in [%v, %v] s/mm²%s", ErrUninformative, bmax, BMaxLow, BMaxHigh, hint)
	}
	if len(weighted) < MinWeighted {
		return fmt.Errorf("%w: %d diffusion-weighted (b > %v s/mm²) measurements, want at least %d", ErrUninformative, len(weighted), BZero, MinWeighted)
	}
	if axes := distinctAxes(weighted); axes < MinWeighted {
		return fmt.Errorf("%w: the %d diffusion-weighted directions point along %d distinct axes, want at least %d", ErrUninformative, len(weighted), axes, MinWeighted)
	}
	if r := dyadicRatio(weighted); !(r >= minDyadicRatio) {
		return fmt.Errorf("%w: the %d diffusion-weighted directions do not spread over the sphere (they lie in a plane or on a cone; dyadic singular-value ratio %.2g, want ≥ %g)", ErrUninformative, len(weighted), r, minDyadicRatio)
	}
	return nil
}

// distinctAxes counts the directions of g that differ by more than about
// one degree up to sign (g and −g measure the same axis).
func distinctAxes(g [][3]float64) int {
	const cosTol = 0.9998 // cos 1.15°
	var axes [][3]float64
next:
	for _, v := range g {
		for _, a := range axes {
			if math.Abs(dot(v, a)) > cosTol {
				continue next
			}
		}
		axes = append(axes, v)
	}
	return len(axes)
}

// dyadicRatio returns σ₆/σ₁ of the matrix with rows (gx², gy², gz²,
// √2 gxgy, √2 gxgz, √2 gygz) for the unit directions g (√2 makes the map
// from gᵀg to its row an isometry, so that the ratio does not depend on
// the frame).
func dyadicRatio(g [][3]float64) float64 {
	a := mat.NewDense(len(g), 6, nil)
	for i, v := range g {
		a.SetRow(i, []float64{v[0] * v[0], v[1] * v[1], v[2] * v[2], math.Sqrt2 * v[0] * v[1], math.Sqrt2 * v[0] * v[2], math.Sqrt2 * v[1] * v[2]})
	}
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDNone) {
		return 0
	}
	sv := svd.Values(nil)
	if sv[0] == 0 {
		return 0
	}
	return sv[5] / sv[0]
}

// MaxSignalRatio bounds a plausible b0-normalised signal |S/S0|:
// diffusion only attenuates, so S/S0 stays near or below 1 up to noise;
// values a hundred times larger are corrupt (a dropout written as 1e30,
// an overflow), not tissue.
const MaxSignalRatio = 100.0
