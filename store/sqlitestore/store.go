package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Store is a store.Store that keeps task metadata in one SQLite database
// file, for one process: records survive a restart or a crash of that
// process, and Manager.Restore then interrupts what was left running.
//
// Writes go through one writer goroutine that merges concurrent Commit
// calls into one transaction (group commit); reads run on their own
// connections, concurrently with writes (WAL mode).
//
// Use Open; the zero value is not usable. Methods are safe for concurrent
// use; a method whose ctx ends returns ctx's error (see Commit for what is
// then written). Close stops the writer and closes the database; later
// calls return ErrClosed. Close the Store after the Manager's Shutdown, so
// that the tasks' last records are written. No caller code runs on the
// writer goroutine. Do not copy a Store.
//
// Several processes may open one file, each with its own Manager; none
// touches what a live process holds (see the package doc). It is not a
// store.SharedStore, though: a Manager reaches only the tasks it runs
// (use pgstore for one task registry across processes).
type Store struct {
	cfg    config
	db     *sql.DB
	st     stmts
	memory bool

	mu     sync.Mutex // guards the fields below
	closed bool
	queue  []*request // Commit calls waiting for the writer, in arrival order

	poll   poller        // the cancel request poller of Start
	wake   chan struct{} // capacity 1: the queue grew, or Close was called
	writer sync.WaitGroup
	// The writer's own state.
	nextSeq   int64          // last terminal_seq given out
	terminals map[string]int // owner → number of terminal records, for owners counted so far
	oldestEnd int64          // no terminal_at is older (microseconds), when oldestSet; math.MaxInt64 for none
	oldestSet bool
	cache     rowCache
	reads     atomic.Int64 // the writer's read statements, for tests
	wconn     *sql.Conn    // the writer's connection, taken at its first write; nil for ":memory:"

	// Recovery (recover.go).
	lockMu sync.Mutex          // serialises Recover
	lock   *procLock           // the lock file's lock, held shared while open; nil for ":memory:"
	liveMu sync.Mutex          // guards live and held
	live   map[string]struct{} // runtime instances that committed live records through this Store
	held   []*os.File          // their instance locks, held shared until Close
	path   string              // the database file
}

// Open opens (creating it if needed) the SQLite database at path, brings
// its schema up to SchemaVersion, and returns a Store writing to it. The
// defaults suit most uses: Open(ctx, "tasks.db") is enough.
//
// path is a file name; ":memory:" gives a private in-memory database (one
// connection, so reads wait for writes; gone at Close: for tests and
// examples). A path holding '?' is refused, since the driver would read
// what follows as parameters.
//
// The database is put in WAL mode with synchronous=NORMAL (see
// WithFullSync) and a busy timeout (WithBusyTimeout). A database whose
// schema version is newer than this code's gives an error matching
// ErrSchemaTooNew, and is left as it was. ctx bounds the opening and the
// migration only.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	switch {
	case path == "":
		return nil, errors.New("sqlitestore: Open: empty path")
	case strings.ContainsRune(path, '?'):
		return nil, fmt.Errorf("sqlitestore: Open: path %q contains '?'", path)
	}
	sync := "NORMAL"
	if cfg.fullSync {
		sync = "FULL"
	}
	// busy_timeout and synchronous are per connection, so they go in the
	// DSN that every new connection runs; journal_mode=WAL is a property of
	// the file, set once below, after the version check.
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_txlock=immediate",
		path, cfg.busyTimeout.Milliseconds(), sync)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	s := &Store{cfg: cfg, db: db, path: path, memory: path == ":memory:", wake: make(chan struct{}, 1), terminals: make(map[string]int), cache: rowCache{rows: make(map[string]bgtype.TaskMeta)}}
	alone := s.memory
	if !s.memory {
		if s.lock, alone, err = openLock(path); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := s.setup(ctx, path); err != nil {
		s.st.close()
		db.Close()
		s.closeLock()
		return nil, err
	}
	if alone && !s.memory && !s.cfg.noRecover {
		// The only Store open: what is live in the file, a gone process
		// left. Written before the writer starts, one transaction a batch.
		n, err := s.recoverStale(ctx, s.writeNow)
		if serr := sweepInstances(path); serr != nil { // the instance locks gone processes left
			s.cfg.logger.Warn("sqlitestore: removing the instance locks of gone processes failed", "err", serr)
		}
		if lerr := s.lock.release(); err == nil {
			err = lerr
		}
		if err != nil && !errors.Is(err, bgtype.ErrCorrupt) {
			s.releaseConn()
			s.st.close()
			db.Close()
			s.closeLock()
			return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
		}
		if err != nil {
			s.cfg.logger.Error("sqlitestore: recovery at open skipped corrupt records", "err", err)
		}
		if n > 0 {
			s.cfg.logger.Info("sqlitestore: interrupted the records a gone process left", "records", n)
		}
	} else if alone && !s.memory {
		if err := s.lock.release(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.writer.Go(s.run)
	return s, nil
}

// closeLock lets the lock file go.
func (s *Store) closeLock() {
	if s.lock != nil {
		s.lock.close()
	}
}

// setup checks the schema version, turns on WAL, migrates and prepares the
// statements.
func (s *Store) setup(ctx context.Context, path string) error {
	conns := max(4, runtime.GOMAXPROCS(0)) // one writer, the rest for reads
	if s.memory {
		conns = 1 // every connection to ":memory:" is a database of its own
	}
	s.db.SetMaxOpenConns(conns)
	s.db.SetMaxIdleConns(conns)
	v, err := userVersion(ctx, s.db)
	if err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	if v > SchemaVersion {
		return tooNew(v) // before anything writes to the file
	}
	if !s.memory {
		var mode string
		if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
			return fmt.Errorf("sqlitestore: open %s: set WAL mode: %w", path, err)
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("sqlitestore: open %s: journal mode is %q, want wal", path, mode)
		}
	}
	if err := migrate(ctx, s.db, s.cfg.logger); err != nil {
		return err
	}
	if err := s.db.QueryRowContext(ctx, "SELECT coalesce(max(terminal_seq), 0) FROM tasks").Scan(&s.nextSeq); err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	return s.st.prepare(ctx, s.db)
}

// Close waits for the Commit calls already accepted to be written, stops
// the writer goroutine and closes the database. Later calls of any method
// return ErrClosed. Close is idempotent: a second call returns nil.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.poll.halt()
	s.signal()
	s.writer.Wait()
	s.releaseConn()
	s.st.close()
	err := s.db.Close()
	s.closeLock() // after the database: no write of this Store can follow
	s.dropInstances()
	if err != nil {
		return fmt.Errorf("sqlitestore: close: %w", err)
	}
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// readErr turns the error of a read that raced with Close into ErrClosed.
func (s *Store) readErr(err error) error {
	if s.isClosed() {
		return ErrClosed
	}
	return err
}

var _ store.Store = (*Store)(nil)

// beginWrite starts a write transaction on the writer's own connection, so
// that PRAGMA data_version there tells the writer's cache whether another
// connection wrote. ":memory:" has one connection, shared with reads: its
// transactions take it from the pool each time.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if s.memory {
		return s.db.BeginTx(ctx, nil)
	}
	if s.wconn == nil {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		s.wconn = c
	}
	return s.wconn.BeginTx(ctx, nil)
}

// releaseConn returns the writer's connection, once the writer is done.
func (s *Store) releaseConn() {
	if s.wconn != nil {
		s.wconn.Close()
		s.wconn = nil
	}
}
