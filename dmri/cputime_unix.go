//go:build unix

package dmri

import "syscall"

// ProcessCPUSeconds is the user + system CPU time of the process so far
// (all threads), in seconds, or 0 if it cannot be read. Wall-clock times
// on a shared machine depend on the load; CPU time per voxel does not.
func ProcessCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
