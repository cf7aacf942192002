package view

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/models"
	"github.com/prismsbi/prism/posterior"
)

const slab = "../../shared/data/dmri/mrtrix3-msmt-slab/"

// slabScan loads the shared multi-shell slab (15×15×11, 2218 mask
// voxels) and the shipped b3s network.
func slabScan(t *testing.T) (*dmrifit.Scan, *posterior.Posterior) {
	t.Helper()
	if _, err := os.Stat(slab + "dwi.nii.gz"); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
	s, err := dmrifit.LoadScan(dmrifit.ScanFiles{DWI: slab + "dwi.nii.gz", Bval: slab + "dwi.bval", Bvec: slab + "dwi.bvec", Mask: slab + "mask.nii.gz"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := models.Open("b3s")
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func testDMRISettings() DMRISettings {
	return DMRISettings{Lambda: 0.3, VoxelSamples: 6, Steps: 4, Solver: "ab2", Seed: 5}
}

// TestDMRIRefit: the start-up fit covers exactly the fitted voxels of the
// three middle slices, and equals dmrifit.Fitter's model posterior of the
// whole scan (the model_prob of `prism dmri fit`) for them; a refit at
// another λ changes them and only the slices asked for.
func TestDMRIRefit(t *testing.T) {
	s, p := slabScan(t)
	d, err := NewDMRI(s, p, "", "model:b3s", testDMRISettings())
	if err != nil {
		t.Fatal(err)
	}
	check := func(lambda float64, at [3]int, axes []int) {
		t.Helper()
		ft, err := d.fitter(lambda)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := ft.ModelPosterior(s, 0, len(s.Voxels))
		if err != nil {
			t.Fatal(err)
		}
		M := len(d.models)
		fitted := 0
		for v, i := range s.Voxels {
			c := d.coords(i)
			in := false
			for _, a := range axes {
				in = in || c[a] == at[a]
			}
			if !in {
				continue
			}
			fitted++
			if d.lambda[i] != float32(lambda) {
				t.Fatalf("voxel %v: λ %v, want %v", c, d.lambda[i], lambda)
			}
			for m := range M {
				// The same network on the same signal in another batch:
				// float32 sums may associate differently.
				if got := d.prob[i*M+m]; math.Abs(float64(got-want[v*M+m])) > 1e-5 {
					t.Fatalf("voxel %v model %d: %v, whole-scan fit %v", c, m, got, want[v*M+m])
				}
			}
		}
		if fitted == 0 {
			t.Fatal("no voxel in the slices")
		}
	}
	mid := [3]int{s.Nx / 2, s.Ny / 2, s.Nz / 2}
	check(0.3, mid, []int{Sagittal, Coronal, Axial})
	// Voxels outside the three planes are not fitted yet.
	for _, i := range s.Voxels {
		if c := d.coords(i); c[0] != mid[0] && c[1] != mid[1] && c[2] != mid[2] && !math.IsNaN(float64(d.lambda[i])) {
			t.Fatalf("voxel %v fitted at start", c)
		}
	}
	res, err := d.Refit(0.8, 3, 4, 5, []int{Axial})
	if err != nil {
		t.Fatal(err)
	}
	if res.Voxels == 0 || res.Lambda != 0.8 {
		t.Fatalf("refit %+v", res)
	}
	check(0.8, [3]int{3, 4, 5}, []int{Axial})
	// Slices already at this λ are not recomputed.
	if again, err := d.Refit(0.8, 3, 4, 5, []int{Axial}); err != nil || again.Voxels != 0 {
		t.Errorf("second refit of the same slice at the same λ: %+v %v", again, err)
	}
	if _, err := d.Refit(0.5, 99, 0, 0, []int{Axial}); err == nil {
		t.Error("refit outside the grid accepted")
	}
	if _, err := d.Refit(1, 1, 1, 1, []int{Axial}); err == nil {
		t.Error("refit at λ = 1 accepted (dmri fit wants 0 < λ < 1)")
	}
}

// TestDMRIVoxel: a clicked voxel's posterior is that voxel's part of a
// multi-voxel FitBatch with the same settings (the fit is batch
// independent), its directions are unit vectors, and non-mask voxels are
// refused.
func TestDMRIVoxel(t *testing.T) {
	s, p := slabScan(t)
	d, err := NewDMRI(s, p, "", "model:b3s", testDMRISettings())
	if err != nil {
		t.Fatal(err)
	}
	const v = 1000
	c := d.coords(s.Voxels[v])
	got, err := d.Voxel(0.4, c[0], c[1], c[2])
	if err != nil {
		t.Fatal(err)
	}
	ft, err := d.fitter(0.4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ft.FitBatch(s, v-3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, m := range got.Models {
		sum += m.Prob
		idx := -1
		for k, mod := range d.models {
			if mod.Name == m.Name {
				idx = k
			}
		}
		// Same network and signal in another batch (float32 sums).
		if want := float64(b.ModelProb[3*b.Models+idx]); math.Abs(m.Prob-want) > 1e-5 {
			t.Errorf("model %s: %v, batch fit %v", m.Name, m.Prob, want)
		}
	}
	if math.Abs(sum-1) > 1e-5 {
		t.Errorf("model probabilities sum to %v", sum)
	}
	active := 0
	for st := range b.Sticks {
		for j := range b.Samples {
			if b.Active[st][3*b.Samples+j] {
				active++
			}
		}
	}
	if len(got.Directions) != active || got.Samples != testDMRISettings().VoxelSamples {
		t.Errorf("%d directions from %d samples, the batch fit has %d active sticks", len(got.Directions), got.Samples, active)
	}
	for _, dir := range got.Directions {
		n := math.Hypot(math.Hypot(dir.Dir[0], dir.Dir[1]), dir.Dir[2])
		if math.Abs(n-1) > 1e-6 || !(dir.F > 0 && dir.F < 1) {
			t.Errorf("direction %+v: norm %v", dir, n)
		}
	}
	for _, at := range [][3]int{{-1, 0, 0}, {0, 0, 99}} {
		if _, err := d.Voxel(0.4, at[0], at[1], at[2]); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("voxel %v: %v", at, err)
		}
	}
	for i, pos := range d.pos {
		if pos < 0 {
			c := d.coords(i)
			if _, err := d.Voxel(0.4, c[0], c[1], c[2]); err == nil || !strings.Contains(err.Error(), "not a fitted voxel") {
				t.Errorf("non-mask voxel %v: %v", c, err)
			}
			break
		}
	}
}

// TestDMRIFolder: the model maps of a `prism dmri fit` folder are shown
// as written, voxels outside its fit stay unfitted, and a folder of
// another family is refused.
func TestDMRIFolder(t *testing.T) {
	s, p := slabScan(t)
	set := dmrifit.FitSettings{Lambda: 0.6, Samples: 2, Steps: 2, Solver: "ab2", Seed: 1, BatchSize: 64}
	ft, err := dmrifit.NewFitter(p, set)
	if err != nil {
		t.Fatal(err)
	}
	// Fit the first 150 voxels only (a slab of a fit).
	sub := *s
	sub.Voxels = s.Voxels[:150]
	sub.Signal = s.Signal[:150*s.Design.N]
	sub.Mask = make([]bool, len(s.Mask))
	for _, i := range sub.Voxels {
		sub.Mask[i] = true
	}
	b, err := ft.Fit(t.Context(), &sub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ft.WriteFit(dir, &sub, b); err != nil {
		t.Fatal(err)
	}
	// The folder's own settings, as `prism view --dmri` reads them.
	vs := DMRISettings{Lambda: 0.3, VoxelSamples: set.Samples, Steps: set.Steps, Solver: set.Solver, Seed: set.Seed}
	d, err := NewDMRI(s, p, dir, "model:b3s", vs)
	if err != nil {
		t.Fatal(err)
	}
	// A clicked voxel shows the folder's samples: the fit's streams are
	// the voxel's own, whatever the batch.
	const v = 100
	c := d.coords(s.Voxels[v])
	vox, err := d.Voxel(0.6, c[0], c[1], c[2])
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for st := range b.Sticks {
		for j := range b.Samples {
			if !b.Active[st][v*b.Samples+j] {
				continue
			}
			th, ph := float64(b.Theta[st][v*b.Samples+j]), float64(b.Phi[st][v*b.Samples+j])
			want := [3]float64{math.Sin(th) * math.Cos(ph), math.Sin(th) * math.Sin(ph), math.Cos(th)}
			if k >= len(vox.Directions) {
				t.Fatalf("voxel %d: %d directions, the fit has more", v, len(vox.Directions))
			}
			got := vox.Directions[k].Dir
			// float32 network passes in batches of different sizes.
			if math.Abs(got[0]-want[0])+math.Abs(got[1]-want[1])+math.Abs(got[2]-want[2]) > 1e-4 {
				t.Errorf("voxel %d direction %d: %v, the folder's fit %v", v, k, got, want)
			}
			k++
		}
	}
	if k != len(vox.Directions) {
		t.Errorf("voxel %d: %d directions, the folder's fit %d", v, len(vox.Directions), k)
	}
	if d.set.Lambda != 0.6 {
		t.Errorf("λ %v, want the folder's 0.6", d.set.Lambda)
	}
	M := len(d.models)
	for v, i := range s.Voxels {
		if v < 150 {
			for m := range M {
				if d.prob[i*M+m] != b.ModelProb[v*M+m] || d.lambda[i] != 0.6 {
					t.Fatalf("voxel %d model %d: %v, the folder's %v", v, m, d.prob[i*M+m], b.ModelProb[v*M+m])
				}
			}
		} else if !math.IsNaN(float64(d.lambda[i])) {
			t.Fatalf("voxel %d outside the folder's fit has λ %v", v, d.lambda[i])
		}
	}
	side, err := os.ReadFile(filepath.Join(dir, "model_prob.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(side), `"family": "b3s"`, `"family": "bszt"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "model_prob.json"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDMRI(s, p, dir, "model:b3s", testDMRISettings()); err == nil || !strings.Contains(err.Error(), "bszt") {
		t.Errorf("folder of another family: %v", err)
	}
}

// TestSliceGeometry: every pixel of every slice view is a distinct voxel
// of that slice, the top row is the highest coordinate, and the maps
// render with the documented colours.
func TestSliceGeometry(t *testing.T) {
	s, p := slabScan(t)
	d, err := NewDMRI(s, p, "", "model:b3s", testDMRISettings())
	if err != nil {
		t.Fatal(err)
	}
	n := [3]int{s.Nx, s.Ny, s.Nz}
	for a := range 3 {
		w, h := d.SliceSize(a)
		for _, index := range []int{0, n[a] / 2, n[a] - 1} {
			seen := map[int]bool{}
			for v := range h {
				for u := range w {
					i := d.voxelAt(a, index, u, v)
					c := d.coords(i)
					if seen[i] || c[a] != index {
						t.Fatalf("axis %d slice %d pixel (%d, %d): voxel %v", a, index, u, v, c)
					}
					seen[i] = true
				}
			}
			// The vertical axis of every view runs upwards: z for
			// sagittal and coronal, y for axial.
			up := [3]int{2, 2, 1}[a]
			if c0, c1 := d.coords(d.voxelAt(a, index, 0, 0)), d.coords(d.voxelAt(a, index, 0, h-1)); c0[up] != n[up]-1 || c1[up] != 0 {
				t.Errorf("axis %d: top row at %v, bottom row at %v", a, c0, c1)
			}
		}
	}
	for _, m := range d.maps {
		img, err := d.Slice(m.ID, Axial, s.Nz/2)
		if err != nil {
			t.Fatalf("map %s: %v", m.ID, err)
		}
		w, h := d.SliceSize(Axial)
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Fatalf("map %s: %v, want %d×%d", m.ID, b, w, h)
		}
		for v := range h {
			for u := range w {
				i := d.voxelAt(Axial, s.Nz/2, u, v)
				c := img.NRGBAAt(u, v)
				switch {
				case d.pos[i] < 0:
					if c != outsideColour {
						t.Fatalf("map %s: outside voxel coloured %v", m.ID, c)
					}
				case m.ID == "dec" && !math.IsNaN(float64(d.fa[i])):
					want := uint8(math.Round(255 * math.Min(1, float64(d.fa[i])*math.Abs(float64(d.v1[i][0])))))
					if c.R != want {
						t.Fatalf("DEC red %d, want 255·FA·|V1x| = %d", c.R, want)
					}
				}
			}
		}
	}
	for _, bad := range []string{"", "model:99", "nfibres:x", "comp:-1"} {
		if _, err := d.Slice(bad, Axial, 0); err == nil {
			t.Errorf("map %q accepted", bad)
		}
	}
	if _, err := d.Slice("fa", Axial, s.Nz); err == nil {
		t.Error("slice past the grid accepted")
	}
}
