package dmrifit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/prismsbi/prism/family"
)

// CrossingSpec describes the synthetic crossing phantom of issue 20: for
// every protocol, SNR and crossing angle, Voxels voxels with two sticks at
// that angle, and for every protocol and SNR Voxels voxels with one stick,
// all with random orientations, stick fractions U(0.3, 0.5) (one-stick
// voxels: U(0.3, 0.6)), the rest in the ball, and the shared Gamma
// diffusivity of in-vivo white matter (mean D, standard deviation DStd).
type CrossingSpec struct {
	Protocols []string  // "ukb" (UK-Biobank-like, 105 volumes) or "shell20" (1 b0 + 20 directions at b = 2500)
	Angles    []float64 // crossing angles in degrees
	SNR       []float64 // b0 signal over noise standard deviation (Gaussian noise)
	Voxels    int       // voxels per cell
	D, DStd   float64   // mm²/s
	Seed      uint64
}

// DefaultCrossingSpec is the phantom of the issue: 45°, 60° and 90°
// crossings at SNR 20 and 40 on the UKB-like and a 20-direction
// single-shell protocol, 32 voxels per cell, d = 1.5e−3 ± 0.5e−3 mm²/s.
func DefaultCrossingSpec() CrossingSpec {
	return CrossingSpec{Protocols: []string{"ukb", "shell20"}, Angles: []float64{45, 60, 90}, SNR: []float64{20, 40},
		Voxels: 32, D: 1.5e-3, DStd: 0.5e-3, Seed: 1}
}

// CrossingVoxel is the truth of one phantom voxel.
type CrossingVoxel struct {
	Protocol string
	SNR      float64
	Angle    float64 // crossing angle in degrees; 0 for a one-stick voxel
	F        []float64
	Dir      [][3]float64
}

// CrossingPhantom is a phantom as one in-memory scan per protocol.
type CrossingPhantom struct {
	Spec  CrossingSpec
	Scans map[string]*Scan
	Truth map[string][]CrossingVoxel // per protocol, voxel v of its scan
}

// crossingDesign returns the design of a phantom protocol, from the b3s
// family's protocols (looked up in the registry: the program links the
// families through family/all).
func crossingDesign(name string, r *rand.Rand) (family.Design, error) {
	spec := map[string]string{"ukb": "ukb", "shell20": "shell:2500:20:1"}[name]
	if spec == "" {
		return family.Design{}, fmt.Errorf("dmri: crossing phantom: unknown protocol %q (want ukb or shell20)", name)
	}
	f, err := family.Lookup("b3s")
	if err != nil {
		return family.Design{}, fmt.Errorf("dmri: crossing phantom: %w", err)
	}
	ds, err := f.Designs(spec)
	if err != nil {
		return family.Design{}, fmt.Errorf("dmri: crossing phantom: %w", err)
	}
	return ds.SampleDesign(r), nil
}

// BallSticksSignal is the noiseless ball-and-sticks signal relative to S0
// with a shared Gamma-distributed diffusivity of mean d and standard
// deviation s (as the reference implementation), written out independently of the
// family's simulator: (1−Σf)(1+b s²/d)^−k + Σ f_i (1+b (g·n_i)² s²/d)^−k
// with k = (d/s)².
func BallSticksSignal(f []float64, dir [][3]float64, b float64, g [3]float64, d, s float64) float64 {
	k := d * d / (s * s)
	fiso := 1.0
	for _, fi := range f {
		fiso -= fi
	}
	val := fiso * math.Pow(1+b*s*s/d, -k)
	for i, fi := range f {
		c := g[0]*dir[i][0] + g[1]*dir[i][1] + g[2]*dir[i][2]
		val += fi * math.Pow(1+b*c*c*s*s/d, -k)
	}
	return val
}

func randomUnit(r *rand.Rand) [3]float64 {
	for {
		v := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		if n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]); n > 1e-6 {
			return [3]float64{v[0] / n, v[1] / n, v[2] / n}
		}
	}
}

