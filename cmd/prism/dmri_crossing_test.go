package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDMRICrossingCLI runs `prism dmri crossing` on a small phantom (2
// voxels per cell, UKB-like protocol, SNR 40, 90°) with the shipped
// b3s-brain network and checks the printed table and the JSON; bad
// arguments must fail with a message naming the flag and write nothing.
func TestDMRICrossingCLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cells.json")
	code, stdout, errs := prism("dmri", "crossing", "--model", "b3s-brain", "--protocols", "ukb", "--snr", "40", "--angles", "90", "--voxels", "2", "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "dyads2°") || !strings.Contains(stdout, "ukb") {
		t.Fatalf("no table in output:\n%s", stdout)
	}
	var res struct {
		Cells []struct {
			Angle  float64 `json:"angle"`
			Voxels int     `json:"voxels"`
		} `json:"cells"`
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 2 || res.Cells[0].Voxels != 2 || res.Cells[1].Angle != 90 {
		t.Fatalf("cells %+v, want a one-stick and a 90° cell of 2 voxels", res.Cells)
	}
	for _, bad := range [][]string{
		{"--angles", "100"},
		{"--snr", "x"},
		{"--protocols", "hcp"},
	} {
		bj := filepath.Join(t.TempDir(), "bad.json")
		args := append([]string{"dmri", "crossing", "--model", "b3s-brain", "--voxels", "1", "--json", bj}, bad...)
		code, _, errs := prism(args...)
		if code == 0 || !strings.Contains(errs, bad[1]) {
			t.Errorf("%v: exit %d, stderr %q", bad, code, errs)
		}
		if _, err := os.Stat(bj); err == nil {
			t.Errorf("%v: wrote %s", bad, bj)
		}
	}
}
