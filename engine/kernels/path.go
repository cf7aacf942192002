package kernels

import (
	"fmt"
	"os"
	"strings"
)

// Kernel paths. With cgo the C kernels are compiled once per instruction set
// and one copy is chosen at start-up from what the CPU reports (the best it
// supports), or forced with the environment variable PRISM_KERNELS; without
// cgo every kernel is the pure-Go reference ("go").
const (
	PathAVX512  = "avx512"  // x86-64-v4: AVX-512 F/BW/DQ/VL/CD
	PathAVX2    = "avx2"    // x86-64-v3: AVX2, FMA, BMI2
	PathGeneric = "generic" // C kernels for the baseline instruction set (SSE2 on x86-64)
	PathGo      = "go"      // pure Go (CGO_ENABLED=0)
)

// PathEnv names the environment variable that forces a kernel path.
const PathEnv = "PRISM_KERNELS"

// allPaths lists the C paths, best first.
var allPaths = []string{PathAVX512, PathAVX2, PathGeneric}

// Path returns the kernel path in use.
func Path() string { return currentPath() }

// Paths returns the paths this binary can run on this CPU, best first.
func Paths() []string { return supportedPaths() }

// SetPath switches every kernel to the named path. It returns an error,
// changing nothing, when the path is unknown or this CPU lacks its
// instructions. It must not be called while kernels run (call it at
// start-up, or between computations in tests and benchmarks).
func SetPath(name string) error { return setPath(name) }

// pathError explains why a path cannot be used.
func pathError(name string) error {
	known := false
	for _, p := range append(allPaths, PathGo) {
		known = known || p == name
	}
	if !known {
		return fmt.Errorf("kernel path %q unknown (known: %s, %s)", name, strings.Join(allPaths, ", "), PathGo)
	}
	if name == PathGo {
		return fmt.Errorf("kernel path %q: this binary was built with cgo; build with CGO_ENABLED=0 for the pure-Go kernels", name)
	}
	if Backend == "go" {
		return fmt.Errorf("kernel path %q: this binary was built without cgo and has only the pure-Go kernels", name)
	}
	return fmt.Errorf("kernel path %q: this CPU (or its operating system) lacks the instructions (supported here: %s)",
		name, strings.Join(supportedPaths(), ", "))
}

// init chooses the best path this CPU supports, then applies PRISM_KERNELS.
// A path that cannot run here ends the program
// with a message before any kernel executes: running on would either
// ignore the user's explicit choice or die of an illegal instruction.
func init() {
	if err := setPath(supportedPaths()[0]); err != nil {
		panic("kernels: " + err.Error()) // unreachable: the first path is supported
	}
	name := strings.TrimSpace(os.Getenv(PathEnv))
	if name == "" {
		return
	}
	if err := setPath(strings.ToLower(name)); err != nil {
		fmt.Fprintf(os.Stderr, "prism: %s=%s: %v\n", PathEnv, name, err)
		os.Exit(2)
	}
}
