package network

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/engine"
	"github.com/prismsbi/prism/family"
)

// TestGridLinearInputs checks the GridLinear encoder input: every token
// row holds gridTokens' features and the token's raw values in its own
// position block and zeros elsewhere, so a projection W with w_j on the raw
// value of grid point j (and zero elsewhere) summed over tokens gives
// Σ_j w_j y_j exactly (here against a float64 sum, to float32 rounding of
// inputs and weights: relative 1e-5).
func TestGridLinearInputs(t *testing.T) {
	n := newNet(t, "lingauss-k6", func(f family.Family) Config {
		c := tinyConfig(f)
		c.Grid.Linear = true
		return c
	}, 1)
	e := n.emb.(*gridEmbedder)
	p, tw, w := n.cfg.Grid.PointsPerToken, e.tokenWidth(), e.inputWidth()
	if tw != 3*p+2 || w != e.maxObs*tw {
		t.Fatalf("widths: token %d, row %d", tw, w)
	}
	r := rand.New(rand.NewPCG(3, 4))
	y := make([]float64, 100)
	for i := range y {
		y[i] = 2 * r.NormFloat64()
	}
	d := family.Design{N: len(y), CovDim: 1, Cov: make([]float64, len(y))}
	in := new(encInput)
	if err := n.fillEncoder(in, []family.Design{d}, [][]float64{y}); err != nil {
		t.Fatal(err)
	}
	tok := make([]float32, in.T*gridFeatures(p))
	gridTokens(y, p, tok)
	f0 := gridFeatures(p)
	weights := make([]float64, len(y))
	for i := range weights {
		weights[i] = r.NormFloat64()
	}
	var got, want, scale float64
	for tt := range in.T {
		row := in.Feat[tt*w : (tt+1)*w]
		for k, v := range row {
			blk, off := k/tw, k%tw
			switch {
			case blk != tt:
				if v != 0 {
					t.Fatalf("token %d: non-zero %v in block %d", tt, v, blk)
				}
			case off < f0:
				if v != tok[tt*f0+off] {
					t.Fatalf("token %d feature %d: %v, want %v", tt, off, v, tok[tt*f0+off])
				}
			default:
				j := tt*p + off - f0
				if v != float32(y[j]) {
					t.Fatalf("token %d raw value %d: %v, want %v", tt, j, v, y[j])
				}
				got += float64(float32(weights[j])) * float64(v)
				want += weights[j] * y[j]
				scale += math.Abs(weights[j] * y[j])
			}
		}
	}
	if math.Abs(got-want) > 1e-5*scale {
		t.Errorf("Σ w·y through the blocks %v, want %v", got, want)
	}

	// The network runs on these inputs, and refuses the option for dMRI.
	g := engine.NewInferenceGraph()
	enc, err := n.Encode(g, []Observation{{Design: d, X: y}})
	if err != nil {
		t.Fatal(err)
	}
	if s := enc.Shape; s[1] != in.T || s[2] != n.cfg.ModelDim {
		t.Errorf("encoder output shape %v", s)
	}
	f := lookup(t, "b3s")
	c := tinyConfig(f)
	c.Grid.Linear = true
	if _, err := New(f, c, 1); err == nil {
		t.Error("grid_linear accepted for b3s")
	}
}
