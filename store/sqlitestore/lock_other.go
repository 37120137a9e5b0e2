//go:build !unix

package sqlitestore

import "os"

// procLock is a no-op where flock is not available: a Store never knows
// it is alone, so it never recovers at open (Restore still interrupts each
// owner's stale records at its next run).
type procLock struct{}

func lockPath(path string) string { return path + ".lock" }

func openLock(string) (*procLock, bool, error) { return &procLock{}, false, nil }

func (*procLock) exclusive() (bool, error) { return false, nil }

func (*procLock) release() error { return nil }

func (*procLock) close() error { return nil }

// Without flock a Store cannot tell whether another process's instance
// still runs: it knows only its own instances (InstanceAlive reports every
// other instance gone, as before instance locks existed).

func holdInstance(string, string) (*os.File, error) { return nil, nil }

func dropInstance(*os.File) {}

func instanceAlive(string, string) (bool, error) { return false, nil }

func sweepInstances(string) error { return nil }
