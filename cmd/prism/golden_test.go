package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prismsbi/prism/engine/kernels"
	"github.com/prismsbi/prism/internal/dirlock"
)

// Golden tests: the fixed-seed outputs of `prism demo --quick` (hashed in
// TestDemoQuick, which runs it anyway), `prism select` and `prism sample`
// are compared byte for byte, by SHA-256, with hashes recorded from the
// code before the restructuring of issue 23. Any difference is a change of
// behaviour; a deliberate one is re-recorded with
//
//	go test ./cmd/prism -run 'Golden|DemoQuick' -update-golden
//
// once per kernel path (PRISM_KERNELS=avx512, avx2, generic, and a
// CGO_ENABLED=0 build for the pure-Go path "go"): the paths differ in the
// last bits of float32 (docs/engine.md), so each has its own set, in
// testdata/golden/<path>/<name>.sha256.
var updateGolden = flag.Bool("update-golden", false, "record the golden hashes of the active kernel path instead of checking them")

// goldenWorkers is the GOMAXPROCS under which the golden outputs are
// recorded and checked. The results no longer depend on it (session 10:
// every output map and sample file is the same bit for bit at 1 and 2
// workers, docs/validation.md "Golden outputs…"), but the demo's
// summary.json and dmri/run.json record the worker count ("workers"), so
// their hashes do.
const goldenWorkers = 2

// pinWorkers sets GOMAXPROCS to goldenWorkers for the rest of the test.
func pinWorkers(t *testing.T) {
	t.Helper()
	old := runtime.GOMAXPROCS(goldenWorkers)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// volatileKeys are JSON keys whose values are not functions of the inputs
// and seeds: clocks, durations, the Go release. normalizeJSON drops them.
var volatileKeys = map[string]bool{
	"started": true, "stages": true, "total": true, "timings_s": true,
	"voxels_per_second": true, "go_version": true, "version": true, "seconds": true,
}

// normalizeJSON returns the JSON document b without volatileKeys (at any
// depth) and with the directory dir replaced by "$OUT" in every string,
// re-encoded with sorted keys.
func normalizeJSON(b []byte, dir string) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if volatileKeys[k] {
					delete(x, k)
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return strings.ReplaceAll(x, dir, "$OUT")
		}
		return v
	}
	return json.Marshal(walk(v))
}

// goldenHashes hashes every file below dir except those skip names (slash
// paths relative to dir); JSON files are hashed after normalizeJSON.
func goldenHashes(t *testing.T, dir string, skip ...string) map[string]string {
	t.Helper()
	h := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if slices.Contains(skip, rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(rel, ".json") {
			if b, err = normalizeJSON(b, dir); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		h[rel] = sha(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkGolden compares the hashes got with the recorded set name of the
// active kernel path (or records them with -update-golden).
func checkGolden(t *testing.T, name string, got map[string]string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", kernels.Path(), name+".sha256")
	names := make([]string, 0, len(got))
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	if *updateGolden {
		var b bytes.Buffer
		for _, k := range names {
			fmt.Fprintf(&b, "%s  %s\n", got[k], k)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d hashes in %s", len(got), path)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no golden hashes for kernel path %q: %v (record them with -update-golden from a commit whose outputs are right)", kernels.Path(), err)
	}
	want := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		hash, file, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("%s:%d: malformed line %q", path, i+1, line)
		}
		want[file] = hash
	}
	for _, k := range names {
		switch w, ok := want[k]; {
		case !ok:
			t.Errorf("%s: output %s is new (not in %s)", name, k, path)
		case w != got[k]:
			t.Errorf("%s: output %s differs from the golden one (kernel path %s)", name, k, kernels.Path())
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: output %s is no longer written", name, k)
		}
	}
}

// TestGoldenSelectSample: `prism simulate`, `prism select` (discovery, and
// candidates with the likelihood correction) and `prism sample` with fixed
// seeds on the committed lingauss network write the recorded bytes:
// JSON lines on stdout and the PNG figures.
func TestGoldenSelectSample(t *testing.T) {
	pinWorkers(t)
	out := t.TempDir()
	sim := filepath.Join(out, "sim.jsonl")
	cands := allLingaussMasks(t)
	runs := []struct {
		stdout string
		args   []string
	}{
		{"", []string{"simulate", "--family", "lingauss-k6", "--n", "3", "--seed", "8", "--lambda", "0.5", "--out", sim}},
		{"select-discover.jsonl", []string{"select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5",
			"--discover", "50", "--subspace", "4", "--top", "3", "--seed", "5", "--plot", filepath.Join(out, "select-plots")}},
		{"select-candidates.jsonl", []string{"select", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.3",
			"--candidates", cands, "--top", "4", "--seed", "6", "--correct", "is", "--correct-samples", "64"}},
		{"sample.jsonl", []string{"sample", "--checkpoint", testNet, "--from-simulate", sim, "--lambda", "0.5",
			"--models", "100", "--params", "10", "--steps", "8", "--top", "3", "--seed", "3", "--plot", filepath.Join(out, "sample-plots")}},
	}
	for _, r := range runs {
		code, stdout, errs := prism(r.args...)
		if code != 0 {
			t.Fatalf("prism %s: exit %d: %s", strings.Join(r.args, " "), code, errs)
		}
		if r.stdout != "" {
			if err := os.WriteFile(filepath.Join(out, r.stdout), []byte(stdout), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkGolden(t, "select-sample", goldenHashes(t, out))
}

// TestGoldenEval: a small fixed-seed `prism eval` on the committed lingauss
// network writes the recorded bytes (JSON without its durations, CSV
// tables, figures).
func TestGoldenEval(t *testing.T) {
	pinWorkers(t)
	out := t.TempDir()
	code, _, errs := prism("eval", "--checkpoint", testNet, "--n", "24", "--seed", "5", "--out", out,
		"--mask-samples", "32", "--theta-samples", "8", "--ksd-obs", "3", "--is-obs", "3",
		"--is-samples", "8", "--subset", "2", "--pred-obs", "3", "--steps", "6", "--class-models", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkGolden(t, "eval", goldenHashes(t, out, dirlock.FileName))
}
