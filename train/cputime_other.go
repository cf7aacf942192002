//go:build !unix

package train

import "time"

// processCPUTime is not available on this platform.
func processCPUTime() time.Duration { return 0 }
