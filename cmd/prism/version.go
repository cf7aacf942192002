package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prismsbi/prism/engine/kernels"
)

func init() {
	register("version", "print the prism version and build information", runVersion)
}

func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	fmt.Fprintf(stdout, "prism %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "kernels: %s (this CPU: %s; %s=PATH forces one)\n", kernels.Path(),
		strings.Join(kernels.Paths(), " "), kernels.PathEnv)
	return nil
}
