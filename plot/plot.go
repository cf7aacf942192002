// Package plot draws the PNG figures written by prism's commands: model
// posterior bar charts, parameter pair plots, posterior predictive bands,
// λ sweeps, calibration ECDFs, confusion matrices, histograms and 2-D maps
// of volume slices.
//
// The package knows nothing about prism's internals: every figure takes
// plain slices plus a small options struct and writes a PNG, either to an
// io.Writer (the Write* functions) or atomically to a file path (a temporary
// file in the same directory renamed into place). All figures share one
// look: the embedded Liberation fonts of gonum.org/v1/plot (nothing is read
// or downloaded at run time), the colour-blind safe Okabe–Ito palette for
// series, and white backgrounds.
//
// Invalid input (empty data, mismatched lengths, data without a single
// finite value) is reported as an error; no function panics on bad input.
package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"

	"github.com/prismsbi/prism/internal/atomicfile"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Options holds what every figure accepts: a title, axis labels and the
// size of the PNG in pixels. A zero Width or Height selects the figure's
// default size.
type Options struct {
	Title  string
	XLabel string
	YLabel string
	Width  int // pixels
	Height int // pixels
}

// Series is a named set of values: one bar per model, one sample per
// histogram entry, or one value per grid point, depending on the figure.
type Series struct {
	Name   string
	Values []float64
}

// dpi is the resolution at which point sizes (fonts, line widths) are
// converted to pixels.
const dpi = 96

// maxPixels bounds the requested image side so that a typo cannot allocate
// gigabytes.
const maxPixels = 10000

// palette is the Okabe–Ito colour-blind safe palette (Okabe & Ito 2008),
// in the order used for successive series.
var palette = []color.NRGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
	{0x00, 0x00, 0x00, 0xff}, // black
}

// seriesColor returns the colour of series i.
func seriesColor(i int) color.NRGBA { return palette[i%len(palette)] }

// withAlpha returns c with its alpha channel set to a (0–255).
func withAlpha(c color.NRGBA, a uint8) color.NRGBA { c.A = a; return c }

// size resolves the requested image size against the figure default.
func (o Options) size(defW, defH int) (int, int, error) {
	w, h := o.Width, o.Height
	if w == 0 {
		w = defW
	}
	if h == 0 {
		h = defH
	}
	if w < 16 || h < 16 || w > maxPixels || h > maxPixels {
		return 0, 0, fmt.Errorf("image size %d×%d outside [16, %d]", w, h, maxPixels)
	}
	return w, h, nil
}

// newPlot returns a gonum plot styled the way all figures look.
func newPlot(title, xlabel, ylabel string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	for _, a := range []*gplot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Size = vg.Points(9)
		a.Padding = vg.Points(2)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.Top = true
	return p
}

// render draws a figure of w×h pixels with paint and returns the image.
func render(w, h int, paint func(draw.Canvas) error) (image.Image, error) {
	c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))), vgimg.UseDPI(dpi))
	if err := paint(draw.New(c)); err != nil {
		return nil, err
	}
	return c.Image(), nil
}

// encode renders and PNG-encodes a figure to wr.
func encode(wr io.Writer, w, h int, paint func(draw.Canvas) error) error {
	img, err := render(w, h, paint)
	if err != nil {
		return err
	}
	return png.Encode(wr, img)
}

// drawPlot is a paint function drawing a single gonum plot on the canvas.
func drawPlot(p *gplot.Plot) func(draw.Canvas) error {
	return func(c draw.Canvas) error {
		p.Draw(c)
		return nil
	}
}

// saveAtomic renders with write into memory, then writes the bytes to a
// temporary file next to path and renames it into place, so readers never
// see a partial PNG and a failed figure leaves no file behind.
func saveAtomic(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("plot: writing %s: %w", path, err)
	}
	return nil
}

// guard runs f, prefixing its error with the figure name. A panic inside
// f (the plotting library panics on some inputs that validation should
// have caught) is turned into an error, so that a missed corner case
// cannot take the calling command down.
func guard(fig string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: %s: internal drawing error: %v", fig, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("plot: %s: %w", fig, err)
	}
	return nil
}

// errNoData is returned when a figure receives nothing to draw.
var errNoData = errors.New("no data")

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finiteValues returns the finite entries of vs.
func finiteValues(vs []float64) []float64 {
	out := make([]float64, 0, len(vs))
	for _, v := range vs {
		if finite(v) {
			out = append(out, v)
		}
	}
	return out
}

// textWidth returns the width of s in the given font.
func textWidth(f font.Font, s string) vg.Length {
	face := font.DefaultCache.Lookup(f, f.Size)
	return face.Width(s)
}