// atAngle returns a random unit vector at angle deg from a.
func atAngle(r *rand.Rand, a [3]float64, deg float64) [3]float64 {
	u := randomUnit(r)
	dot := u[0]*a[0] + u[1]*a[1] + u[2]*a[2]
	for k := range 3 {
		u[k] -= dot * a[k]
	}
	n := math.Sqrt(u[0]*u[0] + u[1]*u[1] + u[2]*u[2])
	c, s := math.Cos(deg*math.Pi/180), math.Sin(deg*math.Pi/180)
	var b [3]float64
	for k := range 3 {
		b[k] = c*a[k] + s*u[k]/n
	}
	return b
}

// NewCrossingPhantom simulates the phantom: S0 = 1 plus Gaussian noise of
// standard deviation 1/SNR on every volume, normalised by the voxel's mean
// b0 as LoadScan normalises a scan. All random numbers come from the seed.
func NewCrossingPhantom(spec CrossingSpec) (*CrossingPhantom, error) {
	if len(spec.Protocols) == 0 || len(spec.Angles) == 0 || len(spec.SNR) == 0 || spec.Voxels < 1 {
		return nil, fmt.Errorf("dmri: crossing phantom needs protocols, angles, SNRs and ≥ 1 voxel per cell, got %+v", spec)
	}
	if !(spec.D > 0) || !(spec.DStd > 0) {
		return nil, fmt.Errorf("dmri: crossing phantom: diffusivity %v ± %v, want both > 0", spec.D, spec.DStd)
	}
	for _, a := range spec.Angles {
		if !(a > 0 && a <= 90) {
			return nil, fmt.Errorf("dmri: crossing phantom: angle %v°, want 0 < angle ≤ 90", a)
		}
	}
	for _, s := range spec.SNR {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("dmri: crossing phantom: SNR %v, want > 0", s)
		}
	}
	ph := &CrossingPhantom{Spec: spec, Scans: map[string]*Scan{}, Truth: map[string][]CrossingVoxel{}}
	for pi, proto := range spec.Protocols {
		r := rand.New(rand.NewPCG(spec.Seed, uint64(pi)))
		design, err := crossingDesign(proto, r)
		if err != nil {
			return nil, err
		}
		var truth []CrossingVoxel
		for _, snr := range spec.SNR {
			for range spec.Voxels {
				truth = append(truth, CrossingVoxel{Protocol: proto, SNR: snr, F: []float64{0.3 + 0.3*r.Float64()}, Dir: [][3]float64{randomUnit(r)}})
			}
			for _, ang := range spec.Angles {
				for range spec.Voxels {
					a := randomUnit(r)
					truth = append(truth, CrossingVoxel{Protocol: proto, SNR: snr, Angle: ang,
						F: []float64{0.3 + 0.2*r.Float64(), 0.3 + 0.2*r.Float64()}, Dir: [][3]float64{a, atAngle(r, a, ang)}})
				}
			}
		}
		N := design.N
		scan := &Scan{Nx: len(truth), Ny: 1, Nz: 1, Design: design, Mask: make([]bool, len(truth)), MaskSource: "phantom",
			B0: make([]float32, len(truth)), Signal: make([]float64, len(truth)*N), Skipped: map[string]int{}}
		y := make([]float64, N)
		for v, tv := range truth {
			b0, nb0 := 0.0, 0
			for j := range N {
				row := design.Row(j)
				y[j] = BallSticksSignal(tv.F, tv.Dir, row[0], [3]float64{row[1], row[2], row[3]}, spec.D, spec.DStd) + r.NormFloat64()/tv.SNR
				if row[0] <= BZero {
					b0 += y[j]
					nb0++
				}
			}
			b0 /= float64(nb0)
			if !(b0 > 0) {
				b0 = 1 // a b0 ≤ 0 is impossible at SNR ≥ 3 with S0 = 1 in practice; keep the voxel
			}
			for j := range N {
				scan.Signal[v*N+j] = y[j] / b0
			}
			scan.Voxels = append(scan.Voxels, v)
			scan.Mask[v] = true
			scan.B0[v] = float32(b0)
		}
		ph.Scans[proto], ph.Truth[proto] = scan, truth
	}
	return ph, nil
}

