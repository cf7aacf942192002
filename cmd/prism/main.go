// Command prism is the command-line front end of the prism toolkit for
// amortized simulation-based model inference. It only parses flags, reports
// progress and prints; the work is done by the library packages.
//
// Usage:
//
//	prism <command> [flags]
//
// Run `prism help` for the list of commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
)

// command is one sub-command of prism. Each lives in its own file and adds
// itself to commands in an init function.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("prism: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

// main runs the command line. Setting PRISM_CPUPROFILE=FILE writes a CPU
// profile of the whole command to FILE (for `go tool pprof`; see
// docs/benchmarks.md).
func main() {
	exitOnSignal(os.Stderr)
	if path := os.Getenv("PRISM_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "prism: PRISM_CPUPROFILE: %v\n", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "prism: PRISM_CPUPROFILE: %v\n", err)
			os.Exit(1)
		}
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "prism: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// Library errors of package dmri's commands start with "dmri: "
		// already; print "prism dmri: …" once, not "prism dmri: dmri: …".
		msg := strings.TrimPrefix(err.Error(), args[0]+": ")
		fmt.Fprintf(stderr, "prism %s: %s\n", args[0], msg)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "prism: amortized simulation-based model inference")
	fmt.Fprintln(w, "\nUsage: prism <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `prism <command> -h` for the flags of a command.")
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("prism "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: prism %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}
