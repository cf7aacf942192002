package dmrifit

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prismsbi/prism/family"
	fdmri "github.com/prismsbi/prism/family/dmri"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/posterior"
)

// TestSelectSampledMatchesList: the sampled model-selection fit (used
// for families whose models are too many to list) against the exact
// fit over bszt's listed 2,046 models with the same network: every
// component and class probability is a frequency over ModelDraws = 256
// draws of q(M | x, λ), so it must be within 4 binomial standard errors,
// 4·√(p(1−p)/256), of the exact marginal — at least 4 draws' worth, 4/256,
// where p is near 0 or 1 and the normal approximation fails — plus 2e−3
// for float32 sums;
// the MAP model's probability is its exact q (to float32 precision) and
// at most the exact MAP's; the q mass of the distinct draws is ≤ 1.
func TestSelectSampledMatchesList(t *testing.T) {
	const nv, lambda = 3, 0.6
	post, scan := perturbedBSZTScan(t, nv)
	set := FitSettings{Lambda: lambda, Samples: 4, Steps: 2, Solver: "ab2", Seed: 7, BatchSize: nv}
	exact, err := NewSelectFitter(post, set)
	if err != nil {
		t.Fatal(err)
	}
	e, err := exact.Fit(context.Background(), scan, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sampled, err := NewSelectFitter(post, set)
	if err != nil {
		t.Fatal(err)
	}
	sampled.sampled, sampled.Models, sampled.masks = true, nil, nil
	s, err := sampled.Fit(context.Background(), scan, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, v int, got, want float32) {
		p := float64(want)
		if tol := max(4*math.Sqrt(p*(1-p)/ModelDraws), 4.0/ModelDraws) + 2e-3; math.Abs(float64(got-want)) > tol {
			t.Errorf("voxel %d, %s: sampled %v, exact %v (tolerance %.3f)", v, what, got, want, tol)
		}
	}
	C, K, N := e.Components, len(exact.Classes), scan.Design.N
	obs := make([]posterior.Observation, nv)
	for v := range obs {
		obs[v] = posterior.Observation{Design: scan.Design, X: scan.Signal[v*N : (v+1)*N]}
	}
	lq, err := post.LogProbMasks(obs, lambda, [][][]bool{exact.masks}, posterior.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for v := range nv {
		for k := range C {
			near("component "+post.Family().Components()[k].Name, v, s.CompProb[v*C+k], e.CompProb[v*C+k])
		}
		for c := range K {
			near("class "+exact.Classes[c].Name, v, s.ClassProb[v*K+c], e.ClassProb[v*K+c])
		}
		var qMAP float64
		for m, mk := range exact.masks {
			if int32(family.MaskCode(mk)) == s.MAP[v] {
				qMAP = math.Exp(lq[v][m])
			}
		}
		if math.Abs(float64(s.MAPProb[v])-qMAP) > 1e-5 || s.MAPProb[v] > e.MAPProb[v]+1e-6 {
			t.Errorf("voxel %d: sampled MAP probability %v, its exact q %v, exact MAP's %v", v, s.MAPProb[v], qMAP, e.MAPProb[v])
		}
		if !(s.ModelMass[v] > 0 && s.ModelMass[v] <= 1+1e-5) {
			t.Errorf("voxel %d: q mass of the distinct draws %v", v, s.ModelMass[v])
		}
	}
}

// TestSelectSampledBSZTConv: a model-selection fit of bszt-conv (21
// components, 2^21 masks, autoregressive decoder) is sampled: its maps
// are probabilities, exactly one noise model is on in every draw (the
// prior's support), the fit does not depend on the batch size, and the
// written map_model indexes selection.json's models, which are the
// voxels' MAP masks.
func TestSelectSampledBSZTConv(t *testing.T) {
	net := smallNet(t, "bszt-conv", fdmri.BSZTConv())
	perturb(net, 5)
	post := posterior.New(net)
	dir := t.TempDir()
	scan, err := LoadScan(writeSynthetic(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	const nv = 4
	scan.Voxels = scan.Voxels[:nv]
	scan.Signal = scan.Signal[:nv*scan.Design.N]
	var ref *Selection
	var ft *SelectFitter
	for _, batch := range []int{nv, 1} {
		set := FitSettings{Lambda: 0.3, Samples: 4, Steps: 2, Solver: "ab2", Seed: 3, BatchSize: batch}
		if ft, err = NewSelectFitter(post, set); err != nil {
			t.Fatal(err)
		}
		if !ft.sampled {
			t.Fatal("bszt-conv's selection fit is not sampled")
		}
		a, err := ft.Fit(context.Background(), scan, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = a
			continue
		}
		if !reflect.DeepEqual(nanFree(a), nanFree(ref)) {
			t.Errorf("batch %d: the sampled selection differs from batch %d", batch, nv)
		}
	}
	C := ref.Components
	for v := range nv {
		for k := range C {
			if p := ref.CompProb[v*C+k]; p < 0 || p > 1+1e-5 {
				t.Errorf("voxel %d: P(component %d) = %v", v, k, p)
			}
		}
		if noise := ref.CompProb[v*C+C-2] + ref.CompProb[v*C+C-1]; math.Abs(float64(noise)-1) > 1e-5 {
			t.Errorf("voxel %d: the noise models' probabilities sum to %v, want 1", v, noise)
		}
		if !(ref.MAPProb[v] > 0 && ref.MAPProb[v] <= ref.ModelMass[v]+1e-6 && ref.ModelMass[v] <= 1+1e-5) {
			t.Errorf("voxel %d: MAP probability %v, mass of the draws %v", v, ref.MAPProb[v], ref.ModelMass[v])
		}
	}
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ft.WriteSelection(out, scan, ref); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "selection.json"))
	if err != nil {
		t.Fatal(err)
	}
	var side SelectionSidecar
	if err := json.Unmarshal(raw, &side); err != nil {
		t.Fatal(err)
	}
	if side.ModelDraws != ModelDraws || len(side.Models) == 0 || len(side.Models) > nv {
		t.Fatalf("selection.json: %d draws, %d models for %d voxels", side.ModelDraws, len(side.Models), nv)
	}
	mm, err := nifti.Read(filepath.Join(out, "map_model"+OutputExt))
	if err != nil {
		t.Fatal(err)
	}
	for v, i := range scan.Voxels {
		idx := int(mm.Data[i])
		if idx < 1 || idx > len(side.Models) || int32(family.MaskCode(side.Models[idx-1].Mask)) != ref.MAP[v] {
			t.Errorf("voxel %d: map_model %d does not name its MAP mask %b", v, idx, ref.MAP[v])
		}
	}
}
