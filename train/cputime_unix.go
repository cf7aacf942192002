//go:build unix

package train

import (
	"syscall"
	"time"
)

// processCPUTime is the user + system CPU time of the process so far (all
// threads, including OpenBLAS's), or 0 if it cannot be read.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
