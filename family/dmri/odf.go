package dmri

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/family"
	"gonum.org/v1/gonum/integrate/quad"
)

// ODF conversion of samples (paper App. C.2 "Conversion to ODF"). Every compartment of a sample maps to an orientation
// distribution on the unit sphere (densities in 1/sr, integrating to 1):
//
//   - Stick, MultiShellStick: the antipodally symmetric Dirac
//     ½(δ_n + δ_{−n}), reported as an ODFPeak (axis n, weight f_k);
//   - Zeppelin, Tensor: the analytic single-tensor ODF of Aganj et al.
//     (2010), 1/(4π √det D (nᵀD⁻¹n)^{3/2}) (zeppelin: D = diag(d∥, d⊥, d⊥)
//     about its axis);
//   - Watson/Bingham sticks and zeppelins, NODDI, SANDI: their Watson or
//     Bingham ODF (SANDI's soma share (1−f_ec)(1−f_in) is isotropic);
//   - Ball, MultiShellBall, Dot: the uniform density 1/(4π).
//
// The sample's ODF is the fraction-weighted mixture Σ_k f_k ODF_k. Tensor
// ODFs need positive diffusivities: a zeppelin with d∥ = 0 or d⊥ = 0 is a
// degenerate tensor (a Dirac or a girdle); its density is computed with the
// diffusivities raised to tensorODFFloor.

// tensorODFFloor is the smallest diffusivity (mm²/s) used in a tensor ODF.
const tensorODFFloor = 1e-7

// ODFPeak is a Dirac component of an ODF: a fibre axis (either sign) and its
// weight in the mixture.
type ODFPeak struct {
	Dir    [3]float64
	Weight float64
}

// ODFOptions controls ODF conversion.
type ODFOptions struct {
	// NoIsotropic drops the isotropic parts (Ball, MultiShellBall, Dot and
	// SANDI's soma share) and renormalises the remaining weights to sum to
	// one (the reference's "no_isotropic" option). A sample with no
	// anisotropic part then has the zero ODF.
	NoIsotropic bool
}

// odfPart is one compartment's contribution in a decoded sample.
type odfPart struct {
	c    Compartment
	w    float64 // weight of the anisotropic part
	iso  float64 // weight of the isotropic part
	cs   *compState
	Dinv [3][3]float64 // tensor/zeppelin: D⁻¹
	sdet float64       // √det D
}

// odfParts decodes θ and lists the weighted parts.
func (m *Model) odfParts(theta []float64, mask []bool, opt ODFOptions, st *state) (parts []odfPart, iso float64, peaks []ODFPeak) {
	m.decode(theta, mask, st)
	total := 0.0
	for k, c := range m.spec.Compartments {
		if !st.on[k] {
			continue
		}
		f := st.frac[k]
		cs := &st.c[k]
		p := odfPart{c: c, cs: cs, w: f}
		switch c {
		case Ball, MultiShellBall, Dot:
			p.w, p.iso = 0, f
		case Stick, MultiShellStick:
			peaks = append(peaks, ODFPeak{Dir: cs.n, Weight: f})
			total += f
			continue
		case Zeppelin:
			a, b := math.Max(cs.d1, tensorODFFloor), math.Max(cs.d2, tensorODFFloor)
			p.sdet = math.Sqrt(a * b * b)
			// D⁻¹ = (1/b) I + (1/a − 1/b) nnᵀ.
			for i := 0; i < 3; i++ {
				for j := 0; j < 3; j++ {
					p.Dinv[i][j] = (1/a - 1/b) * cs.n[i] * cs.n[j]
				}
				p.Dinv[i][i] += 1 / b
			}
		case Tensor:
			p.Dinv, p.sdet = inverse3(cs.D)
		case SANDIWatson, SANDIBingham:
			p.iso = f * cs.disp.c0
			p.w = f - p.iso
		}
		if opt.NoIsotropic {
			p.iso = 0
		}
		total += p.w + p.iso
		iso += p.iso
		if p.w > 0 {
			parts = append(parts, p)
		}
	}
	if opt.NoIsotropic && total > 0 {
		for i := range parts {
			parts[i].w /= total
		}
		for i := range peaks {
			peaks[i].Weight /= total
		}
	}
	return parts, iso, peaks
}

