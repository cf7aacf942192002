package plot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decode decodes a PNG and checks its size.
func decode(t *testing.T, b []byte, w, h int) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decoding PNG: %v", err)
	}
	if got := img.Bounds().Size(); got.X != w || got.Y != h {
		t.Fatalf("image is %d×%d, want %d×%d", got.X, got.Y, w, h)
	}
	return nrgba(img)
}

// over returns c composited over a white background, which is the colour
// an interior pixel of a translucent shape has.
func over(c color.NRGBA) color.NRGBA {
	a := float64(c.A) / 255
	f := func(v uint8) uint8 { return uint8(math.Round(float64(v)*a + 255*(1-a))) }
	return color.NRGBA{f(c.R), f(c.G), f(c.B), 0xff}
}

// nrgba converts img to *image.NRGBA once, for fast pixel access.
func nrgba(img image.Image) *image.NRGBA {
	if n, ok := img.(*image.NRGBA); ok {
		return n
	}
	b := img.Bounds()
	n := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			n.Set(x, y, img.At(x, y))
		}
	}
	return n
}

// nearN is near for two NRGBA colours.
func nearN(a, b color.NRGBA, tol int) bool {
	d := func(x, y uint8) bool { return int(x)-int(y) <= tol && int(y)-int(x) <= tol }
	return d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B) && d(a.A, b.A)
}

// near reports whether two colours agree within tol per 8-bit channel; the
// tolerance absorbs rounding in premultiplied-alpha compositing.
func near(a, b color.Color, tol int) bool {
	ar, ag, ab, aa := a.RGBA()
	br, bg, bb, ba := b.RGBA()
	d := func(x, y uint32) bool { return math.Abs(float64(x>>8)-float64(y>>8)) <= float64(tol) }
	return d(ar, br) && d(ag, bg) && d(ab, bb) && d(aa, ba)
}

// blob summarises the pixels of one colour within a region.
type blob struct {
	n                      int
	cx, cy                 float64 // centroid
	minX, maxX, minY, maxY int
}

// find returns the pixels of img within r whose colour is within tol of c.
func find(img image.Image, r image.Rectangle, c color.Color, tol int) blob {
	b := blob{minX: math.MaxInt, minY: math.MaxInt, maxX: -1, maxY: -1}
	n := nrgba(img)
	cn := color.NRGBAModel.Convert(c).(color.NRGBA)
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if nearN(n.NRGBAAt(x, y), cn, tol) {
				b.n++
				b.cx += float64(x)
				b.cy += float64(y)
				b.minX, b.maxX = min(b.minX, x), max(b.maxX, x)
				b.minY, b.maxY = min(b.minY, y), max(b.maxY, y)
			}
		}
	}
	if b.n > 0 {
		b.cx /= float64(b.n)
		b.cy /= float64(b.n)
	}
	return b
}

// maxRun returns the longest horizontal (or vertical) run of pixels of
// colour c in img within r.
func maxRun(img image.Image, r image.Rectangle, c color.Color, vertical bool) int {
	best := 0
	n := nrgba(img)
	cn := color.NRGBAModel.Convert(c).(color.NRGBA)
	r = r.Intersect(img.Bounds())
	outer, inner := r.Dy(), r.Dx()
	if vertical {
		outer, inner = inner, outer
	}
	for i := 0; i < outer; i++ {
		run := 0
		for j := 0; j < inner; j++ {
			x, y := r.Min.X+j, r.Min.Y+i
			if vertical {
				x, y = r.Min.X+i, r.Min.Y+j
			}
			if nearN(n.NRGBAAt(x, y), cn, 3) {
				run++
				best = max(best, run)
			} else {
				run = 0
			}
		}
	}
	return best
}

