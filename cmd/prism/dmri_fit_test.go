package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/posterior"
)

// tinyB3SYAML is a b3s network small enough to train a few steps in a
// test; its posterior is far from converged, which does not matter for
// what the fit tests check (file layout, geometry, value ranges,
// normalisation, reproducibility, resume).
const tinyB3SYAML = `family: b3s
seed: 5
batch_size: 8
steps: 3
checkpoint_every: 3
log_every: 1
validation: {size: 16, every: 3}
network:
  model_dim: 16
  heads: 2
  head_dim: 8
  mlp_width: 2
  encoder_layers: 1
  mask_layers: 1
  param_layers: 1
`

// tinyB3S trains the tiny b3s network (once per test binary) and returns
// its checkpoint folder.
func tinyB3S(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tiny-b3s.yaml")
	if err := os.WriteFile(cfg, []byte(tinyB3SYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "ckpt")
	if code, _, errs := prism("train", "--config", cfg, "--out", ck, "--quiet"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	return ck
}

const slabDir = "../../../shared/data/dmri/mrtrix3-msmt-slab"

// cropSlab writes the 4×3×2 block of the real slab scan starting at voxel
// (6, 6, 5) (inside its mask), with the matching mask, bval and bvec,
// into dir, shifting the qform/sform origins so that every voxel keeps
// its world position. It returns the flags and the cropped DWI header.
func cropSlab(t *testing.T, dir string) ([]string, *nifti.Header) {
	t.Helper()
	if _, err := os.Stat(slabDir); err != nil {
		t.Skipf("real scan not available (%v): the shared data folder is not beside this checkout", err)
	}
	const x0, y0, z0, cx, cy, cz = 6, 6, 5, 4, 3, 2
	crop := func(src, dst string) *nifti.Header {
		in, err := nifti.Read(src)
		if err != nil {
			t.Fatal(err)
		}
		nx, ny, nz, nt := in.Shape()
		dims := []int{cx, cy, cz}
		if in.Dim[0] > 3 {
			dims = append(dims, nt)
		}
		out, err := nifti.New(in.Datatype, dims...)
		if err != nil {
			t.Fatal(err)
		}
		h := &out.Header
		h.Pixdim = in.Pixdim
		h.XYZTUnits = in.XYZTUnits
		h.QformCode, h.SformCode = in.QformCode, in.SformCode
		h.QuaternB, h.QuaternC, h.QuaternD = in.QuaternB, in.QuaternC, in.QuaternD
		q := in.QformMatrix()
		h.QoffsetX, h.QoffsetY, h.QoffsetZ = q.Apply(x0, y0, z0)
		sf := in.SformMatrix()
		h.Srow = in.Srow
		h.Srow[0][3], h.Srow[1][3], h.Srow[2][3] = sf.Apply(x0, y0, z0)
		for tt := 0; tt < nt; tt++ {
			for z := range cz {
				for y := range cy {
					for x := range cx {
						out.Data[x+cx*(y+cy*z)+tt*cx*cy*cz] = in.Data[(x0+x)+nx*((y0+y)+ny*(z0+z))+tt*nx*ny*nz]
					}
				}
			}
		}
		if err := nifti.Write(dst, out); err != nil {
			t.Fatal(err)
		}
		back, err := nifti.ReadHeader(dst)
		if err != nil {
			t.Fatal(err)
		}
		return back
	}
	ref := crop(filepath.Join(slabDir, "dwi.nii.gz"), filepath.Join(dir, "dwi.nii.gz"))
	crop(filepath.Join(slabDir, "mask.nii.gz"), filepath.Join(dir, "mask.nii.gz"))
	for _, f := range []string{"dwi.bval", "dwi.bvec"} {
		b, err := os.ReadFile(filepath.Join(slabDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--dwi", filepath.Join(dir, "dwi.nii.gz"), "--bval", filepath.Join(dir, "dwi.bval"),
		"--bvec", filepath.Join(dir, "dwi.bvec"), "--mask", filepath.Join(dir, "mask.nii.gz")}, ref
}

// fitOutputs are the images `dmri fit` writes besides the BedpostX set,
// with their number of volumes for b3s (15 models, 3 sticks).
var fitOutputs = map[string]int{"model_prob": 15, "nfibres_prob": 4, "map_model": 1, "ess": 1, "pp_rmse": 1, "peaks": 9}

func readOut(t *testing.T, dir, name string) *nifti.Volume {
	t.Helper()
	v, err := nifti.Read(filepath.Join(dir, name+dmrifit.OutputExt))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDMRIFitOutputs runs `prism dmri fit` on a cropped real scan with a
// briefly trained b3s network and checks every output: geometry equal
// to the input's, fractions in [0, 1] summing to ≤ 1, unit dyads,
// probabilities summing to 1 (float32 sums of ≤ 15 terms: 1e−5), the
// sidecar, run.json, peaks = dyad (world frame) × mean f, and that a
// different batch size gives identical images (per-voxel streams).
func TestDMRIFitOutputs(t *testing.T) {
	ck := tinyB3S(t)
	dir := t.TempDir()
	flags, ref := cropSlab(t, dir)
	out := filepath.Join(dir, "fit")
	common := append(append([]string{"dmri", "fit"}, flags...), "--checkpoint", ck, "--samples", "6", "--steps", "4", "--ess-samples", "4", "--quiet")
	code, _, errs := prism(append(common, "--out", out, "--batch", "5")...)
	if code != 0 {
		t.Fatalf("dmri fit: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(out, dmrifit.StateFile)); !os.IsNotExist(err) {
		t.Errorf("the partial state is left behind after a complete run: %v", err)
	}
	nv := 4 * 3 * 2
	mask := readOut(t, out, "nodif_brain_mask")
	var voxels []int
	for i, m := range mask.Data {
		if m != 0 {
			voxels = append(voxels, i)
		}
	}
	if len(voxels) < 12 {
		t.Fatalf("only %d mask voxels in the crop", len(voxels))
	}
	names := []string{"mean_dsamples", "mean_d_stdsamples", "nodif_brain_mask"}
	for i := 1; i <= 3; i++ {
		for _, f := range []string{"merged_th%dsamples", "merged_ph%dsamples", "merged_f%dsamples", "mean_th%dsamples", "mean_ph%dsamples", "mean_f%dsamples", "dyads%d", "dyads%d_dispersion"} {
			names = append(names, strings.Replace(f, "%d", string(rune('0'+i)), 1))
		}
	}
	for n := range fitOutputs {
		names = append(names, n)
	}
	for _, n := range names {
		v := readOut(t, out, n)
		if v.Dim[1] != ref.Dim[1] || v.Dim[2] != ref.Dim[2] || v.Dim[3] != ref.Dim[3] {
			t.Errorf("%s: grid %v, input %v", n, v.Dim[1:4], ref.Dim[1:4])
		}
		for k := 1; k <= 3; k++ {
			if v.Pixdim[k] != ref.Pixdim[k] {
				t.Errorf("%s: pixdim %v, input %v", n, v.Pixdim[1:4], ref.Pixdim[1:4])
				break
			}
		}
		if v.Srow != ref.Srow || v.SformCode != ref.SformCode || v.QformCode != ref.QformCode {
			t.Errorf("%s: sform %v (code %d), input %v (code %d)", n, v.Srow, v.SformCode, ref.Srow, ref.SformCode)
		}
		if qa, qb := v.QformMatrix(), ref.QformMatrix(); qa != qb {
			t.Errorf("%s: qform %v, input %v", n, qa, qb)
		}
		if want, ok := fitOutputs[n]; ok {
			if _, _, _, nt := v.Shape(); nt != want {
				t.Errorf("%s: %d volumes, want %d", n, nt, want)
			}
		}
	}

	// Fractions, dyads, peaks.
	var fsum [24]float64
	peaks := readOut(t, out, "peaks")
	rot, flip := worldRotationOf(ref), ref.FSLFlipX()
	for i := 1; i <= 3; i++ {
		k := string(rune('0' + i))
		merged := readOut(t, out, "merged_f"+k+"samples")
		for _, f := range merged.Data {
			if !(f >= 0 && f <= 1) {
				t.Fatalf("merged_f%s has %v", k, f)
			}
		}
		mf := readOut(t, out, "mean_f"+k+"samples")
		dy := readOut(t, out, "dyads"+k)
		for _, v := range voxels {
			f := float64(mf.Data[v])
			fsum[v] += f
			d := [3]float64{float64(dy.Data[v]), float64(dy.Data[v+nv]), float64(dy.Data[v+2*nv])}
			n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
			if f > 0 && math.Abs(n-1) > 1e-5 {
				t.Errorf("dyads%s at %d has norm %v", k, v, n)
			}
			w := dmrifit.PeakDirection(d, flip, rot)
			for c := range 3 {
				got := float64(peaks.Data[v+(3*(i-1)+c)*nv])
				if math.Abs(got-f*w[c]) > 1e-6 {
					t.Errorf("peaks stick %d at %d: component %d = %v, want %v", i, v, c, got, f*w[c])
				}
			}
		}
	}
	for _, v := range voxels {
		if fsum[v] > 1+1e-5 {
			t.Errorf("voxel %d: stick fractions sum to %v", v, fsum[v])
		}
	}
	mp := readOut(t, out, "model_prob")
	nf := readOut(t, out, "nfibres_prob")
	mm := readOut(t, out, "map_model")
	ess := readOut(t, out, "ess")
	rmse := readOut(t, out, "pp_rmse")
	for _, v := range voxels {
		var s, best float64
		arg := 0
		for m := range 15 {
			p := float64(mp.Data[v+m*nv])
			s += p
			if p > best {
				best, arg = p, m+1
			}
		}
		if math.Abs(s-1) > 1e-5 {
			t.Errorf("voxel %d: model_prob sums to %v", v, s)
		}
		s = 0
		for k := range 4 {
			s += float64(nf.Data[v+k*nv])
		}
		if math.Abs(s-1) > 1e-5 {
			t.Errorf("voxel %d: nfibres_prob sums to %v", v, s)
		}
		if int(mm.Data[v]) != arg {
			t.Errorf("voxel %d: map_model %v, argmax of model_prob %d", v, mm.Data[v], arg)
		}
		if e := ess.Data[v]; !(e > 0 && e <= 1+1e-6) {
			t.Errorf("voxel %d: ess %v", v, e)
		}
		if r := rmse.Data[v]; !(r >= 0 && r < 10) {
			t.Errorf("voxel %d: pp_rmse %v", v, r)
		}
	}
	for i, m := range mask.Data {
		if m == 0 && (mp.Data[i] != 0 || mm.Data[i] != 0) {
			t.Errorf("voxel %d outside the mask has model_prob %v, map_model %v", i, mp.Data[i], mm.Data[i])
		}
	}

	var side dmrifit.ModelSidecar
	readJSON(t, filepath.Join(out, "model_prob.json"), &side)
	if side.Family != "b3s" || len(side.Models) != 15 || side.Lambda != 0.3 {
		t.Errorf("model_prob.json: family %q, %d models, λ %v", side.Family, len(side.Models), side.Lambda)
	}
	for k, m := range side.Models {
		if m.Index != k+1 || !m.Mask[4] || m.Sticks > 3 {
			t.Errorf("model %d: %+v", k, m)
		}
	}
	var info struct {
		VoxelsFitted int `json:"voxels_fitted"`
		Settings     struct {
			Lambda  float64 `json:"lambda"`
			Weights string  `json:"weights_sha256"`
			Family  string  `json:"family"`
		} `json:"settings"`
		Timings map[string]float64 `json:"timings_s"`
	}
	readJSON(t, filepath.Join(out, "run.json"), &info)
	if info.VoxelsFitted != len(voxels) || info.Settings.Lambda != 0.3 || len(info.Settings.Weights) != 64 || info.Settings.Family != "b3s" || info.Timings["fit"] <= 0 {
		t.Errorf("run.json: %+v", info)
	}

	// Another batch size: identical numbers.
	out2 := filepath.Join(dir, "fit-b2")
	if code, _, errs := prism(append(common, "--out", out2, "--batch", "2")...); code != 0 {
		t.Fatalf("dmri fit --batch 2: exit %d: %s", code, errs)
	}
	for _, n := range []string{"merged_th1samples", "merged_f2samples", "model_prob", "ess", "pp_rmse", "dyads1"} {
		a, b := readOut(t, out, n), readOut(t, out2, n)
		for i := range a.Data {
			if a.Data[i] != b.Data[i] && !(math.IsNaN(float64(a.Data[i])) && math.IsNaN(float64(b.Data[i]))) {
				t.Errorf("%s differs between batch sizes 5 and 2 at %d: %v vs %v", n, i, a.Data[i], b.Data[i])
				break
			}
		}
	}
}

func worldRotationOf(h *nifti.Header) [3][3]float64 {
	m := h.VoxelToWorld()
	var r [3][3]float64
	for c := range 3 {
		n := math.Sqrt(m[0][c]*m[0][c] + m[1][c]*m[1][c] + m[2][c]*m[2][c])
		for row := range 3 {
			r[row][c] = m[row][c] / n
		}
	}
	return r
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDMRIFitResume leaves a partial state as a killed run would (two
// complete batches, then a torn record) and checks that the next run
// continues from it and writes exactly what an uninterrupted run writes;
// a state from other settings is refused, and --fresh discards it.
func TestDMRIFitResume(t *testing.T) {
	ck := tinyB3S(t)
	dir := t.TempDir()
	flags, _ := cropSlab(t, dir)
	common := append(append([]string{"dmri", "fit"}, flags...), "--checkpoint", ck, "--samples", "5", "--steps", "3", "--ess-samples", "0", "--quiet")
	full := filepath.Join(dir, "full")
	if code, _, errs := prism(append(common, "--out", full)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}

	// The partial state of an interrupted run with --batch 4.
	files := dmrifit.ScanFiles{DWI: flags[1], Bval: flags[3], Bvec: flags[5], Mask: flags[7]}
	scan, err := dmrifit.LoadScan(files)
	if err != nil {
		t.Fatal(err)
	}
	post, err := posterior.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	set := dmrifit.DefaultFitSettings()
	set.Samples, set.Steps, set.ESSSamples, set.BatchSize = 5, 3, 0, 4
	// The CLI keys its state on the resolved correction (SMC at the
	// default particle count for ball-and-sticks), so the test must too.
	set = set.ResolveCorrect(true)
	ft, err := dmrifit.NewFitter(post, set)
	if err != nil {
		t.Fatal(err)
	}
	key, err := dmrifit.StateKey(set, dmrifit.WeightsHash(post), scan)
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part")
	os.MkdirAll(part, 0o755)
	statePath := filepath.Join(part, dmrifit.StateFile)
	st, err := dmrifit.OpenFitState(statePath, key, ft.Shape(), false)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < 8; start += 4 {
		b, err := ft.FitBatch(scan, start, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// A torn third record: its first 30 bytes.
	f, _ := os.OpenFile(statePath, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0x50, 0x46, 0x54, 0x42, 8, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Close()

	// Other settings: refused, state untouched.
	other := append(append([]string{"dmri", "fit"}, flags...), "--checkpoint", ck, "--samples", "6", "--steps", "3", "--ess-samples", "0", "--quiet", "--out", part)
	code, _, errs := prism(other...)
	if code == 0 || !strings.Contains(errs, "different run") {
		t.Errorf("a state from other settings: exit %d, %q", code, errs)
	}
	code, _, errs = prism(append(common, "--out", part, "--batch", "3")...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d: %s", code, errs)
	}
	var info struct {
		Settings struct {
			Resumed int `json:"resumed_voxels"`
		} `json:"settings"`
	}
	readJSON(t, filepath.Join(part, "run.json"), &info)
	if info.Settings.Resumed != 8 {
		t.Errorf("resumed %d voxels, want 8", info.Settings.Resumed)
	}
	for _, n := range []string{"merged_th1samples", "merged_ph2samples", "merged_f1samples", "model_prob", "pp_rmse", "mean_dsamples", "dyads1"} {
		a, b := readOut(t, full, n), readOut(t, part, n)
		for i := range a.Data {
			if a.Data[i] != b.Data[i] {
				t.Errorf("%s: resumed run differs at %d: %v vs %v", n, i, b.Data[i], a.Data[i])
				break
			}
		}
	}
}

// TestDMRIFitErrors: bad inputs fail with a message naming the culprit,
// a non-zero exit and no output folder; NaN voxels are skipped and
// reported; a network of another family is refused.
func TestDMRIFitErrors(t *testing.T) {
	ck := tinyB3S(t)
	dir := t.TempDir()
	flags, _ := cropSlab(t, dir)
	bval := filepath.Join(dir, "short.bval")
	b, _ := os.ReadFile(flags[3])
	fields := strings.Fields(string(b))
	os.WriteFile(bval, []byte(strings.Join(fields[:len(fields)-1], " ")+"\n"), 0o644)

	// All-NaN and partly-NaN copies of the DWI.
	img, err := nifti.Read(flags[1])
	if err != nil {
		t.Fatal(err)
	}
	nv := img.NumVoxels()
	mask, err := nifti.Read(flags[7])
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, m := range mask.Data {
		if m != 0 {
			first = i
			break
		}
	}
	img.Data[first+5*nv] = float32(math.NaN()) // first mask voxel, volume 5
	partNaN := filepath.Join(dir, "partnan.nii.gz")
	nifti.Write(partNaN, img)
	for i := range img.Data {
		img.Data[i] = float32(math.NaN())
	}
	allNaN := filepath.Join(dir, "allnan.nii.gz")
	nifti.Write(allNaN, img)

	lingauss := filepath.Join(dir, "lg")
	if code, _, errs := prism("train", "--config", writeTinyConfig(t), "--steps", "1", "--out", lingauss, "--quiet"); code != 0 {
		t.Fatalf("train lingauss: %s", errs)
	}
	with := func(k, v string) []string {
		out := append([]string(nil), flags...)
		for i := 0; i < len(out); i += 2 {
			if out[i] == k {
				out[i+1] = v
			}
		}
		return out
	}
	for _, c := range []struct {
		flags []string
		ck    string
		want  string
	}{
		{with("--bval", bval), ck, "short.bval"},
		{with("--dwi", filepath.Join(dir, "missing.nii.gz")), ck, "missing.nii.gz"},
		{with("--bvec", filepath.Join(dir, "missing.bvec")), ck, "missing.bvec"},
		{with("--mask", filepath.Join(dir, "missing-mask.nii.gz")), ck, "missing-mask.nii.gz"},
		{with("--dwi", allNaN), ck, "allnan.nii.gz"},
		{flags, filepath.Join(dir, "no-ckpt"), "no-ckpt"},
		{flags, lingauss, "lingauss-k6"},
		// A ball-and-sticks fit would ignore the model-selection
		// correction's class choices: refused, not silently dropped.
		{append(append([]string(nil), flags...), "--correct-lambda", "0.9"), ck, "ball-and-sticks"},
		{append(append([]string(nil), flags...), "--correct-always", "1"), ck, "ball-and-sticks"},
	} {
		out := filepath.Join(dir, "out-bad")
		args := append(append([]string{"dmri", "fit"}, c.flags...), "--checkpoint", c.ck, "--out", out, "--samples", "2", "--steps", "2", "--quiet")
		code, _, errs := prism(args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q (want it to name %q)", c.want, code, errs, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: the output folder was created", c.want)
			os.RemoveAll(out)
		}
	}

	out := filepath.Join(dir, "out-nan")
	args := append(append([]string{"dmri", "fit"}, with("--dwi", partNaN)...), "--checkpoint", ck, "--out", out, "--samples", "2", "--steps", "2", "--ess-samples", "0", "--quiet")
	if code, _, errs := prism(args...); code != 0 {
		t.Fatalf("partly NaN scan: exit %d: %s", code, errs)
	}
	var info struct {
		Skipped map[string]int `json:"voxels_skipped"`
	}
	readJSON(t, filepath.Join(out, "run.json"), &info)
	if info.Skipped[dmrifit.SkipNonFinite] != 1 {
		t.Errorf("run.json voxels_skipped %v, want one %q", info.Skipped, dmrifit.SkipNonFinite)
	}
	if _, err := os.Stat(filepath.Join(out, "ess"+dmrifit.OutputExt)); !os.IsNotExist(err) {
		t.Errorf("ess written with --ess-samples 0")
	}
}
