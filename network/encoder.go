package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// Observation is one observed data set: where it was measured and the
// values.
type Observation struct {
	Design family.Design
	X      []float64 // length Design.N
}

// encInput holds the encoder's input arrays for a batch of B observations
// of T tokens each.
type encInput struct {
	B, T  int
	Feat  []float32 // grid: [B, T, gridInputWidth]; dMRI: [B, T, BEmbed + 3·⌈BEmbed/3⌉ (+12)]
	BTild []float32 // dMRI: [B, T, 1] scaled b-values b̃
	tok   []float32 // grid with GridLinear: one observation's [T, 2P+2] tokens
}

// gridFeatures is the width of a grid token's input: P standardised
// values, P squashed raw values, asinh of the observation mean and log of
// its standard deviation.
func gridFeatures(p int) int { return 2*p + 2 }

// gridTokenWidth is a grid token's feature count: gridFeatures, plus the
// P raw values with Config.GridLinear.
func (n *Net) gridTokenWidth() int {
	if n.cfg.GridLinear {
		return gridFeatures(n.cfg.PointsPerToken) + n.cfg.PointsPerToken
	}
	return gridFeatures(n.cfg.PointsPerToken)
}

// gridInputWidth is the width of the encoder's input rows for grid
// families: one token's features, or with Config.GridLinear one block of
// gridTokenWidth per token position, only the token's own block non-zero
// (so that the input projection is a separate matrix per position).
func (n *Net) gridInputWidth() int {
	if n.cfg.GridLinear {
		return n.maxObs * n.gridTokenWidth()
	}
	return n.gridTokenWidth()
}

// gRepeat is how often each b-vector component is repeated in a dMRI
// token (4 for BEmbed 12).
func gRepeat(c Config) int { return (c.BEmbed + 2) / 3 }

// dmriFeatures is the width of a dMRI token's input besides the Fourier
// embedding of b̃: the squashed signal repeated BEmbed times and the
// b-vector with each component repeated gRepeat times.
func dmriFeatures(c Config) int {
	w := c.BEmbed + 3*gRepeat(c)
	if c.TensorFeatures {
		w += 2 * tensorFeatures
	}
	return w
}

// tensorFeatures is the number of unique entries of a symmetric 3×3
// matrix, the width of each of the two optional tensor blocks of a dMRI
// token (Config.TensorFeatures).
const tensorFeatures = 6

// tokensFor is the number of encoder tokens of an observation with n
// measurements.
func (n *Net) tokensFor(m int) int {
	if n.grid {
		return (m + n.cfg.PointsPerToken - 1) / n.cfg.PointsPerToken
	}
	return m
}

// resize returns s with length m, reusing its storage when possible.
func resize[T any](s []T, m int) []T {
	if cap(s) >= m {
		return s[:m]
	}
	return make([]T, m)
}

