package dmrifit

import (
	"context"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/prismsbi/prism/posterior"
)

// TestSelectCorrectInvariance: a corrected model-selection fit
// (--correct smc) of a small scan gives the same Selection, bit for bit,
// at batch sizes 12, 5 and 1 and with one and two workers (every
// voxel's random streams depend on the seed and its position only), and
// its maps are in range.
func TestSelectCorrectInvariance(t *testing.T) {
	net := smallBSZT(t)
	perturb(net, 3)
	post := posterior.New(net)
	scan, err := LoadScan(writeSynthetic(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	const nv = 12
	scan.Voxels = scan.Voxels[:nv]
	scan.Signal = scan.Signal[:nv*scan.Design.N]
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	var ref *Selection
	for i, r := range []struct{ batch, procs int }{{12, 2}, {5, 1}, {1, 2}} {
		runtime.GOMAXPROCS(r.procs)
		set := FitSettings{Lambda: 0.5, Samples: 6, Steps: 2, Solver: "ab2", Seed: 5, BatchSize: r.batch, Correct: "smc", CorrectParticles: 16, CorrectAlways: 1}
		ft, err := NewSelectFitter(post, set)
		if err != nil {
			t.Fatal(err)
		}
		a, err := ft.Fit(context.Background(), scan, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ref = a
			checkCorrected(t, a)
			continue
		}
		if !reflect.DeepEqual(nanFree(a), nanFree(ref)) {
			t.Errorf("batch %d at GOMAXPROCS %d: the selection differs from batch 12 at GOMAXPROCS 2", r.batch, r.procs)
		}
	}
}

// checkCorrected checks the corrected maps of a: the component
// probabilities' bounds, the MAP model's probability and the
// diagnostics' presence.
func checkCorrected(t *testing.T, a *Selection) {
	t.Helper()
	C := a.Components
	for v := range a.N {
		if a.CorrClasses[v] < 1 || a.CorrESS[v] <= 0 || math.IsNaN(float64(a.CorrLogZSE[v])) {
			t.Errorf("voxel %d: %v classes corrected, ESS %v, SE %v", v, a.CorrClasses[v], a.CorrESS[v], a.CorrLogZSE[v])
		}
		for k := range C {
			if p := a.CompProb[v*C+k]; p < 0 || p > 1+1e-5 {
				t.Errorf("voxel %d: P(component %d) = %v", v, k, p)
			}
		}
		if a.MAPProb[v] <= 0 {
			t.Errorf("voxel %d: MAP probability %v", v, a.MAPProb[v])
		}
	}
}

// nanFree returns a copy of a with NaNs replaced by a sentinel, for
// DeepEqual.
func nanFree(a *Selection) Selection {
	b := *a
	fix := func(x []float32) []float32 {
		out := append([]float32(nil), x...)
		for i, v := range out {
			if v != v {
				out[i] = -12345
			}
		}
		return out
	}
	b.CorrLogZSE, b.CorrESS, b.Pred, b.PPRMSE = fix(a.CorrLogZSE), fix(a.CorrESS), fix(a.Pred), fix(a.PPRMSE)
	return b
}