// figures calls every figure with small valid input, once per output
// form, so that size, file handling and decoding are checked uniformly.
var figures = map[string]func(path string, o Options) error{
	"ModelBars": func(p string, o Options) error {
		return ModelBars(p, []string{"a", "b"}, []Series{{Values: []float64{0.7, 0.3}}}, o)
	},
	"PairPlot": func(p string, o Options) error {
		return PairPlot(p, []string{"x", "y"}, [][]float64{{0, 1}, {1, 0}, {0.5, 0.5}}, PairOptions{Options: o})
	},
	"PredictiveBand": func(p string, o Options) error {
		return PredictiveBand(p, Points{X: []float64{0, 1}, Y: []float64{0, 1}},
			[]Band{{X: []float64{0, 1}, Mean: []float64{0, 1}, Lo: []float64{-1, 0}, Hi: []float64{1, 2}}}, o)
	},
	"LambdaSweep": func(p string, o Options) error {
		return LambdaSweep(p, Sweep{Lambda: []float64{0.1, 0.9}, Center: []float64{1, 3}}, o)
	},
	"CalibrationECDF": func(p string, o Options) error {
		return CalibrationECDF(p, []Series{{Values: []float64{0.1, 0.5, 0.9}}}, CalibrationOptions{Options: o})
	},
	"ConfusionMatrix": func(p string, o Options) error {
		return ConfusionMatrix(p, [][]float64{{3, 1}, {0, 4}}, nil, nil, o)
	},
	"Histogram": func(p string, o Options) error {
		return Histogram(p, []Series{{Values: []float64{1, 2, 2, 3}}}, HistogramOptions{Options: o})
	},
	"SliceMap": func(p string, o Options) error {
		return SliceMap(p, Grid{NX: 2, NY: 2, Data: []float64{0, 1, 2, 3}}, SliceOptions{Options: o})
	},
	"DirectionMap": func(p string, o Options) error {
		return DirectionMap(p, Directions{NX: 1, NY: 1, V: []float64{1, 0, 0}}, o)
	},
}

func TestFiguresWriteRequestedSize(t *testing.T) {
	dir := t.TempDir()
	for name, f := range figures {
		path := filepath.Join(dir, name+".png")
		if err := f(path, Options{Title: name, Width: 333, Height: 271}); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		decode(t, b, 333, 271)
	}
	// Only the final files remain: no temporary files are left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(figures) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want exactly one file per figure", names)
	}
}

func TestSaveReplacesAndFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.png")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := figures["Histogram"](path, Options{Width: 100, Height: 80}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, b, 100, 80)
	// A failing figure leaves the existing file untouched.
	if err := Histogram(path, nil, HistogramOptions{}); err == nil {
		t.Fatal("no error for empty histogram")
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b, b2) {
		t.Error("failed figure modified the existing file")
	}
	if err := figures["Histogram"](filepath.Join(dir, "missing", "f.png"), Options{}); err == nil {
		t.Error("no error writing into a missing directory")
	}
}

// TestModelBarsLength checks that bars are drawn to scale: a bar of
// probability 1 is 10 times as long as one of 0.1, within the ±2 pixels of
// anti-aliased ends on bars of several hundred pixels.
func TestModelBarsLength(t *testing.T) {
	var buf bytes.Buffer
	err := WriteModelBars(&buf, []string{"B+S1", "B"}, []Series{
		{Name: "learned", Values: []float64{1, 0.1}},
		{Name: "exact", Values: []float64{0.5, 0.5}},
	}, Options{Width: 800, Height: 400})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes(), 800, 400)
	mid := img.Bounds()
	top, bottom := mid, mid
	top.Max.Y, bottom.Min.Y = 200, 200
	l1 := maxRun(img, top, palette[0], false)
	l2 := maxRun(img, bottom, palette[0], false)
	if l2 == 0 || l1 < 300 {
		t.Fatalf("bar lengths %d and %d pixels", l1, l2)
	}
	if r := float64(l1) / float64(l2); math.Abs(r-10) > 10*4.0/float64(l2) {
		t.Errorf("bar length ratio %.2f (%d/%d px), want 10", r, l1, l2)
	}
	// The second series: two bars of equal length, half the first one.
	e1 := maxRun(img, top, palette[1], false)
	e2 := maxRun(img, bottom, palette[1], false)
	if math.Abs(float64(e1-e2)) > 2 || math.Abs(float64(2*e1-l1)) > 4 {
		t.Errorf("second series bars %d and %d px, want both %d/2", e1, e2, l1)
	}
	// Row order: the first label's bar (long) is above the second's.
	long := find(img, mid, palette[0], 3)
	if long.n == 0 || long.minY > 200 {
		t.Errorf("first label's bar not in the upper half: %+v", long)
	}
}

