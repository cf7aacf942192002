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

// TestSelectSampledCorrectMatchesList: the correction of a sampled fit
// (bszt-conv's path) against the listed fit's correction with the same
// network, on bszt with the sampled path forced. At λ 0.1 the prior
// charges ≥ 10 nats per stick, zeppelin or tensor, so every class the
// network gives ≥ 1 % has at most two compartments, and CorrectAlways 2
// makes both candidate sets all those classes: the two fits then correct
// the same masks in the same (bit-code) order — the SMC's streams are
// keyed by the seed, the voxel and the mask, its starts drawn in
// candidate order — so the corrected component, class and MAP
// probabilities must agree to float32 rounding (1e-5), and so must the
// count of classes corrected and the MAP class. Also checked: the class
// expansion gives every relabelling once (classMembers).
func TestSelectSampledCorrectMatchesList(t *testing.T) {
	const nv, lambda = 2, 0.1
	post, scan := perturbedBSZTScan(t, nv)
	set := FitSettings{Lambda: lambda, Samples: 2, Steps: 2, Solver: "ab2", Seed: 11, BatchSize: nv, Correct: "smc", CorrectParticles: 8, CorrectAlways: 2}
	listed, e := selectFit(t, post, scan, set, nil)
	_, s := selectFit(t, post, scan, set, func(ft *SelectFitter) error {
		ft.sampled, ft.Models, ft.masks = true, nil, nil
		return ft.setUpCorrection() // the always-set of a sampled fit
	})
	C, K := e.Components, len(listed.Classes)
	for v := range nv {
		if s.CorrClasses[v] != e.CorrClasses[v] {
			t.Errorf("voxel %d: %v classes corrected, listed fit %v", v, s.CorrClasses[v], e.CorrClasses[v])
		}
		for k := range C {
			if d := math.Abs(float64(s.CompProb[v*C+k] - e.CompProb[v*C+k])); d > 1e-5 {
				t.Errorf("voxel %d, component %d: sampled corrected %v, listed %v", v, k, s.CompProb[v*C+k], e.CompProb[v*C+k])
			}
		}
		for c := range K {
			if d := math.Abs(float64(s.ClassProb[v*K+c] - e.ClassProb[v*K+c])); d > 1e-5 {
				t.Errorf("voxel %d, class %s: sampled corrected %v, listed %v", v, listed.Classes[c].Name, s.ClassProb[v*K+c], e.ClassProb[v*K+c])
			}
		}
		lm := listed.masks[e.MAP[v]]
		sm := make([]bool, C)
		for k := range sm {
			sm[k] = uint32(s.MAP[v])>>k&1 == 1
		}
		if selectClass(sm, listed.groups) != selectClass(lm, listed.groups) || math.Abs(float64(s.MAPProb[v]-e.MAPProb[v])) > 1e-5 {
			t.Errorf("voxel %d: sampled MAP %s (%v), listed %s (%v)", v, family.MaskString(sm), s.MAPProb[v], family.MaskString(lm), e.MAPProb[v])
		}
		t.Logf("voxel %d: %v classes, MAP %s %.3f", v, s.CorrClasses[v], family.MaskString(sm), s.MAPProb[v])
	}
	// classMembers: the class of two sticks and one tensor of bszt has
	// C(3,2)·C(3,1) = 9 masks, all distinct and all of the class.
	m := make([]bool, C)
	g := listed.groups
	m[g[0][0]], m[g[0][1]], m[g[2][0]] = true, true, true
	members := classMembers(m, g)
	seen := map[uint32]bool{}
	for _, x := range members {
		seen[family.MaskCode(x)] = true
		if selectClass(x, g) != selectClass(m, g) {
			t.Errorf("classMembers: %s is not of %s's class", family.MaskString(x), family.MaskString(m))
		}
	}
	if len(members) != 9 || len(seen) != 9 {
		t.Errorf("classMembers: %d masks (%d distinct), want 9", len(members), len(seen))
	}
}

// TestSelectSampledCorrectBSZTConv: the corrected sampled fit of
// bszt-conv end to end (dispersed and convolved compartments in the SMC)
// on two voxels: maps in range, diagnostics present, the noise models'
// corrected probabilities summing to 1, and the MAP mask of positive
// prior probability. The untrained network's draws are nearly uniform,
// so the candidates are the classes the draws hit ≥ 3 times of 256.
func TestSelectSampledCorrectBSZTConv(t *testing.T) {
	f := fdmri.BSZTConv()
	post := posterior.New(smallNet(t, "bszt-conv", f))
	scan, err := LoadScan(writeSynthetic(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	const nv = 2
	scan.Voxels = scan.Voxels[:nv]
	scan.Signal = scan.Signal[:nv*scan.Design.N]
	set := FitSettings{Lambda: 0.3, Samples: 4, Steps: 2, Solver: "ab2", Seed: 3, BatchSize: nv, Correct: "smc", CorrectParticles: 8}
	_, a := selectFit(t, post, scan, set, nil)
	checkCorrected(t, a)
	C := a.Components
	for v := range nv {
		if noise := a.CompProb[v*C+C-2] + a.CompProb[v*C+C-1]; math.Abs(float64(noise)-1) > 1e-5 {
			t.Errorf("voxel %d: the noise models' corrected probabilities sum to %v, want 1", v, noise)
		}
		m := make([]bool, C)
		family.MaskFromCode(uint32(a.MAP[v]), m)
		if math.IsInf(f.MaskPrior().LogProb(m, set.Lambda), -1) {
			t.Errorf("voxel %d: MAP mask %s outside the prior's support", v, family.MaskString(m))
		}
		t.Logf("voxel %d: %v classes corrected, MAP %s (%.3f)", v, a.CorrClasses[v], family.MaskString(m), a.MAPProb[v])
	}
}

// selectFit fits scan with a SelectFitter of post and set, changed by
// prep (nil: none) before the fit.
func selectFit(t *testing.T, post *posterior.Posterior, scan *Scan, set FitSettings, prep func(*SelectFitter) error) (*SelectFitter, *Selection) {
	t.Helper()
	ft, err := NewSelectFitter(post, set)
	if err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		if err := prep(ft); err != nil {
			t.Fatal(err)
		}
	}
	a, err := ft.Fit(context.Background(), scan, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ft, a
}
