package plot

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Grid is a 2-D scalar field such as one slice of a volume: the value at
// column x and row y is Data[x+NX*y]. Row 0 is drawn at the bottom, so
// that voxel coordinates increase to the right and upwards.
type Grid struct {
	NX, NY int
	Data   []float64
}

// SliceOptions configures SliceMap.
type SliceOptions struct {
	Options
	// ColorMap is the colour map (default Viridis).
	ColorMap ColorMap
	// Min and Max fix the value range of the colour map; if both are zero
	// the range of the finite data is used.
	Min, Max float64
	// Label names the quantity on the colour bar.
	Label string
}

// SliceMap writes g as an image with a colour map and a colour bar.
// Non-finite values (e.g. voxels outside a brain mask) are left
// transparent on the white background; values outside [Min, Max] are
// clamped. Voxels are drawn square. The default size is 700×600 pixels.
// XLabel and YLabel are not used: maps are drawn without axes.
func SliceMap(path string, g Grid, o SliceOptions) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteSliceMap(w, g, o) })
}

// WriteSliceMap is SliceMap writing the PNG to w.
func WriteSliceMap(w io.Writer, g Grid, o SliceOptions) error {
	return guard("slice map", func() error { return writeSliceMap(w, g, o) })
}

func checkGrid(nx, ny, per, n int) error {
	if nx <= 0 || ny <= 0 {
		return fmt.Errorf("grid size %d×%d: %w", nx, ny, errNoData)
	}
	if nx > 1<<14 || ny > 1<<14 || nx*ny*per != n {
		return fmt.Errorf("grid %d×%d needs %d values, have %d", nx, ny, nx*ny*per, n)
	}
	return nil
}

func writeSliceMap(w io.Writer, g Grid, o SliceOptions) error {
	if err := checkGrid(g.NX, g.NY, 1, len(g.Data)); err != nil {
		return err
	}
	if err := o.ColorMap.valid(); err != nil {
		return err
	}
	lo, hi := o.Min, o.Max
	if lo == 0 && hi == 0 {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, v := range g.Data {
			if finite(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if lo > hi {
			return fmt.Errorf("no finite value")
		}
		if lo == hi {
			lo, hi = lo-0.5, hi+0.5
		}
	}
	if !finite(lo) || !finite(hi) || lo >= hi {
		return fmt.Errorf("value range [%v, %v] is empty or not finite", lo, hi)
	}
	img := image.NewNRGBA(image.Rect(0, 0, g.NX, g.NY))
	drawn := 0
	for y := range g.NY {
		for x := range g.NX {
			v := g.Data[x+g.NX*y]
			if finite(v) {
				img.SetNRGBA(x, g.NY-1-y, o.ColorMap.Color((v-lo)/(hi-lo)))
				drawn++
			}
		}
	}
	if drawn == 0 {
		return fmt.Errorf("no finite value")
	}
	wd, ht, err := o.size(700, 600)
	if err != nil {
		return err
	}
	bar := colorBar(o.ColorMap, lo, hi, o.Label)
	return encode(w, wd, ht, func(c draw.Canvas) error {
		c = titled(c, o.Title)
		barW := vg.Points(70)
		if o.Label != "" {
			barW += vg.Points(14)
		}
		left := c
		left.Max.X -= barW + vg.Points(8)
		drawLetterboxed(left, img)
		right := c
		right.Min.X = c.Max.X - barW
		right.Min.Y += vg.Points(10)
		right.Max.Y -= vg.Points(6)
		right.Max.X -= vg.Points(10)
		bar.Draw(right)
		return nil
	})
}

// drawLetterboxed draws img as large as fits in c with square pixels,
// centred.
func drawLetterboxed(c draw.Canvas, img *image.NRGBA) {
	pad := vg.Points(4)
	cw, ch := c.Max.X-c.Min.X-2*pad, c.Max.Y-c.Min.Y-2*pad
	b := img.Bounds()
	s := min(cw/vg.Length(b.Dx()), ch/vg.Length(b.Dy()))
	w, h := s*vg.Length(b.Dx()), s*vg.Length(b.Dy())
	x0 := c.Min.X + pad + (cw-w)/2
	y0 := c.Min.Y + pad + (ch-h)/2
	drawNearest(c, vg.Rectangle{Min: vg.Point{X: x0, Y: y0}, Max: vg.Point{X: x0 + w, Y: y0 + h}}, img)
}

// Directions is a 2-D field of 3-D vectors such as the principal fibre
// direction of each voxel of a slice: the vector at column x and row y is
// V[3*(x+NX*y) : 3*(x+NX*y)+3]. Scale, if non-nil, holds one modulating
// factor per pixel in [0, 1] (e.g. the fibre's volume fraction); values
// outside are clamped.
type Directions struct {
	NX, NY int
	V      []float64
	Scale  []float64
}

// DirectionMap writes the direction-encoded colour map of d used for dMRI
// fibre orientations: each pixel's red, green and blue are |x|, |y| and |z|
// of its unit vector, times its scale. Vectors are normalised; a zero
// vector is black and a vector or scale with a non-finite component is left
// transparent. Row 0 is drawn at the bottom. The default size is 600×600.
func DirectionMap(path string, d Directions, o Options) error {
	return saveAtomic(path, func(w io.Writer) error { return WriteDirectionMap(w, d, o) })
}

// WriteDirectionMap is DirectionMap writing the PNG to w.
func WriteDirectionMap(w io.Writer, d Directions, o Options) error {
	return guard("direction map", func() error { return writeDirectionMap(w, d, o) })
}

func writeDirectionMap(w io.Writer, d Directions, o Options) error {
	if err := checkGrid(d.NX, d.NY, 3, len(d.V)); err != nil {
		return err
	}
	if d.Scale != nil && len(d.Scale) != d.NX*d.NY {
		return fmt.Errorf("%d scale values for %d pixels", len(d.Scale), d.NX*d.NY)
	}
	img := image.NewNRGBA(image.Rect(0, 0, d.NX, d.NY))
	drawn := 0
	for y := range d.NY {
		for x := range d.NX {
			i := x + d.NX*y
			v := d.V[3*i : 3*i+3]
			s := 1.0
			if d.Scale != nil {
				s = d.Scale[i]
			}
			if !finite(v[0]) || !finite(v[1]) || !finite(v[2]) || !finite(s) {
				continue
			}
			drawn++
			s = math.Min(1, math.Max(0, s))
			n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
			if n > 0 {
				s /= n
			}
			ch := func(a float64) uint8 { return uint8(math.Round(255 * math.Min(1, math.Abs(a)*s))) }
			img.SetNRGBA(x, d.NY-1-y, color.NRGBA{ch(v[0]), ch(v[1]), ch(v[2]), 0xff})
		}
	}
	if drawn == 0 {
		return fmt.Errorf("no pixel with finite values")
	}
	wd, ht, err := o.size(600, 600)
	if err != nil {
		return err
	}
	return encode(w, wd, ht, func(c draw.Canvas) error {
		drawLetterboxed(titled(c, o.Title), img)
		return nil
	})
}
