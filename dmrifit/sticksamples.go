package dmrifit

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// MaxFibres is the largest number of sticks in a BedpostX-layout folder.
const MaxFibres = 3

// StickSamples holds posterior samples of the ball-and-sticks parameters for
// a set of voxels: for voxel v (an index into Voxels) and sample s the
// value of a per-voxel quantity is at [v*Samples+s]. Directions are unit
// axes given by θ (polar) and φ (azimuth) in the b-vectors' frame; f is
// the stick's signal fraction; D and DStd are the diffusivity's mean and
// standard deviation (mm²/s); S0 the fitted non-diffusion signal relative
// to the b0 the data were divided by (all 1 when a method has no S0).
type StickSamples struct {
	Fibres  int
	Samples int
	Voxels  []int // linear grid indices, as Scan.Voxels
	F       [MaxFibres][]float32
	Theta   [MaxFibres][]float32
	Phi     [MaxFibres][]float32
	D       []float32
	DStd    []float32
	S0      []float32
	// Active[i], when not nil, says in which samples stick i is present
	// (the amortized fit draws models with fewer sticks); absent samples
	// have f = 0 and carry no direction. Nil means present in every
	// sample (MCMC).
	Active [MaxFibres][]bool
}

// NewStickSamples allocates a zero posterior for the voxels (linear grid
// indices) with the given numbers of sticks and samples.
func NewStickSamples(voxels []int, fibres, samples int) (*StickSamples, error) {
	if fibres < 1 || fibres > MaxFibres {
		return nil, fmt.Errorf("dmri: %d fibres, want 1..%d", fibres, MaxFibres)
	}
	if samples < 1 {
		return nil, fmt.Errorf("dmri: %d samples, want ≥ 1", samples)
	}
	n := len(voxels) * samples
	p := &StickSamples{Fibres: fibres, Samples: samples, Voxels: voxels,
		D: make([]float32, n), DStd: make([]float32, n), S0: make([]float32, n)}
	for i := 0; i < fibres; i++ {
		p.F[i] = make([]float32, n)
		p.Theta[i] = make([]float32, n)
		p.Phi[i] = make([]float32, n)
	}
	return p, nil
}

// Dir returns the unit direction of stick i in sample s of voxel v.
func (p *StickSamples) Dir(i, v, s int) [3]float64 {
	k := v*p.Samples + s
	st, ct := math.Sincos(float64(p.Theta[i][k]))
	sp, cp := math.Sincos(float64(p.Phi[i][k]))
	return [3]float64{st * cp, st * sp, ct}
}

// Dyad returns the principal eigenvector of stick i's mean dyadic tensor
// (1/S) Σ_s n_s n_sᵀ over the samples of voxel v in which the stick is
// present (sign chosen with z ≥ 0), and the dispersion 1 − λ_max (the
// tensor has trace 1: 0 when every sample has the same axis, 2/3 for
// uniformly spread axes). When the stick is present in no sample the
// direction is the zero vector and the dispersion 1.
func (p *StickSamples) Dyad(i, v int) (dir [3]float64, dispersion float64) {
	var T [9]float64
	count := 0
	for s := 0; s < p.Samples; s++ {
		if p.Active[i] != nil && !p.Active[i][v*p.Samples+s] {
			continue
		}
		count++
		n := p.Dir(i, v, s)
		for a := range 3 {
			for b := range 3 {
				T[3*a+b] += n[a] * n[b]
			}
		}
	}
	if count == 0 {
		return [3]float64{}, 1
	}
	for k := range T {
		T[k] /= float64(count)
	}
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(3, T[:]), true) {
		return [3]float64{}, math.NaN()
	}
	vals := eig.Values(nil)
	var V mat.Dense
	eig.VectorsTo(&V)
	dir = [3]float64{V.At(0, 2), V.At(1, 2), V.At(2, 2)}
	if dir[2] < 0 || (dir[2] == 0 && (dir[1] < 0 || (dir[1] == 0 && dir[0] < 0))) {
		dir = [3]float64{-dir[0], -dir[1], -dir[2]}
	}
	return dir, 1 - vals[2]
}

// MeanF returns the posterior mean fraction of stick i in voxel v.
func (p *StickSamples) MeanF(i, v int) float64 {
	return meanOf(p.F[i][v*p.Samples : (v+1)*p.Samples])
}

// SortByMeanFraction relabels the sticks of every voxel by decreasing
// posterior mean fraction, keeping each stick's samples together (the
// labelling BedpostX uses).
func (p *StickSamples) SortByMeanFraction() {
	S := p.Samples
	idx := make([]int, p.Fibres)
	tmp := make([]float32, 3*p.Fibres*S)
	tmpA := make([]bool, p.Fibres*S)
	for v := range p.Voxels {
		means := make([]float64, p.Fibres)
		for i := range idx {
			idx[i] = i
			means[i] = p.MeanF(i, v)
		}
		sort.SliceStable(idx, func(a, b int) bool { return means[idx[a]] > means[idx[b]] })
		for i, src := range idx {
			copy(tmp[(3*i)*S:], p.F[src][v*S:(v+1)*S])
			copy(tmp[(3*i+1)*S:], p.Theta[src][v*S:(v+1)*S])
			copy(tmp[(3*i+2)*S:], p.Phi[src][v*S:(v+1)*S])
			if p.Active[src] != nil {
				copy(tmpA[i*S:], p.Active[src][v*S:(v+1)*S])
			}
		}
		for i := range idx {
			copy(p.F[i][v*S:(v+1)*S], tmp[(3*i)*S:(3*i+1)*S])
			copy(p.Theta[i][v*S:(v+1)*S], tmp[(3*i+1)*S:(3*i+2)*S])
			copy(p.Phi[i][v*S:(v+1)*S], tmp[(3*i+2)*S:(3*i+3)*S])
			if p.Active[i] != nil {
				copy(p.Active[i][v*S:(v+1)*S], tmpA[i*S:(i+1)*S])
			}
		}
	}
}

func meanOf(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

// angles returns θ ∈ [0, π/2], φ ∈ (−π, π] of the axis ±n.
func angles(n [3]float64) (th, ph float64) {
	if n[2] < 0 {
		n = [3]float64{-n[0], -n[1], -n[2]}
	}
	th = math.Acos(math.Max(-1, math.Min(1, n[2])))
	ph = math.Atan2(n[1], n[0])
	if ph == -math.Pi {
		ph = math.Pi
	}
	return th, ph
}
