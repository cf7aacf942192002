package network

import (
	"fmt"
	"math"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// diffusionEmbedder reads diffusion MRI observations
// (family.ObservationDiffusion): one token per measurement, from its
// b-value (Fourier-embedded), gradient direction and signal.
type diffusionEmbedder struct {
	c       DiffusionEncoderConfig
	fourier *engine.Tensor // [⌈BEmbed/2⌉, 1]
	w, b    *engine.Tensor // input map [BEmbed + features, D], [D]
}

func newDiffusionEmbedder(c Config, _ family.Family, d0 family.Design) (embedder, error) {
	if d0.CovDim != 4 {
		return nil, fmt.Errorf("diffusion observations have four covariates per value (b, gx, gy, gz), the design has %d", d0.CovDim)
	}
	if !(c.Diffusion.MaxB > 0) || c.Diffusion.BEmbed <= 0 {
		return nil, fmt.Errorf("diffusion.max_b %v and diffusion.b_embed %d must be positive", c.Diffusion.MaxB, c.Diffusion.BEmbed)
	}
	if c.Grid.Linear {
		return nil, fmt.Errorf("grid.linear is for grid observations, not diffusion MRI")
	}
	return &diffusionEmbedder{c: c.Diffusion}, nil
}

// build creates fourier, in.w and in.b (the order of the parameter store).
func (e *diffusionEmbedder) build(s engine.Scope, d int) {
	e.fourier = s.New("fourier", engine.Normal(1), (e.c.BEmbed+1)/2, 1)
	e.w = s.New("in.w", engine.VarianceScaling(1), e.c.BEmbed+dmriFeatures(e.c), d)
	e.b = s.New("in.b", engine.Zeros, d)
}

func (e *diffusionEmbedder) tokens(m int) (int, error) { return m, nil }

// gRepeat is how often each b-vector component is repeated in a token (4
// for BEmbed 12).
func gRepeat(c DiffusionEncoderConfig) int { return (c.BEmbed + 2) / 3 }

// dmriFeatures is the width of a token's input besides the Fourier
// embedding of b̃: the squashed signal repeated BEmbed times and the
// b-vector with each component repeated gRepeat times.
func dmriFeatures(c DiffusionEncoderConfig) int {
	w := c.BEmbed + 3*gRepeat(c)
	if c.TensorFeatures {
		w += 2 * tensorFeatures
	}
	return w
}

// tensorFeatures is the number of unique entries of a symmetric 3×3
// matrix, the width of each of the two optional tensor blocks of a token
// (DiffusionEncoderConfig.TensorFeatures).
const tensorFeatures = 6

func (e *diffusionEmbedder) fill(in *encInput, designs []family.Design, xs [][]float64) {
	m, f := in.T, dmriFeatures(e.c)
	in.Feat = resize(in.Feat, in.B*m*f)
	in.BTild = resize(in.BTild, in.B*m)
	for i, x := range xs {
		dmriTokens(e.c, designs[i], x, in.BTild[i*m:(i+1)*m], in.Feat[i*m*f:(i+1)*m*f])
	}
}

func (e *diffusionEmbedder) embed(g *engine.Graph, in *encInput) *engine.Tensor {
	bt := g.Input(in.BTild, in.B, in.T, 1)
	feat := g.Input(in.Feat, in.B, in.T, dmriFeatures(e.c))
	x := g.Concat(-1, g.FourierFeatures(bt, e.fourier, e.c.BEmbed), feat)
	return g.Linear(x, e.w, e.b)
}

// dmriTokens writes the per-measurement inputs of one dMRI observation:
// b̃ = 2·clip(b, 0, MaxB)/MaxB − 1 into bt, and into feat ([N,
// dmriFeatures]) the soft-squashed signal sigmoid((s − 0.5)/0.5) repeated
// BEmbed times followed by gx, gy, gz each repeated gRepeat times
// (the reference implementation's token). With TensorFeatures the row continues with
// (gx², gy², gz², √2 gx gy, √2 gx gz, √2 gy gz) and the same six values
// times the signal clipped to [0, 1.5] (all zero for b < 1 s/mm², where the
// b-vector carries no direction).
func dmriTokens(c DiffusionEncoderConfig, d family.Design, s []float64, bt, feat []float32) {
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
