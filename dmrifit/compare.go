package dmrifit

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/prismsbi/prism/nifti"
)

// FibreThreshold is the mean stick fraction above which a stick counts as
// present (the reference implementation's fibre-count rule).
const FibreThreshold = 0.05

// Folder is the part of a BedpostX-layout output folder that Compare uses.
type Folder struct {
	Dir        string
	Ref        *nifti.Header
	Nx, Ny, Nz int
	Mask       []bool
	Fibres     int                  // number of dyads{i} present (i = 1, 2, …)
	Dyads      [MaxFibres][]float32 // x, y, z volumes of dyads{i} (3·nvox)
	F          [MaxFibres][]float32 // mean_f{i}samples
}

// ReadBedpostX reads nodif_brain_mask, dyads{i} and mean_f{i}samples
// (.nii.gz or .nii) from dir for i = 1, 2, … as long as dyads{i} exists.
func ReadBedpostX(dir string) (*Folder, error) {
	read := func(name string) (*nifti.Volume, error) {
		for _, ext := range []string{".nii.gz", ".nii"} {
			v, err := nifti.Read(filepath.Join(dir, name+ext))
			if err == nil {
				return v, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("dmri: %w", err)
			}
		}
		return nil, fmt.Errorf("dmri: %s: no %s.nii.gz or %s.nii: %w", dir, name, name, fs.ErrNotExist)
	}
	m, err := read("nodif_brain_mask")
	if err != nil {
		return nil, err
	}
	nx, ny, nz, _ := m.Shape()
	f := &Folder{Dir: dir, Ref: &m.Header, Nx: nx, Ny: ny, Nz: nz, Mask: make([]bool, nx*ny*nz)}
	for i := range f.Mask {
		f.Mask[i] = m.Data[i] != 0
	}
	for i := 0; i < MaxFibres; i++ {
		d, err := read(fmt.Sprintf("dyads%d", i+1))
		if errors.Is(err, fs.ErrNotExist) && i > 0 {
			break
		}
		if err != nil {
			return nil, err
		}
		x, y, z, t := d.Shape()
		if x != nx || y != ny || z != nz || t != 3 {
			return nil, fmt.Errorf("dmri: %s: dyads%d is %d×%d×%d×%d, want %d×%d×%d×3", dir, i+1, x, y, z, t, nx, ny, nz)
		}
		if err := m.SameGrid(&d.Header); err != nil {
			return nil, fmt.Errorf("dmri: %s: dyads%d is not on the grid of nodif_brain_mask: %w", dir, i+1, err)
		}
		fv, err := read(fmt.Sprintf("mean_f%dsamples", i+1))
		if err != nil {
			return nil, err
		}
		if x, y, z, t := fv.Shape(); x != nx || y != ny || z != nz || t != 1 {
			return nil, fmt.Errorf("dmri: %s: mean_f%dsamples is %d×%d×%d×%d, want %d×%d×%d", dir, i+1, x, y, z, t, nx, ny, nz)
		}
		f.Dyads[i], f.F[i] = d.Data, fv.Data
		f.Fibres = i + 1
	}
	return f, nil
}

// count returns the number of sticks with mean fraction > FibreThreshold
// at voxel i.
func (f *Folder) count(i int) int {
	n := 0
	for k := 0; k < f.Fibres; k++ {
		if f.F[k][i] > FibreThreshold {
			n++
		}
	}
	return n
}

// Stats summarises a set of values.
type Stats struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P75    float64 `json:"p75"`
	P90    float64 `json:"p90"`
}

func statsOf(v []float64) Stats {
	s := Stats{N: len(v)}
	if len(v) == 0 {
		return s
	}
	sorted := append([]float64(nil), v...)
	sort.Float64s(sorted)
	q := func(p float64) float64 { // linear interpolation between order statistics
		h := p * float64(len(sorted)-1)
		lo := int(math.Floor(h))
		hi := min(lo+1, len(sorted)-1)
		return sorted[lo] + (h-float64(lo))*(sorted[hi]-sorted[lo])
	}
	for _, x := range v {
		s.Mean += x
	}
	s.Mean /= float64(len(v))
	s.Median, s.P25, s.P75, s.P90 = q(0.5), q(0.25), q(0.75), q(0.9)
	return s
}

