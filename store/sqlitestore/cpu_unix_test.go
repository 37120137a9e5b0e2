//go:build unix

package sqlitestore_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used so far,
// and whether it is known. A benchmark reports it per op: on a loaded
// machine it moves less than the wall time does.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
