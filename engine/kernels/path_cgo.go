//go:build cgo

package kernels

/*
#include "kernels.h"
*/
import "C"

var pathCodes = map[string]C.int{
	PathAVX512:  C.PK_PATH_AVX512,
	PathAVX2:    C.PK_PATH_AVX2,
	PathGeneric: C.PK_PATH_GENERIC,
}

func currentPath() string {
	c := C.pk_get_path()
	for name, code := range pathCodes {
		if code == c {
			return name
		}
	}
	return PathGeneric
}

func supportedPaths() []string {
	var ps []string
	for _, p := range allPaths {
		if C.pk_cpu_supports(pathCodes[p]) != 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

func setPath(name string) error {
	code, ok := pathCodes[name]
	if !ok || C.pk_set_path(code) == 0 {
		return pathError(name)
	}
	return nil
}
