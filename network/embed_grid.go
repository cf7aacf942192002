package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// gridEmbedder reads grid observations (family.ObservationGrid): N values
// at fixed positions, P consecutive values per token, with a learned
// embedding per token position.
type gridEmbedder struct {
	c      GridEncoderConfig
	maxObs int            // tokens of the family's default design (positional table size)
	w, b   *engine.Tensor // input map [width, D], [D]
	pos    *engine.Tensor // [maxObs, D]
}

func newGridEmbedder(c Config, _ family.Family, d0 family.Design) (embedder, error) {
	if d0.CovDim != 1 {
		return nil, fmt.Errorf("grid observations have one covariate per value (the grid position), the design has %d", d0.CovDim)
	}
	p := c.Grid.PointsPerToken
	if p <= 0 {
		return nil, fmt.Errorf("grid.points_per_token %d must be positive", p)
	}
	return &gridEmbedder{c: c.Grid, maxObs: (d0.N + p - 1) / p}, nil
}

// build creates in.w, pos and in.b (the order of the parameter store).
func (e *gridEmbedder) build(s engine.Scope, d int) {
	e.w = s.New("in.w", engine.VarianceScaling(1), e.inputWidth(), d)
	e.pos = s.New("pos", engine.Normal(1), e.maxObs, d)
	e.b = s.New("in.b", engine.Zeros, d)
}

func (e *gridEmbedder) tokens(m int) (int, error) {
	t := (m + e.c.PointsPerToken - 1) / e.c.PointsPerToken
	if t > e.maxObs {
		return 0, fmt.Errorf("%d grid values need %d tokens, the network has positions for %d", m, t, e.maxObs)
	}
	return t, nil
}

// gridFeatures is the width of a grid token's input: P standardised
// values, P squashed raw values, asinh of the observation mean and log of
// its standard deviation.
func gridFeatures(p int) int { return 2*p + 2 }

// tokenWidth is a grid token's feature count: gridFeatures, plus the P raw
// values with Linear.
func (e *gridEmbedder) tokenWidth() int {
	if e.c.Linear {
		return gridFeatures(e.c.PointsPerToken) + e.c.PointsPerToken
	}
	return gridFeatures(e.c.PointsPerToken)
}

// inputWidth is the width of the encoder's input rows: one token's
// features, or with Linear one block of tokenWidth per token position,
// only the token's own block non-zero (so that the input projection is a
// separate matrix per position).
func (e *gridEmbedder) inputWidth() int {
	if e.c.Linear {
		return e.maxObs * e.tokenWidth()
	}
	return e.tokenWidth()
}

func (e *gridEmbedder) fill(in *encInput, _ []family.Design, xs [][]float64) {
	p, w := e.c.PointsPerToken, e.inputWidth()
	in.Feat = resize(in.Feat, in.B*in.T*w)
	if !e.c.Linear {
		for i, x := range xs {
			gridTokens(x, p, in.Feat[i*in.T*w:(i+1)*in.T*w])
		}
		return
	}
	clear(in.Feat)
	f0, tw := gridFeatures(p), e.tokenWidth()
	in.tok = resize(in.tok, in.T*f0)
	tok := in.tok
	for i, x := range xs {
		gridTokens(x, p, tok)
		for t := range in.T {
			row := in.Feat[(i*in.T+t)*w+t*tw : (i*in.T+t)*w+(t+1)*tw]
			copy(row, tok[t*f0:(t+1)*f0])
			for j := range p {
				if k := t*p + j; k < len(x) {
					row[f0+j] = float32(x[k])
				}
			}
		}
	}
}

func (e *gridEmbedder) embed(g *engine.Graph, in *encInput) *engine.Tensor {
	x := g.Input(in.Feat, in.B, in.T, e.inputWidth())
	pos := e.pos
	if in.T < e.maxObs {
		pos = g.Slice(pos, 0, 0, in.T)
	}
	return g.Add(g.Linear(x, e.w, e.b), pos)
}

// gridTokens writes the tokens of one grid observation y into out
// ([T, 2P+2]). Token t holds, for its P points j (zero past the end of y):
//
//	(y_j − m)/s       P standardised values (0 if s = 0)
//	asinh(y_j)        P raw values under a signed-log squash
//	asinh(m), ln s    the observation's location and scale, on every token
//
// with m and s the mean and standard deviation of y (s floored at 1e-12).
// Standardisation makes the shape of y visible at any magnitude, the
// squashed values and the two summary features keep its absolute level and
// scale (which the parameters determine), and every feature stays O(10)
// even for |y| ≳ 10³.
func gridTokens(y []float64, p int, out []float32) {
	mean, inv, loc, scale := locationScale(y)
	f := gridFeatures(p)
	t := len(out) / f
	for k := range t {
		row := out[k*f : (k+1)*f]
		for j := range p {
			i := k*p + j
			if i < len(y) {
				row[j] = float32((y[i] - mean) * inv)
				row[p+j] = float32(math.Asinh(y[i]))
			} else {
				row[j], row[p+j] = 0, 0
			}
		}
		row[2*p], row[2*p+1] = loc, scale
	}
}

// locationScale returns the mean m of y, 1/s for its standard deviation s
// (0 when s = 0), and the token summaries asinh(m) and ln max(s, 1e−12).
func locationScale(y []float64) (mean, inv float64, loc, scale float32) {
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	ss := 0.0
	for _, v := range y {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / float64(len(y)))
	if sd > 0 {
		inv = 1 / sd
	}
	return mean, inv, float32(math.Asinh(mean)), float32(math.Log(max(sd, 1e-12)))
}
