//go:build !unix

package posterior

func processCPU() (float64, bool) { return 0, false }
