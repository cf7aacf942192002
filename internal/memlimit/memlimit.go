// Package memlimit checks, before a command allocates, that a size the
// user asked for (a number of samples, a batch size) fits in the memory
// the machine has available (or, for a file, in the free disk space), and
// otherwise says which value would fit.
//
// Available memory is MemAvailable of /proc/meminfo, or the room left
// under a cgroup v2 limit (memory.max − memory.current) when that is
// smaller. A command may use Budget of it: the rest is left for the
// estimate's error, the Go runtime's overhead and other processes.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Budget is the fraction of the available memory a size may take.
const Budget = 0.8

// Available returns the memory this process can still allocate, in bytes.
// Where it cannot be read (not Linux), it returns +Inf: the checks pass.
func Available() float64 {
	avail := math.Inf(1)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					avail = kb * 1024
				}
			}
		}
	}
	limit, err1 := readNumber("/sys/fs/cgroup/memory.max")
	used, err2 := readNumber("/sys/fs/cgroup/memory.current")
	if err1 == nil && err2 == nil && limit-used < avail {
		avail = math.Max(0, limit-used)
	}
	return avail
}

// readNumber reads a file holding one number ("max" is an error).
func readNumber(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}

// Size formats a byte count for messages ("1.5 GB").
func Size(b float64) string {
	switch {
	case math.IsInf(b, 1):
		return "unlimited"
	case b >= 1e12:
		return fmt.Sprintf("%.3g TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.3g GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.3g MB", b/1e6)
	}
	return fmt.Sprintf("%.3g kB", b/1e3)
}

// Check returns nil when a command needing fixed + perUnit·n bytes fits in
// Budget of avail; otherwise an error naming what (a flag or key and its
// value n), the estimate, the available memory and the largest n that fits
// (or that none does). avail is normally Available(); tests pass their own.
func Check(what string, n int64, fixed, perUnit, avail float64) error {
	need := fixed + perUnit*float64(n)
	room := Budget * avail
	if need <= room {
		return nil
	}
	largest := math.Floor((room - fixed) / perUnit)
	fit := "no value fits: free memory or use a smaller input"
	if largest >= 1 {
		fit = fmt.Sprintf("the largest value that fits is about %d", int64(largest))
	}
	return fmt.Errorf("%s %d needs about %s of memory (estimate: %s per unit + %s), but %s is available (%.0f%% of it usable); %s",
		what, n, Size(need), Size(perUnit), Size(fixed), Size(avail), 100*Budget, fit)
}

// FreeDisk returns the bytes an unprivileged process can still write on
// the file system holding dir (+Inf where it cannot be read).
func FreeDisk(dir string) float64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return math.Inf(1)
	}
	return float64(st.Bavail) * float64(st.Bsize)
}

// CheckDisk is Check for a file of fixed + perUnit·n bytes written into
// dir: the whole of FreeDisk(dir) minus 1 % may be used.
func CheckDisk(what string, n int64, fixed, perUnit float64, dir string) error {
	free := FreeDisk(dir)
	need := fixed + perUnit*float64(n)
	if need <= 0.99*free {
		return nil
	}
	largest := math.Floor((0.99*free - fixed) / perUnit)
	fit := "no value fits"
	if largest >= 1 {
		fit = fmt.Sprintf("the largest value that fits is about %d", int64(largest))
	}
	return fmt.Errorf("%s %d needs about %s of disk space in %s (estimate: %s per unit), but %s is free; %s", what, n, Size(need), dir, Size(perUnit), Size(free), fit)
}
