package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestViewErrors: bad command lines fail with a message naming the
// problem, before anything is served.
func TestViewErrors(t *testing.T) {
	dir := t.TempDir()
	noRun := filepath.Join(dir, "empty")
	if err := os.Mkdir(noRun, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to show"},
		{[]string{"--example", "--model", "b3s"}, "--example"},
		{[]string{"--obs", "x.jsonl"}, "nothing to show"},
		{[]string{"--dwi", "x.nii.gz", "--obs", "x.jsonl"}, "need a grid-family network"},
		{[]string{"--model", "symbolic-k15", "--obs", filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{[]string{"--model", "symbolic-k15", "--sim-lambda", "2"}, "--sim-lambda"},
		{[]string{"--model", "symbolic-k15", "--candidates", filepath.Join(dir, "none.txt")}, "--candidates"},
		{[]string{"--model", "b3s"}, "1-D grid"},
		{[]string{"--dmri", noRun}, "run.json"},
		{[]string{"--dwi", "x.nii.gz", "--bval", "x.bval", "--bvec", "x.bvec"}, "--dmri-model"},
		{[]string{"--model", "symbolic-k15", "--listen", "127.0.0.1:99999"}, "--listen"},
		{[]string{"--dwi", "x.nii.gz", "--bval", "x.bval", "--bvec", "x.bvec", "--dmri-model", "b3s", "--lambda", "1.5"}, "--lambda"},
		{[]string{"--dwi", "x.nii.gz", "--bval", "x.bval", "--bvec", "x.bvec", "--dmri-model", "b3s"}, "x.bval"},
		{[]string{"--model", "symbolic-k15", "--max-upload", "0"}, "--max-upload"},
	} {
		code, _, errs := prism(append([]string{"view"}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("prism view %v: exit %d, stderr %q, want an error mentioning %q", c.args, code, errs, c.want)
		}
	}
}

// TestViewFitFolder: `prism view --dmri FOLDER` shows a `prism dmri fit`
// folder with the scan and network of its run.json, at its λ.
func TestViewFitFolder(t *testing.T) {
	dir := t.TempDir()
	flags, _ := cropSlab(t, dir)
	out := filepath.Join(dir, "fit")
	code, _, errs := prism(append(append([]string{"dmri", "fit"}, flags...), "--model", "b3s", "--samples", "4", "--steps", "2", "--lambda", "0.45", "--quiet", "--out", out)...)
	if code != 0 {
		t.Fatalf("dmri fit: exit %d: %s", code, errs)
	}
	addr := startView(t, "--dmri", out)
	resp, err := http.Get(addr + "/api/info")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Grid *json.RawMessage `json:"grid"`
		DMRI *struct {
			Grid   [3]int  `json:"grid"`
			Voxels int     `json:"voxels"`
			Lambda float64 `json:"lambda"`
			Source string  `json:"source"`
		} `json:"dmri"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Grid != nil || info.DMRI == nil || info.DMRI.Grid != [3]int{4, 3, 2} || info.DMRI.Lambda != 0.45 || info.DMRI.Source != "model:b3s" {
		t.Fatalf("info %s", b)
	}
	resp, err = http.Get(addr + "/api/dmri/slice?map=model:0&axis=2&index=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("slice: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
}

// TestViewListenWarning: serving beyond the loopback interface prints a
// warning.
func TestViewListenWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the symbolic-k15 network")
	}
	var stderr syncBuffer
	addr := startViewTo(t, &stderr, "--model", "symbolic-k15", "--listen", "0.0.0.0:0")
	if !strings.Contains(stderr.String(), "WARNING") || !strings.HasPrefix(addr, "http://127.0.0.1:") {
		t.Errorf("address %s, stderr %q", addr, stderr.String())
	}
}