// inverse3 returns the inverse and √det of a symmetric positive definite
// 3×3 matrix.
func inverse3(D [3][3]float64) (inv [3][3]float64, sdet float64) {
	c00 := D[1][1]*D[2][2] - D[1][2]*D[2][1]
	c01 := D[1][2]*D[2][0] - D[1][0]*D[2][2]
	c02 := D[1][0]*D[2][1] - D[1][1]*D[2][0]
	det := D[0][0]*c00 + D[0][1]*c01 + D[0][2]*c02
	inv[0][0] = c00 / det
	inv[0][1] = (D[0][2]*D[2][1] - D[0][1]*D[2][2]) / det
	inv[0][2] = (D[0][1]*D[1][2] - D[0][2]*D[1][1]) / det
	inv[1][1] = (D[0][0]*D[2][2] - D[0][2]*D[2][0]) / det
	inv[1][2] = (D[0][2]*D[1][0] - D[0][0]*D[1][2]) / det
	inv[2][2] = (D[0][0]*D[1][1] - D[0][1]*D[1][0]) / det
	inv[1][0], inv[2][0], inv[2][1] = inv[0][1], inv[0][2], inv[1][2]
	return inv, math.Sqrt(det)
}

// density is the part's ODF at the unit vector n (without its weight).
func (p *odfPart) density(n [3]float64) float64 {
	switch p.c {
	case Zeppelin, Tensor:
		return TensorODF(n, p.Dinv, p.sdet)
	}
	ds := &p.cs.disp
	c := dot(n, ds.mu)
	e := ds.kappa * (c*c - 1)
	if ds.beta != 0 {
		cb := dot(n, ds.mub)
		e += ds.beta * cb * cb
	}
	return math.Exp(e - ds.logZA) // logZA is log Z − κ
}

// TensorODF is the single-tensor ODF 1/(4π √det D (nᵀD⁻¹n)^{3/2}) (Aganj et
// al. 2010) given D⁻¹ and √det D.
func TensorODF(n [3]float64, Dinv [3][3]float64, sqrtDet float64) float64 {
	q := quadForm(n, Dinv)
	return 1 / (4 * math.Pi * sqrtDet * q * math.Sqrt(q))
}

// ODF evaluates the ODF of one sample (θ, mask) at the unit vectors dirs:
// out[j] receives the continuous part of the density (1/sr) and the Dirac
// parts (sticks) are returned as peaks. The continuous part plus the peak
// weights integrate to 1 (0 when opt.NoIsotropic leaves nothing).
func (m *Model) ODF(theta []float64, mask []bool, dirs [][3]float64, opt ODFOptions, out []float64) []ODFPeak {
	var st state
	parts, iso, peaks := m.odfParts(theta, mask, opt, &st)
	for j, n := range dirs {
		v := iso / (4 * math.Pi)
		for i := range parts {
			v += parts[i].w * parts[i].density(n)
		}
		out[j] = v
	}
	return peaks
}

// SphereGrid returns n ≥ 1 near-uniform unit vectors on the whole sphere
// (Fibonacci spiral); each represents the area 4π/n, so Σ_j ODF(dir_j)·4π/n
// approximates the integral of a smooth ODF.
func SphereGrid(n int) [][3]float64 {
	dirs := make([][3]float64, n)
	golden := math.Pi * (3 - math.Sqrt(5))
	for i := range dirs {
		z := 1 - (2*float64(i)+1)/float64(n)
		r := math.Sqrt(math.Max(0, 1-z*z))
		s, c := math.Sincos(golden * float64(i))
		dirs[i] = [3]float64{r * c, r * s, z}
	}
	return dirs
}

// NumSH is the number of real symmetric spherical harmonics of even order
// up to L: (L/2+1)(L+1).
func NumSH(L int) int { return (L/2 + 1) * (L + 1) }

