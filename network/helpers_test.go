package network

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/engine"

	"github.com/prismsbi/prism/family"
	_ "github.com/prismsbi/prism/family/dmri"
	_ "github.com/prismsbi/prism/family/lingauss"
	_ "github.com/prismsbi/prism/family/symbolic"
)

// tinyConfig is a network small enough for fast tests.
func tinyConfig(f family.Family) Config {
	c := DefaultConfig(f)
	c.ModelDim, c.Heads, c.HeadDim, c.MLPWidth = 16, 2, 8, 2
	c.EncoderLayers, c.MaskLayers, c.ParamLayers = 1, 2, 2
	c.LambdaEmbed, c.NoiseEmbed, c.Diffusion.BEmbed = 8, 8, 6
	return c
}

func lookup(t testing.TB, name string) family.Family {
	t.Helper()
	f, err := family.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newNet(t testing.TB, name string, cfg func(family.Family) Config, seed uint64) *Net {
	t.Helper()
	f := lookup(t, name)
	n, err := New(f, cfg(f), seed)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// simulate draws b samples of stream seed with λ ~ U(0, 1).
func simulate(f family.Family, seed uint64, start uint64, b int) []family.Sample {
	s := make([]family.Sample, b)
	family.SimulateBatch(f, family.SimOptions{Seed: seed, Lambda: math.NaN()}, start, s)
	return s
}

// families lists every registered family: the tokenizer tests run on all
// of them.
var families = family.Names()

// perturbParams adds N(0, std²) noise to every parameter, so that the
// zero-initialised decoders and AdaLN layers take part in the tests.
func perturbParams(n *Net, std float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for _, p := range n.Params().All() {
		for i := range p.Data {
			p.Data[i] += float32(std * r.NormFloat64())
		}
	}
}

// encodeSamples encodes the observations of samples on g.
func encodeSamples(t testing.TB, n *Net, g *engine.Graph, s []family.Sample) *engine.Tensor {
	t.Helper()
	obs := make([]Observation, len(s))
	for i := range s {
		obs[i] = Observation{Design: s[i].Design, X: s[i].X}
	}
	enc, err := n.Encode(g, obs)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}
