package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// pointsEmbedder reads observations measured at covariate values of their
// own (family.ObservationPoints): one token per measurement, from its
// covariate value (scaled to [−1, 1] over the family's range and
// Fourier-embedded) and its value, with the observation's location and
// scale on every token, as for grids. There is no positional embedding:
// the tokens form a set, so observations may differ in where and how often
// they were measured.
type pointsEmbedder struct {
	c       PointsEncoderConfig
	lo, hi  float64        // covariate range mapped to [−1, 1]
	fourier *engine.Tensor // [⌈Fourier/2⌉, 1]
	w, b    *engine.Tensor // input map [Fourier + pointsFeatures, D], [D]
}

// pointsFeatures is the width of a token besides the Fourier embedding:
// the scaled covariate c̃, the standardised value (y − m)/s, asinh(y),
// asinh(m) and ln s.
const pointsFeatures = 5

func newPointsEmbedder(c Config, f family.Family, d0 family.Design) (embedder, error) {
	if d0.CovDim != 1 {
		return nil, fmt.Errorf("point observations have one covariate per value, the design has %d", d0.CovDim)
	}
	if c.Points.Fourier <= 0 {
		return nil, fmt.Errorf("points.fourier %d must be positive", c.Points.Fourier)
	}
	r, ok := f.(family.CovariateRanger)
	if !ok {
		return nil, fmt.Errorf("a family with point observations must give its covariate range (family.CovariateRanger)")
	}
	lo, hi := r.CovariateRange()
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil, fmt.Errorf("covariate range [%v, %v] is empty or infinite", lo, hi)
	}
	return &pointsEmbedder{c: c.Points, lo: lo, hi: hi}, nil
}

// build creates fourier, in.w and in.b.
func (e *pointsEmbedder) build(s engine.Scope, d int) {
	e.fourier = s.New("fourier", engine.Normal(1), (e.c.Fourier+1)/2, 1)
	e.w = s.New("in.w", engine.VarianceScaling(1), e.c.Fourier+pointsFeatures, d)
	e.b = s.New("in.b", engine.Zeros, d)
}

func (e *pointsEmbedder) tokens(m int) (int, error) { return m, nil }

// fill writes c̃ into in.BTild ([B, T, 1]) and the other features into
// in.Feat ([B, T, pointsFeatures]).
func (e *pointsEmbedder) fill(in *encInput, designs []family.Design, xs [][]float64) {
	m := in.T
	in.Feat = resize(in.Feat, in.B*m*pointsFeatures)
	in.BTild = resize(in.BTild, in.B*m)
	for i, x := range xs {
		pointTokens(designs[i], x, e.lo, e.hi, in.BTild[i*m:(i+1)*m], in.Feat[i*m*pointsFeatures:(i+1)*m*pointsFeatures])
	}
}

// pointTokens writes one observation's tokens: c̃_j = 2(c_j − lo)/(hi − lo)
// − 1 into ct and, per measurement, (c̃_j, (y_j − m)/s, asinh y_j, asinh m,
// ln s) into feat, with m and s the mean and standard deviation of y (s
// floored at 1e−12; the standardised value is 0 when s = 0).
func pointTokens(d family.Design, y []float64, lo, hi float64, ct, feat []float32) {
	mean, inv, loc, scale := locationScale(y)
	for j, v := range y {
		c := float32(2*(d.Cov[j*d.CovDim]-lo)/(hi-lo) - 1)
		ct[j] = c
		row := feat[j*pointsFeatures : (j+1)*pointsFeatures]
		row[0], row[1], row[2], row[3], row[4] = c, float32((v-mean)*inv), float32(math.Asinh(v)), loc, scale
	}
}

func (e *pointsEmbedder) embed(g *engine.Graph, in *encInput) *engine.Tensor {
	ct := g.Input(in.BTild, in.B, in.T, 1)
	feat := g.Input(in.Feat, in.B, in.T, pointsFeatures)
	x := g.Concat(-1, g.FourierFeatures(ct, e.fourier, e.c.Fourier), feat)
	return g.Linear(x, e.w, e.b)
}