// FibreComparison compares stick i of two folders.
type FibreComparison struct {
	Fibre int `json:"fibre"`
	// Angle (degrees, 0–90, sign-invariant) between dyads{i} of A and B
	// over the common-mask voxels where both mean f_i > FibreThreshold.
	Angle Stats `json:"angle_deg"`
	// AngleWeightedMean weights each of those voxels by min(f_A, f_B).
	AngleWeightedMean float64 `json:"angle_deg_weighted_mean"`
	// Fraction differences B − A of mean f_i over all common-mask voxels.
	FracMeanDiff    float64 `json:"f_mean_diff"`
	FracMeanAbsDiff float64 `json:"f_mean_abs_diff"`
	FracRMSDiff     float64 `json:"f_rms_diff"`
	// FracCorrelation is Pearson's r of mean f_i, nil when either map
	// is constant over the common mask.
	FracCorrelation *float64 `json:"f_correlation"`
}

// Comparison is the JSON summary of Compare.
type Comparison struct {
	DirA           string            `json:"dir_a"`
	DirB           string            `json:"dir_b"`
	Voxels         int               `json:"voxels_common_mask"`
	FibreThreshold float64           `json:"fibre_threshold"`
	Fibres         []FibreComparison `json:"fibres"`
	// CountAgreement is the fraction of common-mask voxels where both
	// folders have the same number of sticks with mean f > FibreThreshold;
	// CountConfusion[a][b] counts voxels with a sticks in A and b in B.
	CountAgreement float64                           `json:"fibre_count_agreement"`
	CountConfusion [MaxFibres + 1][MaxFibres + 1]int `json:"fibre_count_confusion"`
	// Slice is the axial slice (z index) of the PNG maps.
	Slice int `json:"png_slice_z"`
}

// Compare compares two folders on the same grid (voxel by voxel, over the
// voxels in both masks, sticks 1..min(Fibres)).
func Compare(a, b *Folder) (*Comparison, error) {
	if a.Nx != b.Nx || a.Ny != b.Ny || a.Nz != b.Nz {
		return nil, fmt.Errorf("dmri: %s is %d×%d×%d, %s is %d×%d×%d", a.Dir, a.Nx, a.Ny, a.Nz, b.Dir, b.Nx, b.Ny, b.Nz)
	}
	if a.Ref != nil && b.Ref != nil {
		if err := a.Ref.SameGrid(b.Ref); err != nil {
			return nil, fmt.Errorf("dmri: %s is not on the grid of %s: %w", b.Dir, a.Dir, err)
		}
	}
	c := &Comparison{DirA: a.Dir, DirB: b.Dir, FibreThreshold: FibreThreshold, Slice: a.Nz / 2}
	nv := a.Nx * a.Ny * a.Nz
	for i := 0; i < nv; i++ {
		if a.Mask[i] && b.Mask[i] {
			c.Voxels++
			ca, cb := a.count(i), b.count(i)
			c.CountConfusion[ca][cb]++
			if ca == cb {
				c.CountAgreement++
			}
		}
	}
	if c.Voxels == 0 {
		return nil, fmt.Errorf("dmri: %s and %s have no mask voxel in common", a.Dir, b.Dir)
	}
	c.CountAgreement /= float64(c.Voxels)
	for k := 0; k < min(a.Fibres, b.Fibres); k++ {
		fc := FibreComparison{Fibre: k + 1}
		var angles []float64
		var wsum, wang float64
		var fa, fb []float64
		for i := 0; i < nv; i++ {
			if !a.Mask[i] || !b.Mask[i] {
				continue
			}
			x, y := float64(a.F[k][i]), float64(b.F[k][i])
			fa, fb = append(fa, x), append(fb, y)
			if x > FibreThreshold && y > FibreThreshold {
				ang := dyadAngle(a.Dyads[k], b.Dyads[k], i, nv)
				if math.IsNaN(ang) {
					continue
				}
				angles = append(angles, ang)
				w := math.Min(x, y)
				wsum += w
				wang += w * ang
			}
		}
		fc.Angle = statsOf(angles)
		if wsum > 0 {
			fc.AngleWeightedMean = wang / wsum
		}
		var sd, sad, ssd float64
		for j := range fa {
			d := fb[j] - fa[j]
			sd += d
			sad += math.Abs(d)
			ssd += d * d
		}
		n := float64(len(fa))
		fc.FracMeanDiff, fc.FracMeanAbsDiff, fc.FracRMSDiff = sd/n, sad/n, math.Sqrt(ssd/n)
		if r := correlation(fa, fb); !math.IsNaN(r) {
			fc.FracCorrelation = &r
		}
		c.Fibres = append(c.Fibres, fc)
	}
	return c, nil
}