// TestPredictiveBandArea checks that the shaded band is drawn where the
// data put it: doubling the band's width doubles the number of band-coloured
// pixels (fixed axes via two far observations), within 10 % for the
// covering of the mean line and anti-aliased edges.
func TestPredictiveBandArea(t *testing.T) {
	count := func(half float64) int {
		xs := []float64{0, 10}
		b := Band{X: xs, Mean: []float64{0, 0}, Lo: []float64{-half, -half}, Hi: []float64{half, half}}
		var buf bytes.Buffer
		err := WritePredictiveBand(&buf, Points{X: []float64{0, 10}, Y: []float64{-3, 3}}, []Band{b}, Options{Width: 600, Height: 400})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, buf.Bytes(), 600, 400)
		return find(img, img.Bounds(), over(withAlpha(palette[0], 0x55)), 3).n
	}
	n1, n2 := count(0.5), count(1)
	if n1 < 1000 {
		t.Fatalf("only %d band pixels", n1)
	}
	if r := float64(n2) / float64(n1); math.Abs(r-2) > 0.2 {
		t.Errorf("band pixel ratio %.3f (%d/%d), want 2", r, n2, n1)
	}
}

// TestSliceMapVoxelColours checks that every voxel is drawn in its colour
// map colour, in the right place: x to the right, y upwards. The image
// area is the bounding box of non-white pixels left of the colour bar; the
// centre pixel of each voxel must have exactly the colour-map colour.
func TestSliceMapVoxelColours(t *testing.T) {
	for _, cm := range []ColorMap{Viridis, Grey} {
		g := Grid{NX: 4, NY: 3, Data: make([]float64, 12)}
		for i := range g.Data {
			g.Data[i] = float64(i)
		}
		g.Data[5] = math.NaN() // voxel (1, 1)
		var buf bytes.Buffer
		// Max 12 keeps the grey map's largest voxel off the white background.
		if err := WriteSliceMap(&buf, g, SliceOptions{ColorMap: cm, Min: 0, Max: 12}); err != nil {
			t.Fatal(err)
		}
		img := decode(t, buf.Bytes(), 700, 600).(*image.NRGBA)
		box := image.Rectangle{Min: image.Pt(700, 600)}
		for y := range 600 {
			for x := range 600 { // the colour bar is right of x = 600
				if !nearN(img.NRGBAAt(x, y), color.NRGBA{255, 255, 255, 255}, 0) {
					box = box.Union(image.Rect(x, y, x+1, y+1))
				}
			}
		}
		if box.Dx() < 400 || math.Abs(float64(box.Dx())/float64(box.Dy())-4.0/3) > 0.02 {
			t.Fatalf("colour map %d: image area %v, want about 4:3 and large", cm, box)
		}
		for i, v := range g.Data {
			x, y := i%4, i/4
			px := box.Min.X + int((float64(x)+0.5)*float64(box.Dx())/4)
			py := box.Min.Y + int((float64(2-y)+0.5)*float64(box.Dy())/3)
			want := cm.Color(v / 12)
			if i == 5 {
				want = color.NRGBA{255, 255, 255, 255}
			}
			if got := img.NRGBAAt(px, py); !nearN(got, want, 1) {
				t.Errorf("colour map %d: voxel (%d,%d) at pixel (%d,%d) is %v, want %v", cm, x, y, px, py, got, want)
			}
		}
	}
}

