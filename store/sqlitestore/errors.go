package sqlitestore

import (
	"errors"

	"github.com/bgtask/bgtask/bgtype"
)

// ErrClosed is returned by every method of a Store after Close. It also
// matches [bgtype.ErrClosed] with [errors.Is], so a caller that only knows
// the core package's sentinel recognises it.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string { return "sqlitestore: store closed" }

// Is reports whether target is bgtype.ErrClosed.
func (closedError) Is(target error) bool { return target == bgtype.ErrClosed }

// ErrSchemaTooNew is returned by Open when the database was written by a
// newer version of this package: its schema version is higher than
// SchemaVersion. Open then leaves the database as it found it.
var ErrSchemaTooNew = errors.New("sqlitestore: database schema is newer than this code")
