//go:build !unix

package sqlitestore

// procLock is a no-op where flock is not available: a Store never knows
// it is alone, so it never recovers at open (Restore still interrupts each
// owner's stale records at its next run).
type procLock struct{}

func lockPath(path string) string { return path + ".lock" }

func openLock(string) (*procLock, bool, error) { return &procLock{}, false, nil }

func (*procLock) exclusive() (bool, error) { return false, nil }

func (*procLock) shared() error { return nil }

func (*procLock) close() error { return nil }
