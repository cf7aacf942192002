//go:build !unix

package network

func processCPU() (float64, bool) { return 0, false }