// CrossingCell summarises the fit of one cell of the phantom (protocol,
// SNR, angle; angle 0 = the one-stick voxels).
type CrossingCell struct {
	Protocol string  `json:"protocol"`
	SNR      float64 `json:"snr"`
	Angle    float64 `json:"angle"`
	Voxels   int     `json:"voxels"`
	// Dyads1, Dyads2: median over the cell's voxels of the angle between
	// dyads1 (dyads2) and its true stick, the two true sticks matched to
	// dyads1, dyads2 by the assignment with the smaller summed angle
	// (dyads2 undefined where no sample has a second stick: counted as
	// 90°). One-stick cells: dyads1 to the stick, Dyads2 NaN.
	Dyads1 float64 `json:"dyads1_median_deg"`
	Dyads2 float64 `json:"dyads2_median_deg"`
	// Within: median angle between dyads1 and dyads2 (two-stick cells).
	Within float64 `json:"within_median_deg"`
	// Dispersion2: median dyads2_dispersion (two-stick cells).
	Dispersion2 float64 `json:"dyads2_dispersion_median"`
	// CountRight: share of voxels whose most probable fibre count
	// (argmax nfibres_prob) is the true one; CountMeanF: the same for the
	// BedpostX count (sticks with mean f > 0.05).
	CountRight float64 `json:"count_right"`
	CountMeanF float64 `json:"count_meanf_right"`
}

func axisAngle(a, b [3]float64) float64 {
	c := math.Abs(a[0]*b[0] + a[1]*b[1] + a[2]*b[2])
	return math.Acos(math.Min(c, 1)) * 180 / math.Pi
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	n := len(y)
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}

// EvaluateCrossing summarises the fit b of the phantom's scan of protocol
// proto (b.N voxels, in scan order) with the fitter's model list, one
// cell per SNR and angle.
func EvaluateCrossing(ph *CrossingPhantom, proto string, b *Result, models []Model) ([]CrossingCell, error) {
	truth := ph.Truth[proto]
	if b.N != len(truth) {
		return nil, fmt.Errorf("dmri: fit of %d voxels for a phantom protocol of %d", b.N, len(truth))
	}
	p, err := b.StickSamples(ph.Scans[proto].Voxels)
	if err != nil {
		return nil, err
	}
	type acc struct {
		d1, d2, within, disp []float64
		right, rightF, n     int
	}
	cells := map[[2]float64]*acc{}
	var keys [][2]float64
	for v, tv := range truth {
		key := [2]float64{tv.SNR, tv.Angle}
		c := cells[key]
		if c == nil {
			c = &acc{}
			cells[key] = c
			keys = append(keys, key)
		}
		c.n++
		nf := b.NFibresProb(v, models)
		best := 0
		for k := range nf {
			if nf[k] > nf[best] {
				best = k
			}
		}
		if best == len(tv.F) {
			c.right++
		}
		cf := 0
		for i := range b.Sticks {
			if p.MeanF(i, v) > 0.05 {
				cf++
			}
		}
		if cf == len(tv.F) {
			c.rightF++
		}
		var dy [MaxFibres][3]float64
		var disp [MaxFibres]float64
		for i := range b.Sticks {
			dy[i], disp[i] = p.Dyad(i, v)
		}
		if len(tv.F) == 1 {
			c.d1 = append(c.d1, axisAngle(dy[0], tv.Dir[0]))
			continue
		}
		a2 := 90.0
		if dy[1] != ([3]float64{}) {
			a2 = axisAngle(dy[1], tv.Dir[1])
		}
		b2 := 90.0
		if dy[1] != ([3]float64{}) {
			b2 = axisAngle(dy[1], tv.Dir[0])
		}
		m1, m2 := axisAngle(dy[0], tv.Dir[0]), axisAngle(dy[0], tv.Dir[1])
		if m1+a2 <= m2+b2 {
			c.d1, c.d2 = append(c.d1, m1), append(c.d2, a2)
		} else {
			c.d1, c.d2 = append(c.d1, m2), append(c.d2, b2)
		}
		if dy[1] != ([3]float64{}) {
			c.within = append(c.within, axisAngle(dy[0], dy[1]))
		}
		c.disp = append(c.disp, disp[1])
	}
	var out []CrossingCell
	for _, k := range keys {
		c := cells[k]
		out = append(out, CrossingCell{Protocol: proto, SNR: k[0], Angle: k[1], Voxels: c.n,
			Dyads1: median(c.d1), Dyads2: median(c.d2), Within: median(c.within), Dispersion2: median(c.disp),
			CountRight: float64(c.right) / float64(c.n), CountMeanF: float64(c.rightF) / float64(c.n)})
	}
	return out, nil
}
