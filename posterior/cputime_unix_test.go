//go:build unix

package posterior

import "syscall"

// processCPU is the CPU time (user + system) of all threads of the process
// so far, in seconds, or false if it cannot be read.
func processCPU() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9, true
}
