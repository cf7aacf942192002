package dmri

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/prismsbi/prism/family"
)

// latentClip keeps the uniforms behind a boundary value (d = 0, θ = π/2,
// φ = ±π, …) inside (0, 1) so that Latent returns finite latents; the
// resulting error in the natural parameter is ~1e−12 of its range.
const latentClip = 1e-12

// Natural implements family.Family. Orientations are reported as the polar
// angle theta ∈ [0, π/2] and azimuth phi ∈ [−π, π] of the fibre direction;
// tensors as their six independent entries; noise as its SNR.
func (m *Model) Natural(theta []float64, mask []bool) family.Params {
	var st state
	m.decode(theta, mask, &st)
	p := family.Params{Components: map[int]map[string]float64{}}
	p.Fractions = append([]float64(nil), st.frac[:m.nc]...)
	if m.shared {
		p.Shared = map[string]float64{"d": st.md, "d_std": st.ms}
	}
	for k, c := range m.spec.Compartments {
		if !mask[k] {
			continue
		}
		z := theta[m.layout.Blocks[k].Offset:]
		cs := &st.c[k]
		v := map[string]float64{}
		switch c {
		case Ball:
			v["d"] = cs.d1
		case Stick:
			v["d"] = cs.d1
			v["theta"], v["phi"], _, _ = family.Hemisphere(z[1], z[2])
		case Zeppelin:
			v["d_par"], v["d_perp"] = cs.d1, cs.d2
			v["theta"], v["phi"], _, _ = family.Hemisphere(z[2], z[3])
		case Tensor:
			for i, n := range tensorNames {
				v[n] = cs.D[tensorIndex[i][0]][tensorIndex[i][1]]
			}
		case MultiShellStick:
			v["theta"], v["phi"], _, _ = family.Hemisphere(z[0], z[1])
		case Dot, MultiShellBall:
		default:
			dispersedNatural(c, cs, z, v)
		}
		p.Components[k] = v
	}
	if st.noise >= 0 {
		p.Components[m.nc+st.noise] = map[string]float64{"snr": 1 / st.sigma}
	}
	return p
}

// tensorIndex are the (row, column) entries of D named by tensorNames.
var tensorIndex = [6][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}}

// Latent implements family.Family: it maps natural parameters of the
// components active in mask back to θ (inactive dimensions zero). It checks
// that exactly the active components are given, each with exactly its
// parameters, and that every value lies in its prior's support. A direction
// on the lower hemisphere (theta > π/2) is replaced by its antipode, which
// gives the same signal. Fractions may be omitted when a single compartment
// is active.
func (m *Model) Latent(p family.Params, mask []bool) ([]float64, error) {
	name := m.spec.Name
	if len(mask) != len(m.comps) {
		return nil, fmt.Errorf("dmri: %s: mask has %d entries, want %d", name, len(mask), len(m.comps))
	}
	theta := make([]float64, m.layout.DMax)
	for k := range p.Components {
		if k < 0 || k >= len(m.comps) {
			return nil, fmt.Errorf("dmri: %s: component index %d out of range [0, %d)", name, k, len(m.comps))
		}
		if !mask[k] {
			return nil, fmt.Errorf("dmri: %s: parameters given for component %d (%s), which is off in the mask", name, k, m.comps[k].Name)
		}
	}
	// Fractions.
	nf := m.layout.FractionLatents()
	active := 0
	for k := 0; k < m.nc; k++ {
		if mask[k] {
			active++
		}
	}
	fr := make([]float64, m.nc)
	switch {
	case len(p.Fractions) == 0 && active <= 1:
		for k := 0; k < m.nc; k++ {
			if mask[k] {
				fr[k] = 1
			}
		}
	case len(p.Fractions) != m.nc:
		return nil, fmt.Errorf("dmri: %s: %d fractions given, want %d (one per compartment, in component order)", name, len(p.Fractions), m.nc)
	default:
		sum := 0.0
		for k, f := range p.Fractions {
			switch {
			case math.IsNaN(f) || f < 0:
				return nil, fmt.Errorf("dmri: %s: fraction %d is %v; fractions must be non-negative", name, k, f)
			case !mask[k] && f != 0:
				return nil, fmt.Errorf("dmri: %s: fraction %d (%s) is %v but the compartment is off", name, k, m.comps[k].Name, f)
			}
			sum += f
		}
		if active > 0 && math.Abs(sum-1) > 1e-6 {
			return nil, fmt.Errorf("dmri: %s: fractions sum to %v, want 1", name, sum)
		}
		for k, f := range p.Fractions {
			fr[k] = f / sum
		}
	}
	if nf > 0 {
		m.sb.Inverse(fr, mask[:m.nc], theta[:nf])
	}
	// Shared parameters.
	if m.shared {
		if err := checkNames(p.Shared, []string{"d", "d_std"}, name+": shared parameters"); err != nil {
			return nil, err
		}
		so := m.layout.SharedOffset()
		var err error
		d, ds := m.spec.SharedD, m.spec.SharedDStd
		if theta[so], err = intervalLatent(p.Shared["d"], d.Lo, d.Hi, "shared d"); err != nil {
			return nil, fmt.Errorf("dmri: %s: %w", name, err)
		}
		if theta[so+1], err = intervalLatent(p.Shared["d_std"], ds.Lo, ds.Hi, "shared d_std"); err != nil {
			return nil, fmt.Errorf("dmri: %s: %w", name, err)
		}
	} else if len(p.Shared) > 0 {
		return nil, fmt.Errorf("dmri: %s: family has no shared parameters, got %v", name, sortedKeys(p.Shared))
	}
	// Component blocks.
	for k, comp := range m.comps {
		if !mask[k] {
			continue
		}
		want := make([]string, len(comp.Params))
		for i, q := range comp.Params {
			want[i] = q.Name
		}
		label := fmt.Sprintf("%s: component %d (%s)", name, k, comp.Name)
		v := p.Components[k]
		if err := checkNames(v, want, label); err != nil {
			return nil, err
		}
		z := theta[m.layout.Blocks[k].Offset:]
		var err error
		if k >= m.nc {
			z[0], err = intervalLatent(v["snr"], snrMin, snrMax, "snr")
		} else {
			err = compartmentLatent(m.spec.Compartments[k], m.spec.Diffusivity, v, z)
		}
		if err != nil {
			return nil, fmt.Errorf("dmri: %s: %w", label, err)
		}
	}
	return theta, nil
}

