package sqlitestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// Open creates the schema at SchemaVersion, with its indexes, in WAL mode.
func TestOpenCreatesSchema(t *testing.T) {
	t.Parallel()
	_, path := open(t)
	db := rawDB(t, path)
	var version int
	var mode string
	if err := db.QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if version != sqlitestore.SchemaVersion || mode != "wal" {
		t.Fatalf("user_version %d, journal_mode %q; want %d, wal", version, mode, sqlitestore.SchemaVersion)
	}
	indexes := taskIndexes(t, path)
	want := []string{"tasks_idempotency", "tasks_owner_terminal", "tasks_parent", "tasks_terminal_at", "tasks_waiting"}
	if !slices.Equal(indexes, want) {
		t.Fatalf("indexes %q, want %q", indexes, want)
	}
}

// A database written by a newer version is refused with ErrSchemaTooNew,
// naming both versions, and left byte for byte as it was (not even turned
// to WAL).
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	db := rawDB(t, path)
	execSQL(t, db, "CREATE TABLE tasks (id TEXT PRIMARY KEY, future TEXT)")
	execSQL(t, db, "INSERT INTO tasks VALUES ('task_1', 'kept')")
	execSQL(t, db, fmt.Sprintf("PRAGMA user_version = %d", sqlitestore.SchemaVersion+1))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	s, err := sqlitestore.Open(t.Context(), path)
	if s != nil {
		s.Close()
	}
	wantErr(t, "Open", err, fmt.Sprintf("sqlitestore: database schema is newer than this code: database schema version %d, this code knows up to %d", sqlitestore.SchemaVersion+1, sqlitestore.SchemaVersion), sqlitestore.ErrSchemaTooNew)

	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("Open changed a database it refused")
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open left a WAL file: %v", err)
	}
}

// Bad options and paths are clear errors; a file that is not a database is
// refused and left alone.
func TestOpenRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	content := bytes.Repeat([]byte("not a database\n"), 400)
	if err := os.WriteFile(junk, content, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ok.db")
	for _, tc := range []struct {
		name string
		path string
		opts []sqlitestore.Option
		text string
	}{
		{"empty path", "", nil, "sqlitestore: Open: empty path"},
		{"question mark", "a?mode=ro", nil, `sqlitestore: Open: path "a?mode=ro" contains '?'`},
		{"max batch", file, []sqlitestore.Option{sqlitestore.WithMaxBatch(0)}, "sqlitestore: WithMaxBatch(0): want at least 1"},
		{"batch delay", file, []sqlitestore.Option{sqlitestore.WithBatchDelay(-time.Second)}, "sqlitestore: WithBatchDelay(-1s): negative"},
		{"busy timeout", file, []sqlitestore.Option{sqlitestore.WithBusyTimeout(-time.Second)}, "sqlitestore: WithBusyTimeout(-1s): negative"},
		{"not a database", junk, nil, "sqlitestore: open " + junk + ": sqlitestore: read schema version: file is not a database (26)"},
	} {
		s, err := sqlitestore.Open(t.Context(), tc.path, tc.opts...)
		if s != nil {
			s.Close()
		}
		wantErr(t, tc.name, err, tc.text)
	}
	if got, _ := os.ReadFile(junk); !bytes.Equal(got, content) {
		t.Fatal("Open changed a file that is not a database")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open with a bad option created the file: %v", err)
	}
}

// ":memory:" is a private database that works like a file until Close.
func TestOpenMemory(t *testing.T) {
	t.Parallel()
	s := openAt(t, ":memory:")
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusCompleted)))
	for m, err := range s.List(t.Context(), "a") {
		if err != nil {
			t.Fatal(err)
		}
		// The loop body may use the store: List has read everything.
		commit(t, s, "a", store.UpsertAction(rec("a", 3, bgtype.StatusQueued)))
		get(t, s, m.ID)
	}
	wantIDs(t, "List", ids(t, s, "a"), idsOf("a", 1, 2, 3))
}
