package posterior_test

import (
	"strings"
	"testing"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/internal/benchcpu"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/posterior"
)

// BenchmarkShippedB3S runs issue 5's speed goal on the shipped b3s network
// (models/b3s.safetensors: D = 64, parameter decoder of 3 layers): 1000 θ
// samples for one UKB-like observation with 32 AB2 steps, under the full
// model (ball + 3 sticks, every latent active: the slowest mask) and under
// one stick (3 of the 7 parameter tokens active). Goal: ≤ 1 s.
//
//	go test -run '^$' -bench ShippedB3S -benchtime 5x ./posterior
func BenchmarkShippedB3S(b *testing.B) {
	p, err := models.Open("b3s")
	if err != nil {
		b.Fatal(err)
	}
	f, err := family.Lookup("b3s")
	if err != nil {
		b.Fatal(err)
	}
	s := make([]family.Sample, 1)
	ukb, err := f.Designs("ukb")
	if err != nil {
		b.Fatal(err)
	}
	family.SimulateBatch(f, family.SimOptions{Seed: 3, Lambda: 0.5, Designs: ukb}, 0, s)
	obs := []posterior.Observation{{Design: s[0].Design, X: s[0].X}}
	// full: every base component and the first noise model; one-stick:
	// the ball, the first stick and the first noise model.
	comps := f.Components()
	full := make([]bool, len(comps))
	one := make([]bool, len(comps))
	noise, stick := false, false
	for i, c := range comps {
		switch {
		case c.Kind != family.Base:
			if !noise {
				full[i], one[i], noise = true, true, true
			}
		case strings.Contains(c.Name, "Stick"):
			full[i] = true
			if !stick {
				one[i], stick = true, true
			}
		default:
			full[i], one[i] = true, true
		}
	}
	for _, tc := range []struct {
		name string
		mask []bool
	}{{"full", full}, {"one-stick", one}} {
		b.Run(tc.name, func(b *testing.B) {
			rows := [][][]bool{posterior.Repeat(tc.mask, 1000)}
			so := posterior.SampleOptions{Options: posterior.Options{Seed: 1}, Steps: 32}
			run := func() {
				if _, err := p.SampleTheta(obs, rows, so); err != nil {
					b.Fatal(err)
				}
			}
			benchcpu.Loop(b, run)
		})
	}
}
