package plot

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	gplot "gonum.org/v1/plot"
)

// ColorMap maps a scalar in [0, 1] to a colour.
type ColorMap int

const (
	// Viridis is the perceptually uniform viridis map (dark blue to
	// yellow), the default.
	Viridis ColorMap = iota
	// Grey maps 0 to black and 1 to white.
	Grey
)

// viridisAnchors are nine equally spaced colours of matplotlib's viridis
// map (its published 9-class hex values, #440154 … #fde725); Color
// interpolates linearly between them.
var viridisAnchors = [...][3]float64{
	{0x44, 0x01, 0x54},
	{0x47, 0x2d, 0x7b},
	{0x3b, 0x52, 0x8b},
	{0x2c, 0x72, 0x8e},
	{0x21, 0x91, 0x8c},
	{0x28, 0xae, 0x80},
	{0x5e, 0xc9, 0x62},
	{0xad, 0xdc, 0x30},
	{0xfd, 0xe7, 0x25},
}

// Color returns the colour of t, clamped to [0, 1]. NaN maps to
// transparent.
func (m ColorMap) Color(t float64) color.NRGBA {
	if math.IsNaN(t) {
		return color.NRGBA{}
	}
	t = math.Min(1, math.Max(0, t))
	switch m {
	case Grey:
		g := uint8(math.Round(255 * t))
		return color.NRGBA{g, g, g, 0xff}
	default:
		f := t * float64(len(viridisAnchors)-1)
		i := min(int(f), len(viridisAnchors)-2)
		u := f - float64(i)
		a, b := viridisAnchors[i], viridisAnchors[i+1]
		var c [3]uint8
		for k := range c {
			c[k] = uint8(math.Round(a[k] + u*(b[k]-a[k])))
		}
		return color.NRGBA{c[0], c[1], c[2], 0xff}
	}
}

func (m ColorMap) valid() error {
	if m != Viridis && m != Grey {
		return fmt.Errorf("unknown colour map %d", int(m))
	}
	return nil
}

// raster is a plotter drawing an image over the data rectangle
// [x0, x1]×[y0, y1], resampled with nearest neighbours to the device
// resolution so that cells and voxels keep sharp edges.
type raster struct {
	img            *image.NRGBA
	x0, y0, x1, y1 float64
}

// Plot implements plot.Plotter.
func (r raster) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	rect := vg.Rectangle{
		Min: vg.Point{X: trX(r.x0), Y: trY(r.y0)},
		Max: vg.Point{X: trX(r.x1), Y: trY(r.y1)},
	}
	drawNearest(c, rect, r.img)
}

// drawNearest draws img into rect of c, resampled with nearest neighbours
// at the canvas resolution. On an image canvas the pixels are written
// directly (pixel-exact, and fast for large rasters); elsewhere the
// resampled image is handed to the canvas.
func drawNearest(c draw.Canvas, rect vg.Rectangle, img *image.NRGBA) {
	d := float64(dpi)
	if r, ok := c.Canvas.(interface{ DPI() float64 }); ok {
		d = r.DPI()
	}
	if vc, ok := imageCanvas(c.Canvas); ok {
		dst, ok := vc.Image().(*image.RGBA)
		if ok {
			blitNearest(dst, rect, d, img)
			return
		}
	}
	w := int(math.Round(rect.Size().X.Dots(d)))
	h := int(math.Round(rect.Size().Y.Dots(d)))
	if w <= 0 || h <= 0 {
		return
	}
	b := img.Bounds()
	out := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		sy := b.Min.Y + y*b.Dy()/h
		for x := range w {
			out.SetNRGBA(x, y, img.NRGBAAt(b.Min.X+x*b.Dx()/w, sy))
		}
	}
	c.DrawImage(rect, out)
}

// imageCanvas returns the image canvas under layers of draw.Canvas, which
// pass drawing through unchanged.
func imageCanvas(c vg.Canvas) (*vgimg.Canvas, bool) {
	for {
		switch v := c.(type) {
		case *vgimg.Canvas:
			return v, true
		case draw.Canvas:
			c = v.Canvas
		case *draw.Canvas:
			c = v.Canvas
		default:
			return nil, false
		}
	}
}

// blitNearest writes img scaled to rect (in points, y upwards) into dst at
// the given resolution. Opaque source pixels replace the destination,
// transparent ones leave it, translucent ones are composited over it.
func blitNearest(dst *image.RGBA, rect vg.Rectangle, dpi float64, img *image.NRGBA) {
	H := dst.Bounds().Dy()
	x0 := int(math.Round(rect.Min.X.Dots(dpi)))
	x1 := int(math.Round(rect.Max.X.Dots(dpi)))
	y0 := H - int(math.Round(rect.Max.Y.Dots(dpi)))
	y1 := H - int(math.Round(rect.Min.Y.Dots(dpi)))
	w, h := x1-x0, y1-y0
	if w <= 0 || h <= 0 {
		return
	}
	sb := img.Bounds()
	clip := image.Rect(x0, y0, x1, y1).Intersect(dst.Bounds())
	for y := clip.Min.Y; y < clip.Max.Y; y++ {
		sy := sb.Min.Y + (y-y0)*sb.Dy()/h
		for x := clip.Min.X; x < clip.Max.X; x++ {
			s := img.NRGBAAt(sb.Min.X+(x-x0)*sb.Dx()/w, sy)
			switch s.A {
			case 0:
			case 0xff:
				dst.SetRGBA(x, y, color.RGBA{s.R, s.G, s.B, 0xff})
			default:
				dr, dg, db, da := dst.RGBAAt(x, y).RGBA()
				sr, sg, sbl, sa := s.RGBA()
				k := 0xffff - sa
				dst.SetRGBA(x, y, color.RGBA{
					uint8((sr + dr*k/0xffff) >> 8), uint8((sg + dg*k/0xffff) >> 8),
					uint8((sbl + db*k/0xffff) >> 8), uint8((sa + da*k/0xffff) >> 8),
				})
			}
		}
	}
}

// colorBar returns a plot showing colour map m over [lo, hi] as a vertical
// bar with value ticks, titled label.
func colorBar(m ColorMap, lo, hi float64, label string) *gplot.Plot {
	const n = 256
	img := image.NewNRGBA(image.Rect(0, 0, 1, n))
	for i := range n {
		// Row 0 is the top of the image: the largest value.
		img.SetNRGBA(0, i, m.Color(1-(float64(i)+0.5)/n))
	}
	p := newPlot("", "", label)
	p.HideX()
	p.Add(raster{img: img, x0: 0, y0: lo, x1: 1, y1: hi})
	p.X.Min, p.X.Max = 0, 1
	p.Y.Min, p.Y.Max = lo, hi
	return p
}
