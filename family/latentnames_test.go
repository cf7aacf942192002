package family

import (
	"slices"
	"testing"
)

// TestLatentNames checks every naming rule on a layout with fractions,
// a shared parameter and the three kinds of component block.
func TestLatentNames(t *testing.T) {
	comps := []Component{
		{Name: "Ball", Latent: 1, Params: []Param{{Name: "d"}}},
		{Name: "Stick", Latent: 2},
		{Name: "Zeppelin", Latent: 1},
		{Name: "Noise", Kind: Noise, Latent: 2, Params: []Param{{Name: "sigma"}, {Name: "nu"}}},
	}
	l := NewLayout(comps, []int{0, 1, 2}, []float64{1, 1, 1}, []Param{{Name: "d_shared"}})
	want := []string{
		"fraction Ball", "fraction Stick", // two stick-breaking latents for three simplex components
		"d_shared",
		"Ball.d", "Stick[0]", "Stick[1]", "Zeppelin", "Noise.sigma", "Noise.nu",
	}
	if got := l.LatentNames(comps); !slices.Equal(got, want) {
		t.Errorf("LatentNames:\n got %q\nwant %q", got, want)
	}
}
