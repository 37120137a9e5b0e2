//go:build !unix

package sqlitestore_test

import "time"

// cpuTime is not known here: the benchmarks report no CPU time.
func cpuTime() (time.Duration, bool) { return 0, false }
