package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/prismsbi/prism/internal/atomicfile"
)

// gracefulSignals is the number of SIGINT/SIGTERM signals the running
// command handles itself (stopping after its batch or step and leaving
// resumable state); exitOnSignal acts on the ones after them.
var gracefulSignals atomic.Int32

// exitOnSignal installs the process-wide SIGINT/SIGTERM handler: unless
// the running command handles the signal itself (gracefulSignals), it
// removes the temporary files being written (internal/atomicfile), so
// that no partial output remains, and exits with 128 + the signal number.
func exitOnSignal(stderr io.Writer) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := int32(0)
		for sig := range sigs {
			n++
			if n <= gracefulSignals.Load() {
				continue
			}
			removed := atomicfile.RemovePending()
			fmt.Fprintf(stderr, "\nprism: %v: stopped; removed %d temporary file(s)\n", sig, removed)
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		}
	}()
}

// interruptContext returns a context that is cancelled on the first SIGINT
// or SIGTERM, after printing msg on its own line to stderr, so that a long
// command can finish its current batch and leave resumable state; stop
// releases the signal handler. A second signal stops the process
// (exitOnSignal).
func interruptContext(stderr io.Writer, msg string) (ctx context.Context, stop func()) {
	gracefulSignals.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintln(stderr, "\n"+msg)
			cancel()
		}
	}()
	return ctx, func() {
		gracefulSignals.Store(0)
		signal.Stop(sigs)
		cancel()
	}
}

// stepInterrupt handles SIGINT and SIGTERM for a command that stops
// cleanly between steps (training): the first signal prints msg and
// closes stop (finish the step and checkpoint), the second cancels ctx
// (abort; the last committed checkpoint stays valid). release undoes the
// handler.
func stepInterrupt(stderr io.Writer, msg string) (stop <-chan struct{}, ctx context.Context, release func()) {
	st := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	gracefulSignals.Store(2)
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		fmt.Fprintln(stderr, msg)
		close(st)
		if _, ok := <-sigs; ok {
			cancel()
		}
	}()
	return st, ctx, func() {
		gracefulSignals.Store(0)
		signal.Stop(sigs)
		cancel()
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
