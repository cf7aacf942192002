package quantile

import (
	"math"
	"testing"
)

// TestQuantileDefinition checks type-7 values computed by hand (numpy's
// default: np.quantile([1, 2, 4, 8], [0, .25, .5, .9, 1]) = 1, 1.75, 3,
// 6.8, 8) and the NaN handling.
func TestQuantileDefinition(t *testing.T) {
	x := []float64{8, math.NaN(), 1, 4, 2}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.25, 1.75}, {0.5, 3}, {0.9, 6.8}, {1, 8}} {
		if got := Of(x, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q %v: %v, want %v", c.q, got, c.want)
		}
	}
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 1, 2, 3 = %v", m)
	}
	if !math.IsNaN(Of([]float64{math.NaN()}, 0.5)) || !math.IsNaN(Median(nil)) {
		t.Error("quantile of no value is not NaN")
	}
	if Sorted([]float64{5}, 0.7) != 5 {
		t.Error("quantile of one value")
	}
}
