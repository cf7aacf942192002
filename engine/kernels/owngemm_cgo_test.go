//go:build cgo

package kernels

// setOwnGemm switches the package's own sgemm kernel on or off and
// returns the previous setting.
func setOwnGemm(on bool) bool {
	prev := ownGemm
	ownGemm = on
	return prev
}
