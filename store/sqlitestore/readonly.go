package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/bgtask/bgtask/bgtype"
)

// ErrSchemaTooOld is returned by OpenReadOnly when the database was written
// by an older version of this package: its schema version is lower than
// SchemaVersion. Open by the application migrates it; OpenReadOnly never
// does.
var ErrSchemaTooOld = errors.New("sqlitestore: database schema is older than this code")

// ReadOnly reads a Store's database file across owners, for an operator's
// tool such as an inspector, while the application that owns the file may
// be running. It never migrates, starts nothing in the background and
// writes nothing, except a cancel request (RequestCancel), which it writes
// on a connection of its own.
//
// It is not a store.Store: it cannot be given to a Manager, and no owner's
// view reaches it. Use OpenReadOnly; the zero value is not usable. Methods
// are safe for concurrent use and return ctx's error when ctx ends first.
// After Close they return ErrClosed.
type ReadOnly struct {
	path   string
	cfg    config
	db     *sql.DB
	closed atomic.Bool
}

// OpenReadOnly opens the existing SQLite database at path for reading only
// (mode=ro and query_only). A path that does not exist is an error naming
// it, and no file is created. A database whose schema version is newer
// than this code's gives an error matching ErrSchemaTooNew; an older one
// an error matching ErrSchemaTooOld that says to run the application once,
// so that it migrates the file. Only WithBusyTimeout and WithPollInterval
// of the options matter here. ctx bounds the opening only.
func OpenReadOnly(ctx context.Context, path string, opts ...Option) (*ReadOnly, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	switch {
	case path == "" || path == ":memory:":
		return nil, fmt.Errorf("sqlitestore: OpenReadOnly: want a database file, got %q", path)
	case strings.ContainsAny(path, "?#"):
		return nil, fmt.Errorf("sqlitestore: OpenReadOnly: path %q contains '?' or '#'", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("sqlitestore: open %s: is a directory", path)
	}
	dsn := fmt.Sprintf("%s?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(%d)", fileURI(path), cfg.busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(2)
	v, err := userVersion(ctx, db)
	if err == nil {
		err = checkVersion(ctx, db, path, v)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &ReadOnly{path: path, cfg: cfg, db: db}, nil
}

// checkVersion refuses a schema other than SchemaVersion. A file that is
// not a database at all fails the version read before it gets here.
func checkVersion(ctx context.Context, db *sql.DB, path string, v int) error {
	switch {
	case v > SchemaVersion:
		return fmt.Errorf("sqlitestore: open %s: %w", path, tooNew(v))
	case v == 0:
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
			return fmt.Errorf("sqlitestore: open %s: %w", path, err)
		}
		return fmt.Errorf("sqlitestore: open %s: %w: it holds no task schema (%d objects); run the application once to create it", path, ErrSchemaTooOld, n)
	case v < SchemaVersion:
		return fmt.Errorf("sqlitestore: open %s: %w: schema version %d, this code reads %d; run the application once to migrate it", path, ErrSchemaTooOld, v, SchemaVersion)
	}
	return nil
}

// fileURI makes path a file: URI for the driver, so that mode=ro applies.
func fileURI(path string) string {
	return "file:" + strings.ReplaceAll(path, "%", "%25")
}

// Close closes the database. It is idempotent.
func (r *ReadOnly) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("sqlitestore: close: %w", err)
	}
	return nil
}

// err turns a failure of a closed handle into ErrClosed.
func (r *ReadOnly) err(err error) error {
	if err != nil && r.closed.Load() {
		return ErrClosed
	}
	return err
}

// Get returns one task's record, whoever owns it, or an error matching
// bgtype.ErrNotFound. A corrupt row gives an error matching
// bgtype.ErrCorrupt that names the task.
func (r *ReadOnly) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	var rw row
	err := rw.scan(r.db.QueryRowContext(ctx, "SELECT "+columns+" FROM tasks WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
	}
	if err != nil {
		return bgtype.TaskMeta{}, r.err(err)
	}
	return rw.decode()
}