func TestColorMapEnds(t *testing.T) {
	// matplotlib's viridis runs from #440154 to #fde725.
	if c := Viridis.Color(0); c != (color.NRGBA{0x44, 0x01, 0x54, 0xff}) {
		t.Errorf("viridis(0) = %v", c)
	}
	if c := Viridis.Color(1); c != (color.NRGBA{0xfd, 0xe7, 0x25, 0xff}) {
		t.Errorf("viridis(1) = %v", c)
	}
	if c := Viridis.Color(0.5); c != (color.NRGBA{0x21, 0x91, 0x8c, 0xff}) {
		t.Errorf("viridis(0.5) = %v", c)
	}
	if c := Grey.Color(2); c != (color.NRGBA{255, 255, 255, 255}) {
		t.Errorf("grey(2) = %v, want clamped to white", c)
	}
	if c := Grey.Color(math.NaN()); c.A != 0 {
		t.Errorf("grey(NaN) = %v, want transparent", c)
	}
}

// TestDirectionMapColours checks the dyads colour code: x is red, y green,
// z blue, the sign does not matter, vectors are normalised and the scale
// darkens the colour.
func TestDirectionMapColours(t *testing.T) {
	d := Directions{NX: 3, NY: 1,
		V:     []float64{1, 0, 0, 0, -3, 0, 0, 0, 2},
		Scale: []float64{1, 0.5, 1},
	}
	var buf bytes.Buffer
	if err := WriteDirectionMap(&buf, d, Options{Width: 600, Height: 300}); err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes(), 600, 300)
	red := find(img, img.Bounds(), color.NRGBA{255, 0, 0, 255}, 1)
	green := find(img, img.Bounds(), color.NRGBA{0, 128, 0, 255}, 1)
	blue := find(img, img.Bounds(), color.NRGBA{0, 0, 255, 255}, 1)
	for name, b := range map[string]blob{"red": red, "green": green, "blue": blue} {
		if b.n < 10000 { // each pixel is drawn as about 190×190 pixels
			t.Fatalf("%s: %d pixels", name, b.n)
		}
	}
	if !(red.cx < green.cx && green.cx < blue.cx) {
		t.Errorf("centroids red %.0f, green %.0f, blue %.0f not left to right", red.cx, green.cx, blue.cx)
	}
}

// TestConfusionMatrixCells checks cell placement: the only cell at the
// maximum (yellow) is row 0, column 1, i.e. top right of the cells at the
// minimum (dark purple).
func TestConfusionMatrixCells(t *testing.T) {
	var buf bytes.Buffer
	err := WriteConfusionMatrix(&buf, [][]float64{{0, 5}, {0, 0}}, []string{"A", "B"}, []string{"A", "B"}, Options{Width: 600, Height: 550})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes(), 600, 550)
	cells := image.Rect(0, 0, 480, 550) // left of the colour bar
	hi := find(img, cells, Viridis.Color(1), 1)
	lo := find(img, cells, Viridis.Color(0), 1)
	if hi.n < 5000 || lo.n < 3*5000 {
		t.Fatalf("%d maximum and %d minimum pixels", hi.n, lo.n)
	}
	if !(hi.cx > lo.cx && hi.cy < lo.cy) {
		t.Errorf("maximum cell at (%.0f,%.0f), minimum cells' centre at (%.0f,%.0f): want top right", hi.cx, hi.cy, lo.cx, lo.cy)
	}
}

// TestHistogramHeights checks bar heights: three values in the first of
// two bins and one in the second give heights in ratio 3 within the ±2
// pixels of anti-aliased edges.
func TestHistogramHeights(t *testing.T) {
	var buf bytes.Buffer
	err := WriteHistogram(&buf, []Series{{Values: []float64{0, 0.1, 0.2, 1, math.NaN()}}}, HistogramOptions{Bins: 2, Options: Options{Width: 600, Height: 400}})
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, buf.Bytes(), 600, 400)
	fill := over(withAlpha(palette[0], 0x70))
	all := find(img, img.Bounds(), fill, 3)
	if all.n == 0 {
		t.Fatal("no histogram fill")
	}
	// Heights from the vertical extent of the fill: grid lines under the
	// translucent fill break up runs of its colour.
	mid := (all.minX + all.maxX) / 2
	b1 := find(img, image.Rect(0, 0, mid, 400), fill, 3)
	b2 := find(img, image.Rect(mid, 0, 600, 400), fill, 3)
	h1, h2 := b1.maxY-b1.minY+1, b2.maxY-b2.minY+1
	if b1.n == 0 || b2.n == 0 || math.Abs(float64(h1)/float64(h2)-3) > 3*4.0/float64(h2) {
		t.Errorf("bar heights %d and %d px, want ratio 3", h1, h2)
	}
}

