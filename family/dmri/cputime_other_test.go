//go:build !unix

package dmri

func processCPU() (float64, bool) { return 0, false }
