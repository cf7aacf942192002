// Package cputime reads the CPU time the process has used (user + system,
// all threads, including those of OpenBLAS). Benchmarks and run reports
// quote it beside wall time because it does not depend on what else the
// machine is doing.
package cputime

import "time"

// Duration returns the process's CPU time so far, or 0 where it cannot be read.
func Duration() time.Duration {
	d, _ := read()
	return d
}

// Seconds returns the process's CPU time in seconds and whether it could be read.
func Seconds() (float64, bool) {
	d, ok := read()
	return d.Seconds(), ok
}