// dyadAngle returns the angle in degrees between the axes ±u and ±v of
// voxel i in two 3-volume dyads images; NaN if either is zero.
func dyadAngle(u, v []float32, i, nv int) float64 {
	var dot, nu, nw float64
	for a := range 3 {
		x, y := float64(u[i+a*nv]), float64(v[i+a*nv])
		dot += x * y
		nu += x * x
		nw += y * y
	}
	if nu == 0 || nw == 0 {
		return math.NaN()
	}
	c := math.Min(1, math.Abs(dot)/math.Sqrt(nu*nw))
	return math.Acos(c) * 180 / math.Pi
}

// correlation returns Pearson's r (NaN when either input is constant).
func correlation(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// PNGScale is the size in pixels of one voxel in the comparison maps.
const PNGScale = 12

// WriteComparisonPNGs writes three maps of the axial slice c.Slice into
// dir, x to the right and y upwards, PNGScale pixels per voxel, voxels
// outside the common mask black:
//
//	angle_dyads1.png  angle between dyads1 of A and B, 0° dark blue →
//	                  90° yellow (viridis-like); grey where either mean f1
//	                  ≤ FibreThreshold
//	diff_f1.png       mean f1 of B minus A, −0.3 blue → 0 white → +0.3 red
//	nfibres.png       fibre counts: green where equal (brighter for more
//	                  sticks), red where B has more, blue where A has more
func WriteComparisonPNGs(dir string, a, b *Folder, c *Comparison) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	nv := a.Nx * a.Ny * a.Nz
	z := c.Slice
	draw := func(name string, col func(i int) color.RGBA) error {
		img := image.NewRGBA(image.Rect(0, 0, a.Nx*PNGScale, a.Ny*PNGScale))
		for y := 0; y < a.Ny; y++ {
			for x := 0; x < a.Nx; x++ {
				i := x + a.Nx*(y+a.Ny*z)
				cl := color.RGBA{0, 0, 0, 255}
				if a.Mask[i] && b.Mask[i] {
					cl = col(i)
				}
				row := (a.Ny - 1 - y) * PNGScale
				for dy := 0; dy < PNGScale; dy++ {
					for dx := 0; dx < PNGScale; dx++ {
						img.SetRGBA(x*PNGScale+dx, row+dy, cl)
					}
				}
			}
		}
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("dmri: %w", err)
		}
		if err := png.Encode(f, img); err != nil {
			f.Close()
			return fmt.Errorf("dmri: %s: %w", path, err)
		}
		return f.Close()
	}
	grey := color.RGBA{110, 110, 110, 255}
	if err := draw("angle_dyads1.png", func(i int) color.RGBA {
		if a.F[0][i] <= FibreThreshold || b.F[0][i] <= FibreThreshold {
			return grey
		}
		ang := dyadAngle(a.Dyads[0], b.Dyads[0], i, nv)
		if math.IsNaN(ang) {
			return grey
		}
		return viridis(ang / 90)
	}); err != nil {
		return err
	}
	if err := draw("diff_f1.png", func(i int) color.RGBA {
		return diverging(float64(b.F[0][i]-a.F[0][i]) / 0.3)
	}); err != nil {
		return err
	}
	return draw("nfibres.png", func(i int) color.RGBA {
		ca, cb := a.count(i), b.count(i)
		switch {
		case ca == cb:
			return color.RGBA{0, uint8(60 + 195*ca/MaxFibres), 0, 255}
		case cb > ca:
			return color.RGBA{220, 40, 40, 255}
		default:
			return color.RGBA{40, 80, 230, 255}
		}
	})
}

// viridis maps t ∈ [0, 1] to an approximation of the viridis colour map
// (linear interpolation between five of its colours).
func viridis(t float64) color.RGBA {
	stops := [][3]float64{{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}
	return interpolate(stops, t)
}

// diverging maps t ∈ [−1, 1] to blue – white – red.
func diverging(t float64) color.RGBA {
	stops := [][3]float64{{33, 102, 172}, {247, 247, 247}, {178, 24, 43}}
	return interpolate(stops, (t+1)/2)
}

func interpolate(stops [][3]float64, t float64) color.RGBA {
	if math.IsNaN(t) {
		t = 0
	}
	t = math.Max(0, math.Min(1, t)) * float64(len(stops)-1)
	k := min(int(t), len(stops)-2)
	u := t - float64(k)
	var c [3]uint8
	for a := range 3 {
		c[a] = uint8(math.Round(stops[k][a] + u*(stops[k+1][a]-stops[k][a])))
	}
	return color.RGBA{c[0], c[1], c[2], 255}
}