// fillEncoder writes the encoder inputs of the observations (designs[i],
// xs[i]) into in, reusing its buffers. All observations must have the same
// number of measurements.
func (n *Net) fillEncoder(in *encInput, designs []family.Design, xs [][]float64) error {
	b := len(xs)
	if b == 0 {
		return fmt.Errorf("no observations")
	}
	m := designs[0].N
	for i := range xs {
		d := designs[i]
		if d.N != m || len(xs[i]) != m {
			return fmt.Errorf("observation %d has %d values (design N=%d), observation 0 has %d: a batch needs one length", i, len(xs[i]), d.N, m)
		}
		if d.CovDim != n.covDim {
			return fmt.Errorf("observation %d has %d covariates per measurement, the %s network expects %d", i, d.CovDim, n.fam.Name(), n.covDim)
		}
	}
	if m == 0 {
		return fmt.Errorf("observations have no measurements")
	}
	in.B, in.T = b, n.tokensFor(m)
	if n.grid {
		if in.T > n.maxObs {
			return fmt.Errorf("%d grid values need %d tokens, the network has positions for %d", m, in.T, n.maxObs)
		}
		p, w := n.cfg.PointsPerToken, n.gridInputWidth()
		in.Feat = resize(in.Feat, b*in.T*w)
		if !n.cfg.GridLinear {
			for i, x := range xs {
				gridTokens(x, p, in.Feat[i*in.T*w:(i+1)*in.T*w])
			}
			return nil
		}
		clear(in.Feat)
		f0, tw := gridFeatures(p), n.gridTokenWidth()
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
		return nil
	}
	f := dmriFeatures(n.cfg)
	in.Feat = resize(in.Feat, b*m*f)
	in.BTild = resize(in.BTild, b*m)
	for i, x := range xs {
		n.dmriTokens(designs[i], x, in.BTild[i*m:(i+1)*m], in.Feat[i*m*f:(i+1)*m*f])
	}
	return nil
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
	mean := 0.0
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	ss := 0.0
	for _, v := range y {
		ss += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(ss / float64(len(y)))
	inv := 0.0
	if sd > 0 {
		inv = 1 / sd
	}
	loc, scale := float32(math.Asinh(mean)), float32(math.Log(max(sd, 1e-12)))
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

// dmriTokens writes the per-measurement inputs of one dMRI observation:
// b̃ = 2·clip(b, 0, MaxB)/MaxB − 1 into bt, and into feat ([N,
// dmriFeatures]) the soft-squashed signal sigmoid((s − 0.5)/0.5) repeated
// BEmbed times followed by gx, gy, gz each repeated gRepeat times
// (reference-spec §3.4). With Config.TensorFeatures the row continues with
// (gx², gy², gz², √2 gx gy, √2 gx gz, √2 gy gz) and the same six values
// times the signal clipped to [0, 1.5] (all zero for b < 1 s/mm², where the
// b-vector carries no direction).
func (n *Net) dmriTokens(d family.Design, s []float64, bt, feat []float32) {
	c := n.cfg
	f, rep := dmriFeatures(c), gRepeat(c)
	for j := range d.N {
		cov := d.Row(j)
		b := min(max(cov[0], 0), c.MaxB)
		bt[j] = float32(2*b/c.MaxB - 1)
		row := feat[j*f : (j+1)*f]
		sq := float32(1 / (1 + math.Exp(-(s[j]-0.5)/0.5)))
		for k := range c.BEmbed {
			row[k] = sq
		}
		for a := range 3 {
			for k := range rep {
				row[c.BEmbed+a*rep+k] = float32(cov[1+a])
			}
		}
		if c.TensorFeatures {
			tensorTokenFeatures(cov, s[j], row[c.BEmbed+3*rep:])
		}
	}
}

// tensorTokenFeatures writes the 2·tensorFeatures tensor features of one
// measurement with covariates cov = (b, gx, gy, gz) and signal s into out.
func tensorTokenFeatures(cov []float64, s float64, out []float32) {
	gx, gy, gz := cov[1], cov[2], cov[3]
	if cov[0] < 1 {
		gx, gy, gz = 0, 0, 0
	}
	const r2 = math.Sqrt2
	gg := [tensorFeatures]float64{gx * gx, gy * gy, gz * gz, r2 * gx * gy, r2 * gx * gz, r2 * gy * gz}
	sc := min(max(s, 0), 1.5)
	if math.IsNaN(s) {
		sc = 0
	}
	for k, v := range gg {
		out[k] = float32(v)
		out[tensorFeatures+k] = float32(sc * v)
	}
}

// encode runs the encoder on prepared inputs and returns the encoder
// tokens [B, T, D] after a final LayerNorm.
func (n *Net) encode(g *engine.Graph, in *encInput) *engine.Tensor {
	c := n.cfg
	var h *engine.Tensor
	if n.grid {
		x := g.Input(in.Feat, in.B, in.T, n.gridInputWidth())
		pos := n.encPos
		if in.T < n.maxObs {
			pos = g.Slice(pos, 0, 0, in.T)
		}
		h = g.Add(g.Linear(x, n.encW, n.encB), pos)
	} else {
		bt := g.Input(in.BTild, in.B, in.T, 1)
		feat := g.Input(in.Feat, in.B, in.T, dmriFeatures(c))
		x := g.Concat(-1, g.FourierFeatures(bt, n.encFourier, c.BEmbed), feat)
		h = g.Linear(x, n.encW, n.encB)
	}
	for i := range n.enc {
		h = n.enc[i].forward(g, c.Heads, h, nil, nil, engine.Mask{}, nil)
	}
	return g.LayerNorm(h, n.encLNg, n.encLNb)
}

// Encode runs the encoder on a batch of observations with the same number
// of measurements and returns the encoder tokens [B, T, D] (owned by g).
// The input arrays are allocated per call, so the result stays valid until
// g is reset.
func (n *Net) Encode(g *engine.Graph, obs []Observation) (*engine.Tensor, error) {
	designs := make([]family.Design, len(obs))
	xs := make([][]float64, len(obs))
	for i, o := range obs {
		designs[i], xs[i] = o.Design, o.X
	}
	in := new(encInput)
	if err := n.fillEncoder(in, designs, xs); err != nil {
		return nil, fmt.Errorf("network: encode: %w", err)
	}
	return n.encode(g, in), nil
}