// RealSH writes the real, orthonormal, antipodally symmetric spherical
// harmonics of even order l = 0, 2, …, L (L even) at the unit vector n into
// out (length NumSH(L)), index j = l(l−1)/2 + l + m for m = −l…l:
//
//	Y_lm = √2 N_l^|m| P_l^|m|(cos θ) sin(|m|φ)  (m < 0),
//	Y_l0 = N_l^0 P_l(cos θ),
//	Y_lm = √2 N_l^m P_l^m(cos θ) cos(mφ)      (m > 0),
//
// N_l^m = √((2l+1)/(4π)·(l−m)!/(l+m)!), without the Condon–Shortley phase
// (the descoteaux07 convention of DIPY up to the sign of odd m).
func RealSH(L int, n [3]float64, out []float64) {
	if L < 0 || L%2 != 0 {
		panic(fmt.Sprintf("dmri: RealSH: order %d must be even and ≥ 0", L))
	}
	ct := math.Max(-1, math.Min(1, n[2]))
	st := math.Hypot(n[0], n[1])
	phi := math.Atan2(n[1], n[0])
	// Normalised associated Legendre functions P̄_l^m = N_l^m P_l^m by the
	// standard stable recurrences in l for each m.
	for m := 0; m <= L; m++ {
		// P̄_m^m = (−1)^0 √((2m+1)/(4π) ∏ (2i−1)/(2i)) sin^m θ.
		pmm := math.Sqrt(1 / (4 * math.Pi))
		for i := 1; i <= m; i++ {
			pmm *= math.Sqrt(float64(2*i+1)/float64(2*i)) * st
		}
		if m == 0 {
			pmm = math.Sqrt(1 / (4 * math.Pi))
		}
		sm, cm := math.Sincos(float64(m) * phi)
		put := func(l int, p float64) {
			if l%2 != 0 {
				return
			}
			base := l*(l-1)/2 + l
			if m == 0 {
				out[base] = p
				return
			}
			out[base+m] = math.Sqrt2 * p * cm
			out[base-m] = math.Sqrt2 * p * sm
		}
		put(m, pmm)
		if m == L {
			break
		}
		// P̄_{m+1}^m = √(2m+3) cos θ P̄_m^m.
		p1 := math.Sqrt(float64(2*m+3)) * ct * pmm
		put(m+1, p1)
		p0 := pmm
		for l := m + 2; l <= L; l++ {
			fl, fm := float64(l), float64(m)
			a := math.Sqrt((4*fl*fl - 1) / (fl*fl - fm*fm))
			b := math.Sqrt(((fl-1)*(fl-1) - fm*fm) / (4*(fl-1)*(fl-1) - 1))
			p0, p1 = p1, a*(ct*p1-b*p0)
			put(l, p1)
		}
	}
}

// shNodes are the graded quadrature nodes used to project ODFs: s = 1 − t
// (t the cosine to the part's axis) on the pieces [2^{−j−1}, 2^{−j}],
// j < shPieces, and [0, 2^{−shPieces}], with 8-point Gauss–Legendre each,
// on both hemispheres, and a uniform azimuth grid.
const (
	shPieces = 24
	shGL     = 8
)

var shS, shW [(shPieces + 1) * shGL]float64

func init() {
	var x, w [shGL]float64
	for j := 0; j <= shPieces; j++ {
		hi := math.Ldexp(1, -j)
		lo := hi / 2
		if j == shPieces {
			lo = 0 // the innermost piece [0, 2^{−24}]
		}
		quad.Legendre{}.FixedLocations(x[:], w[:], lo, hi)
		copy(shS[j*shGL:], x[:])
		copy(shW[j*shGL:], w[:])
	}
}

// ODFSH returns the real symmetric SH coefficients (order L, see RealSH)
// of the ODF of one sample: peaks contribute w·Y_lm(n) exactly (the SH
// expansion of ½(δ_n + δ_{−n})), the isotropic part only to Y_00, and the
// continuous parts ∫ f(n) Y_lm(n) dn by quadrature around each part's main
// axis (pole μ, s = 1 − μ·n graded geometrically down to 2^{−24} so that
// Watson/Bingham ODFs up to κ = KappaMax are resolved; azimuth: 2L + 64
// points). Tested: Watson coefficients agree with their Funk–Hecke form to
// 1e−11, and full samples integrate to 1 within 1e−9.
func (m *Model) ODFSH(theta []float64, mask []bool, L int, opt ODFOptions) []float64 {
	var st state
	parts, iso, peaks := m.odfParts(theta, mask, opt, &st)
	nsh := NumSH(L)
	c := make([]float64, nsh)
	y := make([]float64, nsh)
	c[0] = iso / math.Sqrt(4*math.Pi) // ∫ (iso/4π) Y_00 = iso/√(4π)
	for _, p := range peaks {
		RealSH(L, p.Dir, y)
		for j := range c {
			c[j] += p.Weight * y[j]
		}
	}
	for i := range parts {
		p := &parts[i]
		mu, e1, e2, aniso := p.frame()
		// Azimuths: enough for Y_lm and for the part's own azimuthal width
		// √(λ_min/λ_mid) (tensors; 1 for axially symmetric parts).
		nphi := 2*L + 64 + int(40*aniso)
		for h := 0; h < 2; h++ { // upper and lower hemisphere about μ
			sg := 1.0 - 2*float64(h)
			for q := range shS {
				s := shS[q]
				t := sg * (1 - s)
				r := math.Sqrt(s * (2 - s))
				wq := shW[q] * 2 * math.Pi / float64(nphi) * p.w
				for a := 0; a < nphi; a++ {
					sn, cs := math.Sincos(2 * math.Pi * float64(a) / float64(nphi))
					var n [3]float64
					for k := range n {
						n[k] = t*mu[k] + r*(cs*e1[k]+sn*e2[k])
					}
					f := wq * p.density(n)
					if f == 0 {
						continue
					}
					RealSH(L, n, y)
					for j := range c {
						c[j] += f * y[j]
					}
				}
			}
		}
	}
	return c
}