// compartmentLatent writes the latent block z of compartment c with
// natural parameters v; dr is the family's own-diffusivity range.
func compartmentLatent(c Compartment, dr Range, v map[string]float64, z []float64) error {
	var err error
	switch c {
	case Ball:
		z[0], err = intervalLatent(v["d"], dr.Lo, dr.Hi, "d")
	case Stick:
		if z[0], err = intervalLatent(v["d"], dr.Lo, dr.Hi, "d"); err == nil {
			z[1], z[2], err = directionLatent(v["theta"], v["phi"])
		}
	case Zeppelin:
		if z[0], err = intervalLatent(v["d_par"], dr.Lo, dr.Hi, "d_par"); err != nil {
			return err
		}
		if z[1], err = intervalLatent(v["d_perp"], dr.Lo, dr.Hi, "d_perp"); err == nil {
			z[2], z[3], err = directionLatent(v["theta"], v["phi"])
		}
	case Tensor:
		var D [3][3]float64
		for i, n := range tensorNames {
			r, c := tensorIndex[i][0], tensorIndex[i][1]
			D[r][c], D[c][r] = v[n], v[n]
		}
		err = tensorLatent(D, z[:6])
	case MultiShellStick:
		z[0], z[1], err = directionLatent(v["theta"], v["phi"])
	case Dot, MultiShellBall:
	default:
		err = dispersedLatent(c, v, z)
	}
	return err
}

// intervalLatent inverts family.Interval for v ∈ [a, b].
func intervalLatent(v, a, b float64, what string) (float64, error) {
	if math.IsNaN(v) || v < a || v > b {
		return 0, fmt.Errorf("%s = %v is outside its prior support [%v, %v]", what, v, a, b)
	}
	u := math.Min(math.Max((v-a)/(b-a), latentClip), 1-latentClip)
	return family.PhiInv(u), nil
}

// directionLatent inverts the hemisphere bijection for polar angle theta
// and azimuth phi (any real values), flipping lower-hemisphere directions
// to their antipodes.
func directionLatent(theta, phi float64) (z1, z2 float64, err error) {
	if math.IsNaN(theta) || math.IsNaN(phi) || math.IsInf(theta, 0) || math.IsInf(phi, 0) {
		return 0, 0, fmt.Errorf("direction (theta=%v, phi=%v) is not finite", theta, phi)
	}
	n := family.Direction(theta, phi)
	if n[2] < 0 {
		n = [3]float64{-n[0], -n[1], -n[2]}
	}
	c := math.Min(math.Max(n[2], latentClip), 1-latentClip)
	u := math.Min(math.Max((math.Atan2(n[1], n[0])+math.Pi)/(2*math.Pi), latentClip), 1-latentClip)
	return -family.PhiInv(c), family.PhiInv(u), nil
}

