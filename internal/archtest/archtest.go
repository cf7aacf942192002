// Package archtest checks that the imports between prism's packages
// follow the layers drawn in docs/architecture.md: every package of the
// module is drawn on exactly one layer, and a package imports only
// packages on lower layers. The check is its test; the package exports
// the parser and the import walk it uses.
package archtest

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Marker opens the machine-readable layer list in docs/architecture.md: the
// first fenced block after the line holding it.
const Marker = "<!-- archtest: layers -->"

// ParseLayers reads the layer list of the architecture document at path:
// lines "layer N: pkg pkg …" (N a non-negative integer; packages as paths
// relative to the module root) inside the first fenced block after Marker;
// a "#" starts a comment. It returns each package's layer.
func ParseLayers(path string) (map[string]int, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	layers := map[string]int{}
	sc := bufio.NewScanner(fh)
	seen, inBlock, done := false, false, false
	for line := 1; sc.Scan() && !done; line++ {
		s := strings.TrimSpace(sc.Text())
		switch {
		case !seen:
			seen = strings.Contains(s, Marker)
			continue
		case strings.HasPrefix(s, "```"):
			done = inBlock
			inBlock = true
			continue
		case !inBlock:
			continue
		}
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			continue
		}
		head, pkgs, ok := strings.Cut(s, ":")
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "layer")))
		if !ok || !strings.HasPrefix(head, "layer") || err != nil || n < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not \"layer N: package …\"", path, line, s)
		}
		for _, p := range strings.Fields(pkgs) {
			if l, dup := layers[p]; dup {
				return nil, fmt.Errorf("%s:%d: package %s is drawn twice (layers %d and %d)", path, line, p, l, n)
			}
			layers[p] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case !seen:
		return nil, fmt.Errorf("%s: no %q marker", path, Marker)
	case !done:
		return nil, fmt.Errorf("%s: the fenced block after %q is missing or not closed", path, Marker)
	case len(layers) == 0:
		return nil, fmt.Errorf("%s: the layer list is empty", path)
	}
	return layers, nil
}

// Imports walks the module rooted at root (the folder of go.mod) and
// returns, for every package with non-test Go files buildable here, its
// imports of other packages of the module (paths relative to root; the
// root package is "."). testdata folders and folders whose names start
// with "." or "_" are skipped, as the go command does.
func Imports(root string) (map[string][]string, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n := d.Name(); dir != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		if dir != root {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		p, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return fmt.Errorf("%s: %w", dir, err)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		var deps []string
		for _, imp := range p.Imports {
			if imp == mod {
				deps = append(deps, ".")
			} else if r, ok := strings.CutPrefix(imp, mod+"/"); ok {
				deps = append(deps, r)
			}
		}
		out[rel] = deps
		return nil
	})
	return out, err
}

// modulePath reads the module directive of a go.mod file.
func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module directive", gomod)
}

// Check compares the imports with the layers and returns one message per
// violation: a package not drawn, a drawn package that does not exist, an
// import of a package on the same or a higher layer.
func Check(layers map[string]int, imports map[string][]string) []string {
	var bad []string
	for p, deps := range imports {
		lp, ok := layers[p]
		if !ok {
			bad = append(bad, fmt.Sprintf("package %s is not drawn in the layer list", p))
			continue
		}
		for _, d := range deps {
			ld, ok := layers[d]
			switch {
			case !ok:
				// Reported as undrawn on its own.
			case ld >= lp:
				bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must go to a lower layer", p, lp, d, ld))
			}
		}
	}
	for p := range layers {
		if _, ok := imports[p]; !ok {
			bad = append(bad, fmt.Sprintf("package %s is drawn but does not exist (renamed or removed?)", p))
		}
	}
	return bad
}
