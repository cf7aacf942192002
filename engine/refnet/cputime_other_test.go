//go:build !unix

package refnet

func processCPU() (float64, bool) { return 0, false }
