//go:build !cgo

package kernels

func currentPath() string { return PathGo }

func supportedPaths() []string { return []string{PathGo} }

func setPath(name string) error {
	if name == PathGo {
		return nil
	}
	return pathError(name)
}
