package view

import (
	"testing"

	"github.com/prismsbi/prism/internal/cputime"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/obsfile"
)

// BenchmarkGridUpdate is one λ-slider update of the symbolic-k15 explorer
// on the bundled example with the default settings (`prism view
// --example`): the exact model posterior over the candidates, the
// inclusion probabilities and the model-averaged predictive band.
func BenchmarkGridUpdate(b *testing.B) {
	p, err := models.Open("symbolic-k15")
	if err != nil {
		b.Fatal(err)
	}
	obs, truth, err := obsfile.BundledExample(p.Family())
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGrid(p, obs, truth, nil, "example", DefaultGridSettings())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d candidates", len(g.Candidates()))
	lam := 0.0
	cpu := cpuSeconds(b)
	for b.Loop() {
		lam += 0.137
		if lam > 1 {
			lam -= 1
		}
		if _, err := g.Update(lam, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds(b)-cpu)/float64(b.N), "cpu-s/op")
}

// cpuSeconds is the process CPU time (both cores), which depends much
// less on the machine's load than wall time.
func cpuSeconds(b *testing.B) float64 {
	s, ok := cputime.Seconds()
	if !ok {
		b.Skip("no process CPU time on this platform")
	}
	return s
}