// tensorLatent finds the Cholesky factor L (positive diagonal) with
// D = 1e−3·LLᵀ + 1e−4·I and writes its lower triangle in the latent order
// (0,0),(1,0),(1,1),(2,0),(2,1),(2,2).
func tensorLatent(D [3][3]float64, z []float64) error {
	var A, L [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			if math.IsNaN(D[i][j]) || math.IsInf(D[i][j], 0) {
				return fmt.Errorf("tensor entry D[%d][%d] = %v is not finite", i, j, D[i][j])
			}
			A[i][j] = D[i][j] / 1e-3
		}
		A[i][i] -= 1e-4 / 1e-3
	}
	for j := 0; j < 3; j++ {
		s := A[j][j]
		for k := 0; k < j; k++ {
			s -= L[j][k] * L[j][k]
		}
		if !(s > 0) {
			return fmt.Errorf("tensor D − 1e-4·I is not positive definite (the prior's tensors all have eigenvalues > 1e-4 mm²/s)")
		}
		L[j][j] = math.Sqrt(s)
		for i := j + 1; i < 3; i++ {
			t := A[i][j]
			for k := 0; k < j; k++ {
				t -= L[i][k] * L[j][k]
			}
			L[i][j] = t / L[j][j]
		}
	}
	for i, rc := range [6][2]int{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {2, 2}} {
		z[i] = L[rc[0]][rc[1]]
	}
	return nil
}

// checkNames reports missing or unknown keys of v.
func checkNames(v map[string]float64, want []string, label string) error {
	for _, n := range want {
		if _, ok := v[n]; !ok {
			return fmt.Errorf("dmri: %s: missing parameter %q (want %v)", label, n, want)
		}
	}
	for n := range v {
		found := false
		for _, w := range want {
			found = found || n == w
		}
		if !found {
			return fmt.Errorf("dmri: %s: unknown parameter %q (want %v)", label, n, want)
		}
	}
	return nil
}

func sortedKeys(v map[string]float64) []string {
	ks := make([]string, 0, len(v))
	for k := range v {
		ks = append(ks, strconv.Quote(k))
	}
	sort.Strings(ks)
	return ks
}

// NaturalInto implements family.NaturalWriter: Natural's values in the
// flat layout of family.NaturalIndex, without maps (the voxel pipeline
// reads thousands of samples per voxel). Dispersed compartments still go
// through a map of their parameters.
func (m *Model) NaturalInto(theta []float64, mask []bool, out []float64) {
	var st state
	m.decode(theta, mask, &st)
	copy(out, st.frac[:m.nc])
	off := m.nc
	for _, p := range m.layout.Shared {
		switch p.Name {
		case "d":
			out[off] = st.md
		case "d_std":
			out[off] = st.ms
		}
		off++
	}
	for k, comp := range m.comps {
		o := out[off : off+len(comp.Params)]
		off += len(comp.Params)
		if !mask[k] {
			for i := range o {
				o[i] = math.NaN()
			}
			continue
		}
		if k >= m.nc { // the noise model
			o[0] = 1 / st.sigma
			continue
		}
		z := theta[m.layout.Blocks[k].Offset:]
		cs := &st.c[k]
		switch c := m.spec.Compartments[k]; c {
		case Ball:
			o[0] = cs.d1
		case Stick:
			o[0] = cs.d1
			o[1], o[2], _, _ = family.Hemisphere(z[1], z[2])
		case Zeppelin:
			o[0], o[1] = cs.d1, cs.d2
			o[2], o[3], _, _ = family.Hemisphere(z[2], z[3])
		case Tensor:
			for i := range tensorNames {
				o[i] = cs.D[tensorIndex[i][0]][tensorIndex[i][1]]
			}
		case MultiShellStick:
			o[0], o[1], _, _ = family.Hemisphere(z[0], z[1])
		case Dot, MultiShellBall:
		default:
			v := map[string]float64{}
			dispersedNatural(c, cs, z, v)
			for i, p := range comp.Params {
				o[i] = v[p.Name]
			}
		}
	}
}
