//go:build unix

package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// procLock is the advisory lock (flock) on the file next to the database
// that tells a live process from a gone one: every open Store holds it
// shared for as long as it is open; the kernel drops it when the process
// dies, however it dies. A Store that can take it exclusive is the only
// one open, so every record left live in the file is a gone process's.
type procLock struct{ f *os.File }

// lockPath is the lock file of the database at path.
func lockPath(path string) string { return path + ".lock" }

// openLock opens the lock file of path and tries to take it exclusive; it
// reports whether it did. Without it, it waits for the shared lock.
func openLock(path string) (*procLock, bool, error) {
	f, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: lock file: %w", err)
	}
	l := &procLock{f: f}
	alone, err := l.exclusive()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return l, alone, nil
}

// exclusive tries to hold the lock exclusive, without waiting, and reports
// whether it does; when another Store holds it, it holds it shared.
func (l *procLock) exclusive() (bool, error) {
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return false, fmt.Errorf("sqlitestore: lock file: %w", err)
	}
	return false, l.shared()
}

// shared holds the lock shared, waiting for an exclusive holder to let go
// (a Store that recovers at open, which takes a moment).
func (l *procLock) shared() error {
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return fmt.Errorf("sqlitestore: lock file: %w", err)
			}
			return nil
		}
	}
}

// close lets the lock go.
func (l *procLock) close() error { return l.f.Close() }
