package bids

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func touch(t *testing.T, root string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFind: series with and without sessions, several per folder,
// companions beside the image or inherited from the root, filters with
// and without prefixes, and the problems of what was asked for but is
// absent.
func TestFind(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "dataset_description.json", "dwi.bvec",
		"sub-01/dwi/sub-01_dwi.nii.gz", "sub-01/dwi/sub-01_dwi.bval", "sub-01/dwi/sub-01_dwi.bvec", "sub-01/dwi/sub-01_dwi.json",
		"sub-01/anat/sub-01_T1w.nii.gz",
		"sub-02/ses-b/dwi/sub-02_ses-b_acq-hi_dwi.nii.gz", "sub-02/ses-b/dwi/sub-02_ses-b_acq-hi_dwi.bval",
		"sub-02/ses-b/dwi/sub-02_ses-b_acq-lo_dwi.nii", "sub-02/ses-a/anat/sub-02_ses-a_T1w.nii.gz",
		"sub-03/anat/sub-03_T1w.nii.gz")
	series, problems, err := Find(root, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stems []string
	for _, s := range series {
		stems = append(stems, s.Stem)
	}
	if want := []string{"sub-01", "sub-02_ses-b_acq-hi", "sub-02_ses-b_acq-lo"}; !slices.Equal(stems, want) {
		t.Fatalf("series %v, want %v", stems, want)
	}
	s1, hi, lo := series[0], series[1], series[2]
	if s1.RelDir != filepath.Join("sub-01", "dwi") || s1.JSON == "" || len(s1.Missing()) != 0 || s1.Session != "" {
		t.Errorf("sub-01: %+v", s1)
	}
	if hi.Session != "ses-b" || hi.Bvec != filepath.Join(root, "dwi.bvec") || hi.JSON != "" || len(hi.Missing()) != 0 {
		t.Errorf("acq-hi (bvec inherited from the root): %+v", hi)
	}
	if m := lo.Missing(); !slices.Equal(m, []string{"sub-02_ses-b_acq-lo_dwi.bval"}) {
		t.Errorf("acq-lo missing %v, want its bval", m)
	}
	var reasons []string
	for _, p := range problems {
		reasons = append(reasons, p.Subject+"/"+p.Session)
	}
	if want := []string{"sub-03/"}; !slices.Equal(reasons, want) {
		t.Errorf("problems %v, want %v", reasons, want)
	}

	series, problems, err = Find(root, []string{"sub-02", "07"}, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 2 || series[0].Subject != "sub-02" || len(problems) != 1 || problems[0].Subject != "sub-07" {
		t.Errorf("filtered: %d series, problems %+v", len(series), problems)
	}
	// A session asked for explicitly without a dwi series is a problem.
	_, problems, _ = Find(root, []string{"02"}, []string{"a"})
	if len(problems) != 1 || problems[0].Session != "ses-a" {
		t.Errorf("session a of sub-02: problems %+v", problems)
	}
	if _, _, err := Find(filepath.Join(root, "sub-01"), nil, nil); err == nil || !strings.Contains(err.Error(), "not a BIDS dataset") {
		t.Errorf("a folder without dataset_description.json: %v", err)
	}
}

// TestCohortTSV: one line per report, tab-separated, n/a where there is
// no value, tabs and newlines in messages flattened.
func TestCohortTSV(t *testing.T) {
	reports := []*Report{
		{Series: Series{Subject: "sub-01", Stem: "sub-01"}, Status: StatusOK, VoxelsInMask: 10, VoxelsFitted: 9,
			VoxelsSkipped: map[string]int{"b0 <= 0": 1}, MeanNFibresProb: []float64{0.1, 0.6, 0.25, 0.05}, MeanModelMass: 1,
			Timings: map[string]float64{"fit": 2, "total": 3}, Network: "model:b3s-brain", Warnings: []string{"a", "b"}},
		{Series: Series{Subject: "sub-02", Session: "ses-1", Stem: "sub-02_ses-1"}, Status: StatusFailed, Error: "bad\tbval\nfile"},
	}
	var buf bytes.Buffer
	if err := WriteCohortTSV(&buf, reports); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	want := [][]string{CohortColumns,
		{"sub-01", "n/a", "sub-01", "ok", "10", "9", "1", "0.1000", "0.6000", "0.2500", "0.0500", "1.0000", "2.0000", "3.0000", "model:b3s-brain", "n/a", "a; b"},
		{"sub-02", "ses-1", "sub-02_ses-1", "failed", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "bad bval file", "n/a"}}
	for i, l := range lines {
		if got := strings.Split(l, "\t"); !slices.Equal(got, want[i]) {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}