// frame returns the main axis of a part, two perpendicular unit vectors
// and, for tensors, √(λ_mid/λ_min) (the inverse azimuthal width of the
// ODF about its axis in units of the polar one; 1 otherwise).
func (p *odfPart) frame() (mu, e1, e2 [3]float64, aniso float64) {
	aniso = 1
	switch p.c {
	case Zeppelin:
		mu = p.cs.n
	case Tensor:
		// Principal axis: eigenvector of the largest eigenvalue; e1, e2
		// the other eigenvectors.
		w, v := jacobi3(p.cs.D)
		hi, mid, lo := 0, 1, 2
		if w[hi] < w[mid] {
			hi, mid = mid, hi
		}
		if w[mid] < w[lo] {
			mid, lo = lo, mid
		}
		if w[hi] < w[mid] {
			hi, mid = mid, hi
		}
		col := func(k int) [3]float64 { return [3]float64{v[0][k], v[1][k], v[2][k]} }
		aniso = math.Sqrt(w[mid] / w[lo])
		return col(hi), col(mid), cross(col(hi), col(mid)), aniso
	default:
		mu = p.cs.disp.mu
	}
	e1 = anyPerpendicular(mu)
	return mu, e1, cross(mu, e1), aniso
}

// ODFSample is one posterior sample for ODF averaging.
type ODFSample struct {
	Theta []float64
	Mask  []bool
}

// PosteriorODF averages the ODFs of posterior samples (paper App. C.2):
// the global (model-averaged) posterior-predictive ODF is the mean over all
// samples; the local ODF of a model M is the mean over the samples with
// mask M (keyed by family.MaskString). Continuous parts are evaluated at
// dirs; each returned ODFAverage carries the averaged density and the
// peaks of its samples with weights divided by its sample count.
func (m *Model) PosteriorODF(samples []ODFSample, dirs [][3]float64, opt ODFOptions) (global ODFAverage, local map[string]*ODFAverage) {
	local = map[string]*ODFAverage{}
	global.Density = make([]float64, len(dirs))
	buf := make([]float64, len(dirs))
	for _, s := range samples {
		peaks := m.ODF(s.Theta, s.Mask, dirs, opt, buf)
		key := family.MaskString(s.Mask)
		l := local[key]
		if l == nil {
			l = &ODFAverage{Density: make([]float64, len(dirs))}
			local[key] = l
		}
		for j, v := range buf {
			global.Density[j] += v
			l.Density[j] += v
		}
		global.Peaks = append(global.Peaks, peaks...)
		l.Peaks = append(l.Peaks, peaks...)
		l.N++
		global.N++
	}
	global.normalise()
	for _, l := range local {
		l.normalise()
	}
	return global, local
}

// PosteriorODFSH is PosteriorODF in the SH representation (order L): the
// mean of ODFSH over all samples (global) and over the samples of each mask
// (local, keyed by family.MaskString).
func (m *Model) PosteriorODFSH(samples []ODFSample, L int, opt ODFOptions) (global []float64, local map[string][]float64) {
	global = make([]float64, NumSH(L))
	local = map[string][]float64{}
	count := map[string]int{}
	for _, s := range samples {
		c := m.ODFSH(s.Theta, s.Mask, L, opt)
		key := family.MaskString(s.Mask)
		l := local[key]
		if l == nil {
			l = make([]float64, len(c))
			local[key] = l
		}
		for j, v := range c {
			global[j] += v
			l[j] += v
		}
		count[key]++
	}
	if len(samples) > 0 {
		for j := range global {
			global[j] /= float64(len(samples))
		}
	}
	for key, l := range local {
		for j := range l {
			l[j] /= float64(count[key])
		}
	}
	return global, local
}

// ODFAverage is a sample-averaged ODF: the continuous density at the grid
// directions and the Dirac peaks (each sample's peak weight divided by N).
type ODFAverage struct {
	Density []float64
	Peaks   []ODFPeak
	N       int
}

func (a *ODFAverage) normalise() {
	if a.N == 0 {
		return
	}
	for j := range a.Density {
		a.Density[j] /= float64(a.N)
	}
	for j := range a.Peaks {
		a.Peaks[j].Weight /= float64(a.N)
	}
}
