package plot

import (
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	gplot "gonum.org/v1/plot"
)

// titled draws title centred at the top of c (if non-empty) and returns
// the canvas below it.
func titled(c draw.Canvas, title string) draw.Canvas {
	if title == "" {
		return c
	}
	sty := text.Style{
		Color:   palette[7],
		Font:    gplot.DefaultFont,
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
		Handler: gplot.DefaultTextHandler,
	}
	sty.Font.Size = vg.Points(13)
	pad := vg.Points(6)
	c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y - pad}, title)
	c.Max.Y -= sty.Height(title) + 2*pad
	return c
}
