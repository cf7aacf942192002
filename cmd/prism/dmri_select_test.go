package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/posterior"
)

const tinyBSZTYAML = `family: bszt
seed: 3
batch_size: 8
steps: 3
checkpoint_every: 3
log_every: 1
validation: {size: 16, every: 3}
designs: [hcp-mix]
network:
  model_dim: 16
  heads: 2
  head_dim: 8
  mlp_width: 2
  encoder_layers: 1
  mask_layers: 1
  param_layers: 1
  mask_decoder: categorical
  lambda_nodes: 4
`

// tinyBSZT trains a tiny bszt network with the categorical decoder for
// three steps and returns its checkpoint folder.
func tinyBSZT(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tiny-bszt.yaml")
	if err := os.WriteFile(cfg, []byte(tinyBSZTYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "ckpt")
	if code, _, errs := prism("train", "--config", cfg, "--out", ck, "--quiet"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	return ck
}

// TestDMRIFitSelection runs `prism dmri fit` with a bszt network on a
// cropped real scan and checks the model-selection maps against a direct
// computation from the network's q(M | x, λ) (posterior.LogProbMasks):
// comp_prob and class_prob are sums of ≤ 2,048 float32 probabilities,
// so they must agree to 1e−4; the MAP model's components are at least as
// probable as the model; the noise class probabilities add up to 1 (every
// model has exactly one noise); pp_rmse is the RMSE of pred_signal against
// the normalised data; and another batch size gives identical images.
//
// It runs twice: with the tiny network trained in the test, and with the
// shipped bszt-brain network (`--model bszt-brain`), so that the embedded
// weights are checked end to end through the CLI.
func TestDMRIFitSelection(t *testing.T) {
	t.Run("tiny", func(t *testing.T) {
		ck := tinyBSZT(t)
		checkSelectionFit(t, []string{"--checkpoint", ck}, func() (*posterior.Posterior, error) { return posterior.LoadCheckpoint(ck, true) })
	})
	t.Run("shipped", func(t *testing.T) {
		checkSelectionFit(t, []string{"--model", "bszt-brain"}, func() (*posterior.Posterior, error) { return models.Open("bszt-brain") })
	})
}

// checkSelectionFit is TestDMRIFitSelection for one network, given by its
// command-line flags and a loader of the same network.
func checkSelectionFit(t *testing.T, net []string, load func() (*posterior.Posterior, error)) {
	dir := t.TempDir()
	flags, ref := cropSlab(t, dir)
	out := filepath.Join(dir, "fit")
	common := append(append(append([]string{"dmri", "fit"}, flags...), net...), "--samples", "4", "--steps", "3", "--quiet")
	if code, _, errs := prism(append(common, "--out", out, "--batch", "5")...); code != 0 {
		t.Fatalf("dmri fit: exit %d: %s", code, errs)
	}
	var side dmrifit.SelectionSidecar
	b, err := os.ReadFile(filepath.Join(out, "selection.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, c := range side.Classes {
		classes = append(classes, c.Name)
	}
	if want := []string{"Ball", "Stick", "Zeppelin", "Tensor", "GaussianNoise", "RicianNoise"}; !slices.Equal(classes, want) {
		t.Fatalf("classes %v, want %v", classes, want)
	}
	if len(side.Models) != 2048 || len(side.Components) != 12 || len(side.Sticks) != 3 {
		t.Fatalf("%d models, %d components, %d BedpostX sticks; want 2048, 12, 3", len(side.Models), len(side.Components), len(side.Sticks))
	}

	scan, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: flags[1], Bval: flags[3], Bvec: flags[5], Mask: flags[7]})
	if err != nil {
		t.Fatal(err)
	}
	post, err := load()
	if err != nil {
		t.Fatal(err)
	}
	var masks [][]bool
	for _, m := range side.Models {
		masks = append(masks, m.Mask)
	}
	N := scan.Design.N
	obs := make([]posterior.Observation, len(scan.Voxels))
	for v := range obs {
		obs[v] = posterior.Observation{Design: scan.Design, X: scan.Signal[v*N : (v+1)*N]}
	}
	lq, err := post.LogProbMasks(obs, 0.3, [][][]bool{masks}, posterior.Options{})
	if err != nil {
		t.Fatal(err)
	}
	comp, class := readOut(t, out, "comp_prob"), readOut(t, out, "class_prob")
	mapm, mapp := readOut(t, out, "map_model"), readOut(t, out, "map_prob")
	pred, rmse := readOut(t, out, "pred_signal"), readOut(t, out, "pp_rmse")
	if _, _, _, nt := pred.Shape(); nt != N {
		t.Fatalf("pred_signal has %d volumes, the scan %d", nt, N)
	}
	if pred.Dim[1] != ref.Dim[1] || pred.Srow != ref.Srow {
		t.Errorf("pred_signal geometry %v %v, input %v %v", pred.Dim[1:4], pred.Srow, ref.Dim[1:4], ref.Srow)
	}
	nv := int(ref.Dim[1] * ref.Dim[2] * ref.Dim[3])
	for v, i := range scan.Voxels {
		mx := math.Inf(-1)
		for _, l := range lq[v] {
			mx = math.Max(mx, l)
		}
		var z float64
		p := make([]float64, len(lq[v]))
		for m, l := range lq[v] {
			p[m] = math.Exp(l - mx)
			z += p[m]
		}
		wantComp := make([]float64, 12)
		wantClass := make([]float64, len(side.Classes))
		best := 0
		for m := range p {
			p[m] /= z
			if p[m] > p[best] {
				best = m
			}
			for k, on := range masks[m] {
				if on {
					wantComp[k] += p[m]
				}
			}
			for c, cl := range side.Classes {
				for _, k := range cl.Components {
					if masks[m][k] {
						wantClass[c] += p[m]
						break
					}
				}
			}
		}
		for k := range 12 {
			if got := float64(comp.Data[i+k*nv]); math.Abs(got-wantComp[k]) > 1e-4 {
				t.Errorf("voxel %d: comp_prob[%s] = %v, direct %v", i, side.Components[k], got, wantComp[k])
			}
		}
		for c := range side.Classes {
			if got := float64(class.Data[i+c*nv]); math.Abs(got-wantClass[c]) > 1e-4 {
				t.Errorf("voxel %d: class_prob[%s] = %v, direct %v", i, side.Classes[c].Name, got, wantClass[c])
			}
		}
		if noise := class.Data[i+4*nv] + class.Data[i+5*nv]; math.Abs(float64(noise)-1) > 1e-4 {
			t.Errorf("voxel %d: P(Gaussian) + P(Rician) = %v, want 1", i, noise)
		}
		idx := int(mapm.Data[i]) - 1
		if idx < 0 || idx >= len(masks) || math.Abs(float64(mapp.Data[i])-p[idx]) > 1e-5 || p[idx] < p[best]-1e-6 {
			t.Errorf("voxel %d: map_model %d (q %v), direct MAP %d (q %v)", i, idx+1, mapp.Data[i], best+1, p[best])
			continue
		}
		for k, on := range masks[idx] {
			if on && comp.Data[i+k*nv] < mapp.Data[i]-1e-6 {
				t.Errorf("voxel %d: P(%s) = %v below its MAP model's q %v", i, side.Components[k], comp.Data[i+k*nv], mapp.Data[i])
			}
		}
		var ss float64
		for j := range N {
			d := float64(pred.Data[i+j*nv]) - scan.Signal[v*N+j]
			ss += d * d
		}
		if got, want := float64(rmse.Data[i]), math.Sqrt(ss/float64(N)); math.Abs(got-want) > 1e-5*math.Max(1, want) {
			t.Errorf("voxel %d: pp_rmse %v, from pred_signal %v", i, got, want)
		}
	}
	// Outside the mask everything is zero.
	for i := range nv {
		if !scan.Mask[i] && (comp.Data[i] != 0 || mapm.Data[i] != 0) {
			t.Errorf("voxel %d outside the mask has comp_prob %v, map_model %v", i, comp.Data[i], mapm.Data[i])
		}
	}

	out2 := filepath.Join(dir, "fit2")
	if code, _, errs := prism(append(common, "--out", out2, "--batch", "7")...); code != 0 {
		t.Fatalf("dmri fit --batch 7: exit %d: %s", code, errs)
	}
	for _, n := range []string{"comp_prob", "pred_signal", "merged_f1samples", "dyads1"} {
		a, b := readOut(t, out, n), readOut(t, out2, n)
		md := 0.0
		for i := range a.Data {
			md = math.Max(md, math.Abs(float64(a.Data[i]-b.Data[i])))
		}
		// Bit for bit, shipped network included: every forward product
		// (bszt's 2,048-wide categorical head too) computes a voxel's row
		// with the same arithmetic whatever the batch
		// (kernels.TestSgemmRowsIndependentOfM).
		if !slices.Equal(a.Data, b.Data) {
			t.Errorf("%s differs between --batch 5 and 7 (max %g)", n, md)
		}
	}
	// A second run into the same folder needs --fresh.
	if code, _, _ := prism(append(common, "--out", out)...); code == 0 {
		t.Error("a second fit into a folder with maps succeeded without --fresh")
	}
}
