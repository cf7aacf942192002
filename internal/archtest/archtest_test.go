package archtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the module root, seen from this package's folder.
const root = "../.."

// TestArchitecture: the imports between the module's packages follow the
// layers of docs/architecture.md. A rename (say of the voxel pipeline
// package) is fixed by renaming it in that document's layer list: this
// test names no package.
func TestArchitecture(t *testing.T) {
	layers, err := ParseLayers(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	imports, err := Imports(root)
	if err != nil {
		t.Fatal(err)
	}
	bad := Check(layers, imports)
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestCheckDetects: the check reports an upward import, a sideways import,
// an undrawn package and a drawn package that is gone, and nothing on a
// clean graph.
func TestCheckDetects(t *testing.T) {
	layers := map[string]int{"a": 0, "b": 1, "c": 1, "d": 2, "gone": 0}
	imports := map[string][]string{
		"a":   {"b"},      // upward
		"b":   {"a", "c"}, // c: sideways
		"c":   {"a"},
		"d":   {"b", "c", "a"},
		"new": {"a"}, // not drawn
	}
	got := strings.Join(Check(layers, imports), "\n")
	for _, want := range []string{"a (layer 0) imports b (layer 1)", "b (layer 1) imports c (layer 1)", "package new is not drawn", "package gone is drawn but does not exist"} {
		if !strings.Contains(got, want) {
			t.Errorf("check output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("%d messages, want 4:\n%s", n, got)
	}
	delete(layers, "gone")
	if bad := Check(layers, map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}); len(bad) != 0 {
		t.Errorf("clean graph: %v", bad)
	}
}

// TestParseLayers: the list is read from the first fenced block after the
// marker; malformed lines and duplicates are errors naming the line.
func TestParseLayers(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "arch.md")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := "# x\n```\nlayer 9: not read\n```\n" + Marker + "\ntext\n```text\nlayer 1: b c # comment\n\nlayer 0: a\n```\n```\nlayer 5: z\n```\n"
	l, err := ParseLayers(write(good))
	if err != nil || len(l) != 3 || l["a"] != 0 || l["b"] != 1 || l["c"] != 1 {
		t.Fatalf("layers %v, err %v", l, err)
	}
	for body, want := range map[string]string{
		Marker + "\n```\nlayer 0: a\nlayer 1: a\n```\n": "arch.md:4: package a is drawn twice",
		Marker + "\n```\nlevel 0: a\n```\n":             "arch.md:3:",
		Marker + "\n```\nlayer x: a\n```\n":             "arch.md:3:",
		"```\nlayer 0: a\n```\n":                        "no \"<!-- archtest: layers -->\" marker",
		Marker + "\n```\nlayer 0: a\n":                  "not closed",
	} {
		if _, err := ParseLayers(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}
