//go:build unix

package sqlitestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// procLock is the advisory lock (flock) on the file next to the database
// that tells a live process from a gone one: every open Store holds it
// shared for as long as it is open; the kernel drops it when the process
// dies, however it dies. A Store that can take it exclusive is the only
// one open, so every record left live in the file is a gone process's.
//
// flock converts a lock in place: a shared lock that fails to become
// exclusive is gone, until it is taken again. So that no Store can find
// itself alone in that gap, every try for the exclusive lock (and the
// shared lock taken again after it) is made holding a second lock, the
// upgrade lock, exclusive: while one Store tries, no other does.
type procLock struct {
	f       *os.File // the lock file, held shared while open
	upgrade *os.File // the upgrade lock's file
}

// lockPath is the lock file of the database at path.
func lockPath(path string) string { return path + ".lock" }

// upgradePath is the upgrade lock's file of the database at path.
func upgradePath(path string) string { return path + ".lock.upgrade" }

// openLock opens the lock files of path and tries to take the lock
// exclusive; it reports whether it did. When it did, it holds the upgrade
// lock too, until release; otherwise it holds the lock shared.
func openLock(path string) (*procLock, bool, error) {
	f, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: lock file: %w", err)
	}
	u, err := os.OpenFile(upgradePath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("sqlitestore: lock file: %w", err)
	}
	l := &procLock{f: f, upgrade: u}
	alone, err := l.exclusive()
	if err != nil {
		l.close()
		return nil, false, err
	}
	return l, alone, nil
}

// exclusive tries to hold the lock exclusive and reports whether it does.
// It waits for the upgrade lock (another Store's try, or its recovery),
// never for the lock itself. When it does not get it, it holds the lock
// shared, as before the call, and lets the upgrade lock go; when it does,
// it keeps the upgrade lock until release.
func (l *procLock) exclusive() (bool, error) {
	if err := flock(l.upgrade, syscall.LOCK_EX); err != nil {
		return false, err
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		err = fmt.Errorf("sqlitestore: lock file: %w", err)
	} else {
		// Another Store holds it shared. Our shared lock is gone with the
		// failed conversion: take it again before another Store may try.
		// Nobody holds it exclusive (that takes the upgrade lock), so this
		// does not wait.
		err = flock(l.f, syscall.LOCK_SH)
	}
	if uerr := flock(l.upgrade, syscall.LOCK_UN); err == nil {
		err = uerr
	}
	return false, err
}

// release turns an exclusive lock (exclusive returned true) back into a
// shared one and lets the upgrade lock go.
func (l *procLock) release() error {
	err := flock(l.f, syscall.LOCK_SH)
	if uerr := flock(l.upgrade, syscall.LOCK_UN); err == nil {
		err = uerr
	}
	return err
}

// close lets the locks go.
func (l *procLock) close() error {
	err := unlockClose(l.f)
	if uerr := unlockClose(l.upgrade); err == nil {
		err = uerr
	}
	return err
}

// unlockClose lets f's lock go, then closes f. Closing alone is not
// enough: a child process this process forks holds a copy of every
// descriptor until it execs, and a flock lives while any copy of its
// descriptor does, so another Store could see the lock still held (and
// the instance alive, or itself not alone) after Close returned. An
// explicit unlock ends the lock for every copy at once.
func unlockClose(f *os.File) error {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // on error, Close still lets it go once copies are gone
	return f.Close()
}

// flock applies how to f's lock, waiting as long as it takes.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return fmt.Errorf("sqlitestore: lock file: %w", err)
			}
			return nil
		}
	}
}

// Instance locks: each open Store holds, shared, a lock file per runtime
// instance that committed a live record through it, in a directory next
// to the database, so that another process can tell whether the instance
// that wrote a record still runs. A file is removed by whoever finds it
// free (holding it exclusive); a holder checks, once it holds a file's
// lock, that the file it locked is still the one at that name.

// instanceDir is the directory of the instance locks of the database at
// path.
func instanceDir(path string) string { return path + ".instances" }

// instanceFile is the lock file of instance: a hash, so that any id makes
// a short, plain file name.
func instanceFile(path, instance string) string {
	sum := sha256.Sum256([]byte(instance))
	return filepath.Join(instanceDir(path), hex.EncodeToString(sum[:16])+".lock")
}

// holdInstance takes instance's lock shared and returns its file, which
// holds it until it is closed.
func holdInstance(path, instance string) (*os.File, error) {
	if err := os.MkdirAll(instanceDir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlitestore: instance lock: %w", err)
	}
	name := instanceFile(path, instance)
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: instance lock: %w", err)
		}
		if err := flock(f, syscall.LOCK_SH); err != nil {
			f.Close()
			return nil, err
		}
		if same, err := isFileAt(f, name); same || err != nil {
			if err != nil {
				unlockClose(f)
				return nil, err
			}
			return f, nil
		}
		unlockClose(f) // it was removed meanwhile: take the new one
	}
}

// dropInstance lets an instance lock that holdInstance took go, and
// removes its file when no other Store holds it.
func dropInstance(f *os.File) {
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		os.Remove(f.Name())
	}
	unlockClose(f)
}

// instanceAlive reports whether a Store, in any process, holds instance's
// lock. A free lock's file is removed.
func instanceAlive(path, instance string) (bool, error) {
	return probeInstance(instanceFile(path, instance))
}

// probeInstance reports whether the instance lock file name is held, and
// removes it when it is not.
func probeInstance(name string) (bool, error) {
	for {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("sqlitestore: instance lock: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return true, nil
		case errors.Is(err, syscall.EINTR):
			f.Close()
			continue
		case err != nil:
			f.Close()
			return false, fmt.Errorf("sqlitestore: instance lock: %w", err)
		}
		same, err := isFileAt(f, name)
		if err == nil && same {
			os.Remove(name) // its process is gone
		}
		unlockClose(f)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
		// Replaced meanwhile: look at the new one.
	}
}

// sweepInstances removes the instance lock files that no Store holds: for
// a Store that is alone, the files that gone processes left.
func sweepInstances(path string) error {
	entries, err := os.ReadDir(instanceDir(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: instance locks: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if _, err := probeInstance(filepath.Join(instanceDir(path), e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isFileAt reports whether f is the file at name (not one removed or
// replaced since f was opened).
func isFileAt(f *os.File, name string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("sqlitestore: instance lock: %w", err)
	}
	ni, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlitestore: instance lock: %w", err)
	}
	return os.SameFile(fi, ni), nil
}
