package main

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prismsbi/prism/bids"
	"github.com/prismsbi/prism/nifti"
)

// cohortSeries are the series of the test dataset: three subjects made
// from crops of the bundled scan, sub-02 with two sessions, sub-03 with a
// negative b-value (valid BIDS, unusable data).
var cohortSeries = []struct {
	rel, stem string
	crop      cropBlock
	broken    bool
}{
	{"sub-01/dwi", "sub-01", cropBlock{X0: 22, Y0: 20, Z0: 18, Nx: 14, Ny: 14, Nz: 2}, false},
	{"sub-02/ses-1/dwi", "sub-02_ses-1", cropBlock{X0: 36, Y0: 20, Z0: 18, Nx: 14, Ny: 14, Nz: 2}, false},
	{"sub-02/ses-2/dwi", "sub-02_ses-2", cropBlock{X0: 22, Y0: 34, Z0: 20, Nx: 14, Ny: 14, Nz: 2}, false},
	{"sub-03/dwi", "sub-03", cropBlock{X0: 36, Y0: 34, Z0: 20, Nx: 14, Ny: 14, Nz: 2}, true},
}

// makeCohort writes a small BIDS dataset into dir (see cohortSeries).
func makeCohort(t *testing.T, dir string) {
	t.Helper()
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dataset_description.json", `{"Name": "prism test cohort (crops of a Siemens Prisma b = 2500 scan)", "BIDSVersion": "1.9.0", "License": "BSD-2-Clause", "Authors": ["prism tests"]}`+"\n")
	write("README", "Crops of the scan in prism's data/xa30-prisma-b2500-wholebrain (BSD-2-Clause), made by the prism tests.\n")
	write("participants.tsv", "participant_id\nsub-01\nsub-02\nsub-03\n")
	for _, s := range cohortSeries {
		base := filepath.Join(dir, s.rel, s.stem+"_dwi")
		os.MkdirAll(filepath.Dir(base), 0o755)
		cropNIfTI(t, filepath.Join(bundledScanDir, "dwi_PA.nii.gz"), base+".nii.gz", s.crop)
		copyFile(t, filepath.Join(bundledScanDir, "dwi_PA.bvec"), base+".bvec")
		copyFile(t, filepath.Join(bundledScanDir, "dwi_PA.json"), base+".json")
		b, err := os.ReadFile(filepath.Join(bundledScanDir, "dwi_PA.bval"))
		if err != nil {
			t.Fatal(err)
		}
		if s.broken {
			f := strings.Fields(string(b))
			f[5] = "-" + f[5]
			b = []byte(strings.Join(f, " ") + "\n")
		}
		if err := os.WriteFile(base+".bval", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBIDSApp builds the dataset, checks it with bids-validator (npm;
// required when PRISM_REQUIRE_BIDS_VALIDATOR=1, as in CI), runs the
// participant level for everyone and the group level, and checks the
// derivatives, the broken subject's report and the cohort table; a rerun
// skips the fitted series, and --participant-label selects one.
func TestBIDSApp(t *testing.T) {
	dir := t.TempDir()
	ds := filepath.Join(dir, "ds")
	makeCohort(t, ds)
	validateBIDS(t, ds)

	out := filepath.Join(dir, "out")
	fit := []string{"--samples", "4", "--steps", "2"}
	code, _, stderr := prism(append([]string{"bids", ds, out, "participant"}, fit...)...)
	if code == 0 || !strings.Contains(stderr, "1 of 4 series") || !strings.Contains(stderr, "sub-03") {
		t.Fatalf("participant level with a broken subject: exit %d (want 1, naming sub-03): %s", code, stderr)
	}

	var desc struct {
		DatasetType string
		GeneratedBy []struct{ Name, Version string }
	}
	readJSON(t, filepath.Join(out, "dataset_description.json"), &desc)
	if desc.DatasetType != "derivative" || len(desc.GeneratedBy) != 1 || desc.GeneratedBy[0].Name != "prism" {
		t.Errorf("dataset_description.json: %+v", desc)
	}
	for _, s := range cohortSeries {
		r, err := bids.ReadReport(bids.ReportPath(out, s.stem))
		if err != nil {
			t.Fatal(err)
		}
		if s.broken {
			if r.Status != bids.StatusFailed || !strings.Contains(r.Error, s.stem+"_dwi.bval") || !strings.Contains(r.Error, "non-negative") {
				t.Errorf("%s: report %s, %q (want failed, naming the bval file)", s.stem, r.Status, r.Error)
			}
			if _, err := os.Stat(filepath.Join(out, s.rel, s.stem+".bedpostX")); err == nil {
				t.Errorf("%s: outputs written for a failed series", s.stem)
			}
			continue
		}
		if r.Status != bids.StatusOK || r.VoxelsFitted == 0 || len(r.MeanNFibresProb) != 4 {
			t.Fatalf("%s: report %+v", s.stem, r)
		}
		var sum float64
		for _, p := range r.MeanNFibresProb {
			sum += p
		}
		// A mean of float32 probabilities that each sum to 1 within 1e−5.
		if sum < 1-1e-4 || sum > 1+1e-4 {
			t.Errorf("%s: mean P(k fibres) sums to %v", s.stem, sum)
		}
		// The derivative maps have the input's grid, their sidecars the
		// settings and network.
		src, err := nifti.ReadHeader(filepath.Join(ds, s.rel, s.stem+"_dwi.nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{bids.MapName(s.stem, "nfibresprob"), bids.MapName(s.stem, "dyads1"), bids.MapName(s.stem, "modelprob"), bids.MaskName(s.stem)} {
			h, err := nifti.ReadHeader(filepath.Join(out, s.rel, name))
			if err != nil {
				t.Fatal(err)
			}
			if h.Dim[1] != src.Dim[1] || h.Dim[2] != src.Dim[2] || h.Dim[3] != src.Dim[3] || h.Srow != src.Srow {
				t.Errorf("%s: grid %v / %v, want the input's %v / %v", name, h.Dim, h.Srow, src.Dim, src.Srow)
			}
			var side struct {
				Sources []string
				Model   struct {
					Network, WeightsSHA256 string
					Samples                int
				}
			}
			readJSON(t, filepath.Join(out, s.rel, strings.TrimSuffix(name, ".nii.gz")+".json"), &side)
			if side.Model.Network != "model:b3s-brain" || len(side.Model.WeightsSHA256) != 64 || side.Model.Samples != 4 ||
				len(side.Sources) != 1 || !strings.HasSuffix(side.Sources[0], s.stem+"_dwi.nii.gz") {
				t.Errorf("%s sidecar: %+v", name, side)
			}
		}
		for _, f := range []string{"dyads1.nii.gz", "merged_f1samples.nii.gz", "nodif_brain_mask.nii.gz"} {
			if _, err := os.Stat(filepath.Join(out, s.rel, s.stem+".bedpostX", f)); err != nil {
				t.Errorf("BedpostX folder: %v", err)
			}
		}
	}

	// A rerun skips the three fitted series (and refits nothing).
	code, _, stderr = prism(append([]string{"bids", ds, out, "participant", "--participant_label", "01", "02"}, fit...)...)
	if code != 0 || strings.Count(stderr, "already fitted") != 3 || strings.Contains(stderr, ": fitting") {
		t.Errorf("rerun of sub-01 and sub-02: exit %d: %s", code, stderr)
	}
	// An unknown participant is reported, not fatal.
	code, _, stderr = prism(append([]string{"bids", ds, out, "participant", "--participant-label", "sub-09"}, fit...)...)
	if code == 0 || !strings.Contains(stderr, "sub-09") {
		t.Errorf("unknown participant: exit %d: %s", code, stderr)
	}

	if code, _, stderr := prism("bids", ds, out, "group"); code != 0 {
		t.Fatalf("group level: exit %d: %s", code, stderr)
	}
	f, err := os.Open(filepath.Join(out, bids.GroupDir, "cohort.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rd := csv.NewReader(f)
	rd.Comma, rd.LazyQuotes = '\t', true
	rows, err := rd.ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows[0], bids.CohortColumns) || len(rows) != 1+5 {
		t.Fatalf("cohort.tsv: header %v, %d rows (want 4 series and sub-09)", rows[0], len(rows)-1)
	}
	col := func(row []string, name string) string { return row[slices.Index(bids.CohortColumns, name)] }
	statuses := map[string]string{}
	for _, row := range rows[1:] {
		statuses[col(row, "series")] = col(row, "status")
		if col(row, "status") == bids.StatusOK {
			r, _ := bids.ReadReport(bids.ReportPath(out, col(row, "series")))
			if n, _ := strconv.Atoi(col(row, "voxels_fitted")); n != r.VoxelsFitted || n == 0 {
				t.Errorf("%s: voxels_fitted %s, report %d", col(row, "series"), col(row, "voxels_fitted"), r.VoxelsFitted)
			}
			if p, _ := strconv.ParseFloat(col(row, "p_nfibres_1"), 64); p-r.MeanNFibresProb[1] > 1e-4 || r.MeanNFibresProb[1]-p > 1e-4 {
				t.Errorf("%s: p_nfibres_1 %s, report %v", col(row, "series"), col(row, "p_nfibres_1"), r.MeanNFibresProb[1])
			}
		}
	}
	want := map[string]string{"sub-01": "ok", "sub-02_ses-1": "ok", "sub-02_ses-2": "ok", "sub-03": "failed", "sub-09": "missing"}
	if !mapsEqual(statuses, want) {
		t.Errorf("cohort statuses %v, want %v", statuses, want)
	}
	html, err := os.ReadFile(filepath.Join(out, bids.GroupDir, "qc.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "<img "); n != 9 {
		t.Errorf("qc.html has %d thumbnails, want 3 per fitted series (9)", n)
	}
	for _, s := range cohortSeries[:3] {
		for _, k := range []string{"b0", "dec", "nfibres"} {
			if _, err := os.Stat(filepath.Join(out, bids.ThumbnailName(s.stem, k))); err != nil {
				t.Error(err)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// validateBIDS runs bids-validator (npm) on the dataset at dir; when it
// is not installed the test skips this check, unless
// PRISM_REQUIRE_BIDS_VALIDATOR=1 (CI).
func validateBIDS(t *testing.T, dir string) {
	t.Helper()
	bin, err := exec.LookPath("bids-validator")
	if err != nil {
		if os.Getenv("PRISM_REQUIRE_BIDS_VALIDATOR") == "1" {
			t.Fatalf("bids-validator not found (.ci/run installs it from npm): %v", err)
		}
		t.Log("bids-validator not installed: the dataset is not validated")
		return
	}
	cmd := exec.Command(bin, "--ignoreWarnings", dir)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bids-validator %s: %v\n%s", dir, err, outb)
	}
	t.Logf("bids-validator: %s", strings.TrimSpace(string(outb)))
}
