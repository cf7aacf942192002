package plot

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

func BenchmarkModelBars10(b *testing.B) {
	labels := make([]string, 10)
	v := make([]float64, 10)
	for i := range labels {
		labels[i] = fmt.Sprintf("B+S%d+Z", i)
		v[i] = 1 / float64(i+2)
	}
	for b.Loop() {
		if err := WriteModelBars(io.Discard, labels, []Series{{Values: v}, {Values: v}}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPairPlot6x4000(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	s := make([][]float64, 4000)
	for i := range s {
		s[i] = make([]float64, 6)
		for j := range s[i] {
			s[i][j] = rng.NormFloat64()
		}
	}
	names := []string{"a", "b", "c", "d", "e", "f"}
	for b.Loop() {
		if err := WritePairPlot(io.Discard, names, s, PairOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCalibrationECDF2x1000(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	u, w := make([]float64, 1000), make([]float64, 1000)
	for i := range u {
		u[i], w[i] = rng.Float64(), rng.Float64()
	}
	for b.Loop() {
		if err := WriteCalibrationECDF(io.Discard, []Series{{Values: u}, {Values: w}}, CalibrationOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConfusionMatrix50(b *testing.B) {
	m := make([][]float64, 50)
	for i := range m {
		m[i] = make([]float64, 50)
		m[i][i] = 1
	}
	for b.Loop() {
		if err := WriteConfusionMatrix(io.Discard, m, nil, nil, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSliceMap96x114(b *testing.B) {
	g := Grid{NX: 96, NY: 114, Data: make([]float64, 96*114)}
	for i := range g.Data {
		g.Data[i] = float64(i % 97)
	}
	for b.Loop() {
		if err := WriteSliceMap(io.Discard, g, SliceOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
