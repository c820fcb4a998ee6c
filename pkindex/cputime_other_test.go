//go:build !unix

package pkindex

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
