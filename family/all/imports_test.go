package all

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// knownExceptions are the non-test packages outside family/ that still
// name a concrete family, each with the reason; the test fails when one
// is added, and when one is resolved (so the list only shrinks).
var knownExceptions = map[string]string{}

// TestOnlyFamilyPackagesNameFamilies: no non-test Go file outside family/
// imports a concrete family package (family/lingauss, family/symbolic,
// family/dmri, family/spec) — programs link them through family/all, and
// everything else works with the family.Family interface — apart from the
// listed exceptions.
func TestOnlyFamilyPackagesNameFamilies(t *testing.T) {
	const module = "github.com/prismsbi/prism/"
	concrete := map[string]bool{}
	for _, f := range []string{"lingauss", "symbolic", "dmri", "spec"} {
		concrete[module+"family/"+f] = true
	}
	root := "../.."
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "family" || rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "examples" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !concrete[p] {
				continue
			}
			if want, ok := knownExceptions[rel]; ok && module+want == p {
				seen[rel] = true
				continue
			}
			t.Errorf("%s imports %s: only family/... (and family/all for registration) may name a concrete family", rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range knownExceptions {
		if !seen[rel] {
			t.Errorf("%s no longer imports a concrete family: remove it from knownExceptions", rel)
		}
	}
}