// TestBinomialQuantile compares the bisection against a direct cumulative
// sum of the binomial probability mass function.
func TestBinomialQuantile(t *testing.T) {
	for _, n := range []int{1, 7, 50} {
		for _, p := range []float64{0.01, 0.3, 0.5, 0.93} {
			for _, q := range []float64{0.025, 0.5, 0.975} {
				cdf, want := 0.0, -1
				for k := 0; k <= n; k++ {
					lc, _ := math.Lgamma(float64(n + 1))
					l1, _ := math.Lgamma(float64(k + 1))
					l2, _ := math.Lgamma(float64(n - k + 1))
					cdf += math.Exp(lc - l1 - l2 + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
					if cdf >= q-1e-12 {
						want = k
						break
					}
				}
				if got := binomialQuantile(n, p, q); got != want {
					t.Errorf("quantile(n=%d, p=%v, q=%v) = %d, want %d", n, p, q, got, want)
				}
			}
		}
	}
}

// TestCalibrationBandAndSeries checks that the band and the series are
// drawn: the grey band and the series colour are both present, and a
// second series adds the second colour.
func TestCalibrationBandAndSeries(t *testing.T) {
	u := make([]float64, 200)
	for i := range u {
		u[i] = (float64(i) + 0.5) / 200
	}
	for _, raw := range []bool{false, true} {
		var buf bytes.Buffer
		err := WriteCalibrationECDF(&buf, []Series{{Name: "a", Values: u}, {Name: "b", Values: u[:100]}}, CalibrationOptions{Raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, buf.Bytes(), 700, 500)
		if n := find(img, img.Bounds(), over(bandGrey), 3).n; n < 2000 {
			t.Errorf("raw=%v: %d band pixels", raw, n)
		}
		for i := range 2 {
			if n := find(img, img.Bounds(), palette[i], 10).n; n < 100 {
				t.Errorf("raw=%v: series %d has %d pixels", raw, i, n)
			}
		}
	}
}

// TestLambdaSweepStack checks the stacked panel: a model with probability
// 1 at every λ fills it and leaves no "other" area; probability 1/2 leaves
// the other half grey.
func TestLambdaSweepStack(t *testing.T) {
	grey := over(bandGrey)
	layer := over(withAlpha(palette[0], 0xc0))
	draw := func(p float64) (nl, ng int) {
		var buf bytes.Buffer
		s := Sweep{Lambda: []float64{0, 0.5, 1}, Models: []Series{{Name: "m", Values: []float64{p, p, p}}}}
		if err := WriteLambdaSweep(&buf, s, Options{}); err != nil {
			t.Fatal(err)
		}
		img := decode(t, buf.Bytes(), 700, 500)
		return find(img, img.Bounds(), layer, 3).n, find(img, img.Bounds(), grey, 3).n
	}
	full, g0 := draw(1)
	half, g1 := draw(0.5)
	// Anti-aliased black axis pixels can match the grey, hence the 1 % margin.
	if g0 > g1/100 {
		t.Errorf("p = 1: %d grey pixels (p = 1/2: %d)", g0, g1)
	}
	if full < 10000 || math.Abs(float64(half)/float64(full)-0.5) > 0.03 {
		t.Errorf("layer pixels %d (p=1) and %d (p=1/2), want ratio 1/2", full, half)
	}
	if math.Abs(float64(g1)/float64(half)-1) > 0.05 {
		t.Errorf("p = 1/2: %d grey and %d layer pixels, want equal", g1, half)
	}
}

// TestPairPlotTruth checks that the truth markers appear only when asked
// for and that the scatter panels are drawn.
func TestPairPlotTruth(t *testing.T) {
	samples := make([][]float64, 200)
	for i := range samples {
		x := float64(i) / 200
		samples[i] = []float64{x, x * x, 1 - x}
	}
	samples[3][1] = math.NaN()
	for _, truth := range [][]float64{nil, {0.5, 0.25, math.NaN()}} {
		var buf bytes.Buffer
		err := WritePairPlot(&buf, []string{"a", "b", "c"}, samples, PairOptions{Truth: truth, Options: Options{Width: 500, Height: 500}})
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, buf.Bytes(), 500, 500)
		n := find(img, img.Bounds(), seriesColor(3), 10).n
		if truth == nil && n != 0 || truth != nil && n < 200 {
			t.Errorf("truth %v: %d truth-coloured pixels", truth, n)
		}
		if n := find(img, img.Bounds(), over(withAlpha(seriesColor(0), 0x80)), 3).n; n < 1000 {
			t.Errorf("histogram fill: %d pixels", n)
		}
	}
}

func TestBadInput(t *testing.T) {
	nan := math.NaN()
	cases := map[string]struct {
		call func(path string) error
		want string
	}{
		"bars empty": {func(p string) error { return ModelBars(p, nil, nil, Options{}) }, "no data"},
		"bars mismatch": {func(p string) error {
			return ModelBars(p, []string{"a"}, []Series{{Values: []float64{1, 2}}}, Options{})
		}, "2 values for 1 labels"},
		"bars NaN": {func(p string) error {
			return ModelBars(p, []string{"a"}, []Series{{Values: []float64{nan}}}, Options{})
		}, "finite"},
		"bars negative": {func(p string) error { return ModelBars(p, []string{"a"}, []Series{{Values: []float64{-1}}}, Options{}) }, "≥ 0"},
		"size":          {func(p string) error { return figures["ModelBars"](p, Options{Width: 5}) }, "image size"},
		"pair empty":    {func(p string) error { return PairPlot(p, nil, nil, PairOptions{}) }, "no data"},
		"pair NaN":      {func(p string) error { return PairPlot(p, []string{"a"}, [][]float64{{nan}}, PairOptions{}) }, "finite"},
		"pair ragged":   {func(p string) error { return PairPlot(p, []string{"a", "b"}, [][]float64{{1}}, PairOptions{}) }, "1 values for 2"},
		"pair truth": {func(p string) error {
			return PairPlot(p, []string{"a"}, [][]float64{{1}}, PairOptions{Truth: []float64{1, 2}})
		}, "truth"},
		"pair too many": {func(p string) error {
			return PairPlot(p, make([]string, 13), [][]float64{make([]float64, 13)}, PairOptions{})
		}, "at most"},
		"band empty": {func(p string) error { return PredictiveBand(p, Points{}, nil, Options{}) }, "no data"},
		"band obs":   {func(p string) error { return PredictiveBand(p, Points{X: []float64{1}}, nil, Options{}) }, "1 x values but 0"},
		"band obs NaN": {func(p string) error {
			return PredictiveBand(p, Points{X: []float64{nan}, Y: []float64{1}}, nil, Options{})
		}, "finite"},
		"band lengths": {func(p string) error {
			return PredictiveBand(p, Points{}, []Band{{X: []float64{1, 2}, Mean: []float64{1}}}, Options{})
		}, "differ"},
		"band NaN": {func(p string) error {
			return PredictiveBand(p, Points{}, []Band{{X: []float64{nan, nan}, Mean: []float64{1, 1}, Lo: []float64{1, 1}, Hi: []float64{1, 1}}}, Options{})
		}, "fewer than 2"},
		"sweep grid": {func(p string) error {
			return LambdaSweep(p, Sweep{Lambda: []float64{1, 0}, Center: []float64{1, 1}}, Options{})
		}, "increasing"},
		"sweep empty": {func(p string) error { return LambdaSweep(p, Sweep{Lambda: []float64{0, 1}}, Options{}) }, "no data"},
		"sweep center": {func(p string) error {
			return LambdaSweep(p, Sweep{Lambda: []float64{0, 1}, Center: []float64{1}}, Options{})
		}, "1 values for 2"},
		"sweep NaN": {func(p string) error {
			return LambdaSweep(p, Sweep{Lambda: []float64{0, 1}, Center: []float64{nan, nan}}, Options{})
		}, "finite"},
		"sweep sum": {func(p string) error {
			return LambdaSweep(p, Sweep{Lambda: []float64{0, 1}, Models: []Series{{Values: []float64{0.7, 0.7}}, {Values: []float64{0.7, 0.1}}}}, Options{})
		}, "sum"},
		"ecdf empty": {func(p string) error { return CalibrationECDF(p, nil, CalibrationOptions{}) }, "no data"},
		"ecdf NaN": {func(p string) error {
			return CalibrationECDF(p, []Series{{Values: []float64{nan}}}, CalibrationOptions{})
		}, "finite"},
		"ecdf range": {func(p string) error {
			return CalibrationECDF(p, []Series{{Values: []float64{1.5}}}, CalibrationOptions{})
		}, "outside [0, 1]"},
		"ecdf band": {func(p string) error {
			return CalibrationECDF(p, []Series{{Values: []float64{0.5}}}, CalibrationOptions{Band: &ECDFBand{Z: []float64{0, 1}}})
		}, "band"},
		"confusion empty":  {func(p string) error { return ConfusionMatrix(p, nil, nil, nil, Options{}) }, "no data"},
		"confusion ragged": {func(p string) error { return ConfusionMatrix(p, [][]float64{{1, 2}, {3}}, nil, nil, Options{}) }, "row 1"},
		"confusion NaN":    {func(p string) error { return ConfusionMatrix(p, [][]float64{{nan}}, nil, nil, Options{}) }, "finite"},
		"confusion labels": {func(p string) error { return ConfusionMatrix(p, [][]float64{{1}}, []string{"a", "b"}, nil, Options{}) }, "labels"},
		"hist empty":       {func(p string) error { return Histogram(p, nil, HistogramOptions{}) }, "no data"},
		"hist NaN":         {func(p string) error { return Histogram(p, []Series{{Values: []float64{nan}}}, HistogramOptions{}) }, "finite"},
		"slice size":       {func(p string) error { return SliceMap(p, Grid{NX: 2, NY: 2, Data: []float64{1}}, SliceOptions{}) }, "needs 4 values"},
		"slice empty":      {func(p string) error { return SliceMap(p, Grid{}, SliceOptions{}) }, "no data"},
		"slice NaN":        {func(p string) error { return SliceMap(p, Grid{NX: 1, NY: 1, Data: []float64{nan}}, SliceOptions{}) }, "finite"},
		"slice range": {func(p string) error {
			return SliceMap(p, Grid{NX: 1, NY: 1, Data: []float64{1}}, SliceOptions{Min: 2, Max: 1})
		}, "range"},
		"slice colour map": {func(p string) error {
			return SliceMap(p, Grid{NX: 1, NY: 1, Data: []float64{1}}, SliceOptions{ColorMap: 7})
		}, "colour map"},
		"direction size": {func(p string) error { return DirectionMap(p, Directions{NX: 1, NY: 1, V: []float64{1}}, Options{}) }, "needs 3 values"},
		"direction scale": {func(p string) error {
			return DirectionMap(p, Directions{NX: 1, NY: 1, V: []float64{1, 0, 0}, Scale: []float64{}}, Options{})
		}, "scale"},
		"direction all NaN": {func(p string) error {
			return DirectionMap(p, Directions{NX: 1, NY: 1, V: []float64{nan, 0, 0}}, Options{})
		}, "finite"},
	}
	dir := t.TempDir()
	for name, c := range cases {
		path := filepath.Join(dir, "out.png")
		err := c.call(path)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "plot: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want prefix \"plot: \" and %q", name, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed figures left %d files", len(entries))
	}
}

// TestDegenerateValues feeds constant, tiny-range and huge values to every
// figure: each must either draw or return a validation error, never reach
// the panic guard.
func TestDegenerateValues(t *testing.T) {
	for _, vs := range [][]float64{{5, 5, 5}, {0, 0, 0}, {1e-300, 2e-300, 3e-300}, {-1e300, 0, 1e300}, {math.Inf(1), 1, 2}} {
		n := len(vs)
		lam := []float64{0, 0.5, 1}
		rows := make([][]float64, n)
		for i, v := range vs {
			rows[i] = []float64{v, vs[n-1-i]}
		}
		u := make([]float64, n)
		for i, v := range vs {
			u[i] = math.Min(1, math.Max(0, math.Abs(v)))
		}
		calls := map[string]error{
			"bars":      WriteModelBars(io.Discard, []string{"a", "b", "c"}, []Series{{Values: u}}, Options{}),
			"pair":      WritePairPlot(io.Discard, []string{"a", "b"}, rows, PairOptions{}),
			"band":      WritePredictiveBand(io.Discard, Points{X: vs, Y: vs}, []Band{{X: lam, Mean: vs, Lo: vs, Hi: vs}}, Options{}),
			"sweep":     WriteLambdaSweep(io.Discard, Sweep{Lambda: lam, Center: vs, Lo: vs, Hi: vs}, Options{}),
			"ecdf":      WriteCalibrationECDF(io.Discard, []Series{{Values: u}}, CalibrationOptions{}),
			"confusion": WriteConfusionMatrix(io.Discard, [][]float64{vs, vs}, nil, nil, Options{}),
			"hist":      WriteHistogram(io.Discard, []Series{{Values: vs}}, HistogramOptions{}),
			"slice":     WriteSliceMap(io.Discard, Grid{NX: 3, NY: 1, Data: vs}, SliceOptions{}),
			"direction": WriteDirectionMap(io.Discard, Directions{NX: 1, NY: 1, V: vs}, Options{}),
		}
		for name, err := range calls {
			if err != nil && strings.Contains(err.Error(), "internal") {
				t.Errorf("%s %v: %v", name, vs, err)
			}
		}
	}
}

// TestECDFAtLevelBoundaries: values that fill each of L discrete levels
// (r − 0.5)/L equally have an ECDF equal to z at every boundary k/L, so the
// curve minus the diagonal is exactly zero (the step function would swing
// by ±1/(2L) between levels); a shift of every value one level up lowers the
// curve by 1/L at every inner boundary.
func TestECDFAtLevelBoundaries(t *testing.T) {
	const L, copies = 11, 3
	var u, up []float64
	for r := 1; r <= L; r++ {
		for range copies {
			u = append(u, (float64(r)-0.5)/L)
			up = append(up, (float64(min(r+1, L))-0.5)/L)
		}
	}
	diag := func(z float64) float64 { return z }
	xy := ecdfAtBoundaries(u, L, diag)
	if len(xy) != L+1 {
		t.Fatalf("%d points, want %d", len(xy), L+1)
	}
	for k, p := range xy {
		if math.Abs(p.X-float64(k)/L) > 1e-15 || math.Abs(p.Y) > 1e-12 {
			t.Errorf("point %d: (%v, %v), want (%v, 0)", k, p.X, p.Y, float64(k)/L)
		}
	}
	steps := ecdfSteps(u, diag)
	swing := 0.0
	for _, p := range steps {
		swing = max(swing, math.Abs(p.Y))
	}
	if swing < 0.45/L { // steps of 1/L centred on the diagonal reach ±1/(2L)
		t.Errorf("step function reaches %v, expected about 1/(2L) = %v (the sawtooth Levels removes)", swing, 0.5/L)
	}
	xy = ecdfAtBoundaries(up, L, diag)
	for k := 1; k < L; k++ {
		if want := -1.0 / L; math.Abs(xy[k].Y-want) > 1e-12 {
			t.Errorf("shifted values, boundary %d: %v, want %v", k, xy[k].Y, want)
		}
	}
	var buf bytes.Buffer
	if err := WriteCalibrationECDF(&buf, []Series{{Values: u}}, CalibrationOptions{Levels: L}); err != nil {
		t.Fatal(err)
	}
	if err := WriteCalibrationECDF(&buf, []Series{{Values: u}}, CalibrationOptions{Levels: -1}); err == nil || !strings.Contains(err.Error(), "levels") {
		t.Errorf("negative levels: error %v", err)
	}
}
