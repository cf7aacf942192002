//go:build !unix

package dmri

// ProcessCPUSeconds is the process's CPU time; 0 where it cannot be read.
func ProcessCPUSeconds() float64 { return 0 }
