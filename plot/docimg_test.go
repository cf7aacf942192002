package plot

import (
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var docImg = flag.String("docimg", "", "write the example figures of docs/plots.md to this directory")

// TestDocImages writes one example PNG per figure when run with
// -docimg DIR (see docs/plots.md); without the flag it is skipped.
func TestDocImages(t *testing.T) {
	if *docImg == "" {
		t.Skip("run with -docimg DIR to write the example figures")
	}
	dir := *docImg
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range exampleFigures() {
		if err := f(filepath.Join(dir, name+".png")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// exampleFigures returns one synthetic example per figure, keyed by file
// name. The data are made up but shaped like prism's outputs.
func exampleFigures() map[string]func(path string) error {
	// Each example has its own generator so that the figures do not depend
	// on the (random) map iteration order.
	newRNG := func(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 2)) }
	return map[string]func(string) error{
		"model-bars": func(path string) error {
			labels := []string{"B+S1+S2", "B+S1", "B+S1+S2+S3", "Z+S1+S2", "B+Z+S1"}
			return ModelBars(path, labels, []Series{
				{Name: "learned q(M|x,λ)", Values: []float64{0.52, 0.21, 0.12, 0.06, 0.03}},
				{Name: "exact", Values: []float64{0.49, 0.24, 0.10, 0.07, 0.04}},
			}, Options{Title: "Top models, λ = 0.5"})
		},
		"pair-plot": func(path string) error {
			rng := newRNG(1)
			names := []string{"f1", "θ1", "φ1", "d"}
			samples := make([][]float64, 4000)
			for i := range samples {
				a, b := rng.NormFloat64(), rng.NormFloat64()
				samples[i] = []float64{0.6 + 0.05*a, 1.2 + 0.1*(0.8*a+0.6*b), 0.3 + 0.2*rng.NormFloat64(), 1.7 + 0.1*math.Abs(rng.NormFloat64())}
			}
			return PairPlot(path, names, samples, PairOptions{Options: Options{Title: "Parameter posterior", Width: 640, Height: 640}, Truth: []float64{0.62, 1.25, 0.2, 1.72}, MaxPoints: 1000})
		},
		"predictive-band": func(path string) error {
			rng := newRNG(2)
			var obs Points
			for range 60 {
				x := 10 * rng.Float64()
				obs.X = append(obs.X, x)
				obs.Y = append(obs.Y, math.Log1p(x)+0.2*math.Sin(x)+0.15*rng.NormFloat64())
			}
			band := func(name string, w float64) Band {
				b := Band{Name: name}
				for i := range 121 {
					x := 12 * float64(i) / 120
					m := math.Log1p(x) + 0.2*math.Sin(x)
					s := 0.3 + w*math.Max(0, x-10)
					b.X, b.Mean, b.Lo, b.Hi = append(b.X, x), append(b.Mean, m), append(b.Lo, m-s), append(b.Hi, m+s)
				}
				return b
			}
			return PredictiveBand(path, obs, []Band{band("global (model average)", 0.5), band("local (top model)", 0.15)},
				Options{Title: "Posterior predictive, 95 % band", XLabel: "x", YLabel: "y"})
		},
		"lambda-sweep": func(path string) error {
			var s Sweep
			probs := make([][]float64, 3)
			for i := range 21 {
				l := 0.05 + 0.9*float64(i)/20
				m := 1 + 8*l*l + 2*l
				s.Lambda = append(s.Lambda, l)
				s.Center = append(s.Center, math.Round(m))
				s.Lo = append(s.Lo, math.Max(1, math.Round(m-1-2*l)))
				s.Hi = append(s.Hi, math.Round(m+1+3*l))
				a := math.Exp(-4 * l)
				b := 0.5 * math.Exp(-8*(l-0.35)*(l-0.35))
				c := 0.4 * l * l
				probs[0], probs[1], probs[2] = append(probs[0], 0.9*a), append(probs[1], b*(1-0.9*a)), append(probs[2], c*(1-0.9*a))
			}
			s.Models = []Series{{Name: "c+log x", Values: probs[0]}, {Name: "c+√x+x", Values: probs[1]}, {Name: "c+log x+sin x+x²", Values: probs[2]}}
			return LambdaSweep(path, s, Options{Title: "Model posterior across λ"})
		},
		"calibration-ecdf": func(path string) error {
			rng := newRNG(3)
			good, over := make([]float64, 500), make([]float64, 500)
			for i := range good {
				good[i] = rng.Float64()
				// An over-confident posterior puts the truth in its tails.
				u := rng.Float64()
				over[i] = 0.5 + 0.5*math.Copysign(math.Pow(math.Abs(2*u-1), 0.6), u-0.5)
			}
			return CalibrationECDF(path, []Series{{Name: "calibrated", Values: good}, {Name: "over-confident", Values: over}},
				CalibrationOptions{Options: Options{Title: "SBC: model masks, N = 500"}})
		},
		"confusion-matrix": func(path string) error {
			labels := []string{"B", "S", "BS", "BSS", "BSSS", "BZ"}
			m := make([][]float64, len(labels))
			for i := range m {
				m[i] = make([]float64, len(labels))
				for j := range m[i] {
					m[i][j] = math.Exp(-2 * math.Abs(float64(i-j)))
				}
				var s float64
				for _, v := range m[i] {
					s += v
				}
				for j := range m[i] {
					m[i][j] /= s
				}
			}
			return ConfusionMatrix(path, m, labels, labels, Options{Title: "Confusion matrix (row-normalised)"})
		},
		"histogram": func(path string) error {
			rng := newRNG(4)
			a, b := make([]float64, 800), make([]float64, 800)
			for i := range a {
				a[i] = math.Exp(-1.5 + 0.4*rng.NormFloat64())
				b[i] = math.Exp(-0.7 + 0.5*rng.NormFloat64())
			}
			return Histogram(path, []Series{{Name: "selected model", Values: a}, {Name: "fixed model", Values: b}},
				HistogramOptions{Options: Options{Title: "rKSD", XLabel: "rKSD"}})
		},
		"slice-map": func(path string) error {
			rng := newRNG(5)
			g := Grid{NX: 64, NY: 72, Data: make([]float64, 64*72)}
			for y := range g.NY {
				for x := range g.NX {
					u, v := (float64(x)-31.5)/28, (float64(y)-35.5)/33
					r := u*u + v*v
					if r > 1 {
						g.Data[x+g.NX*y] = math.NaN()
						continue
					}
					g.Data[x+g.NX*y] = 0.2 + 0.6*math.Exp(-8*(u-0.2*v)*(u-0.2*v)) + 0.05*rng.NormFloat64()
				}
			}
			return SliceMap(path, g, SliceOptions{Options: Options{Title: "Fibre fraction f1 (slice z = 40)"}, Label: "f1", Min: 0, Max: 1})
		},
		"direction-map": func(path string) error {
			d := Directions{NX: 64, NY: 72, V: make([]float64, 3*64*72), Scale: make([]float64, 64*72)}
			for y := range d.NY {
				for x := range d.NX {
					i := x + d.NX*y
					u, v := (float64(x)-31.5)/28, (float64(y)-35.5)/33
					if u*u+v*v > 1 {
						d.V[3*i] = math.NaN()
						continue
					}
					a := math.Atan2(v, u)
					d.V[3*i], d.V[3*i+1], d.V[3*i+2] = -math.Sin(a), math.Cos(a), 0.5*u
					d.Scale[i] = 0.3 + 0.7*math.Exp(-8*(u-0.2*v)*(u-0.2*v))
				}
			}
			return DirectionMap(path, d, Options{Title: "Principal direction × f1"})
		},
	}
}
