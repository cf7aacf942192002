// Package numpytest lets tests run Python simulators that need numpy (the
// external-simulator examples): it finds a python3 that imports numpy and
// puts it first on PATH for the test.
package numpytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Require makes `python3` on PATH one that imports numpy for the rest of
// the test. Without one the test is skipped, or fails when the
// environment variable PRISM_REQUIRE_NUMPY=1 (set by CI, which installs
// Debian's python3-numpy).
func Require(t testing.TB) {
	t.Helper()
	candidates := []string{"python3", "/usr/bin/python3", "/usr/local/bin/python3"}
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import numpy").Run() != nil {
			continue
		}
		if c != "python3" {
			t.Setenv("PATH", filepath.Dir(path)+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
		return
	}
	if os.Getenv("PRISM_REQUIRE_NUMPY") == "1" {
		t.Fatal("no python3 with numpy found (install python3-numpy); PRISM_REQUIRE_NUMPY=1 forbids skipping")
	}
	t.Skip("no python3 with numpy (install python3-numpy)")
}
