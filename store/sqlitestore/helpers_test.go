package sqlitestore_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// base is the creation time of the first test record; records made by rec
// are a second apart, in the order of their numbers.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openAt opens a Store on path and closes it at the end of the test.
func openAt(t testing.TB, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// open opens a Store on a new file and returns it with the file's path.
func open(t testing.TB, opts ...sqlitestore.Option) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	return openAt(t, path, opts...), path
}

// rec is record n of owner: task_<owner>_<n>, created n seconds after base.
func rec(owner string, n int, st bgtype.Status) bgtype.TaskMeta {
	m := bgtype.TaskMeta{
		ID:        fmt.Sprintf("task_%s_%02d", owner, n),
		Owner:     owner,
		Type:      bgtype.TypeTask,
		Status:    st,
		CreatedAt: base.Add(time.Duration(n) * time.Second),
		Instance:  "inst-a",
	}
	if st != bgtype.StatusQueued {
		m.StartedAt = m.CreatedAt.Add(time.Millisecond)
	}
	if st.IsTerminal() {
		m.FinishedAt = m.CreatedAt.Add(2 * time.Millisecond)
	}
	if st == bgtype.StatusCompleted {
		m.Result = json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
	}
	return m
}

func commit(t testing.TB, s store.Store, owner string, actions ...store.Action) {
	t.Helper()
	if err := s.Commit(t.Context(), owner, actions...); err != nil {
		t.Fatalf("Commit(%s): %v", owner, err)
	}
}

func get(t testing.TB, s store.Store, id string) bgtype.TaskMeta {
	t.Helper()
	m, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return m
}

// ids lists the owner's records (all statuses given, or all) and returns
// their ids, failing on any error.
func ids(t testing.TB, s store.Store, owner string, statuses ...bgtype.Status) []string {
	t.Helper()
	var out []string
	for m, err := range s.List(t.Context(), owner, statuses...) {
		if err != nil {
			t.Fatalf("List(%s): %v", owner, err)
		}
		out = append(out, m.ID)
	}
	return out
}

func idsOf(owner string, ns ...int) []string {
	var out []string
	for _, n := range ns {
		out = append(out, rec(owner, n, bgtype.StatusRunning).ID)
	}
	return out
}

func wantIDs(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// rawDB opens a second connection to the file, as another program would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dbAtVersion makes the file at path a database of schema version v, as
// this code's migrations 1 to v leave it, and returns a connection to it:
// the start of a test of the step after v.
func dbAtVersion(t testing.TB, path string, v int) *sql.DB {
	t.Helper()
	db := rawDB(t, path)
	for i := 1; i <= v; i++ {
		execSQL(t, db, sqlitestore.MigrationSQL(i))
	}
	execSQL(t, db, fmt.Sprintf("PRAGMA user_version = %d", v))
	return db
}

func execSQL(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// wantErr checks err's exact text and that it matches every target.
func wantErr(t testing.TB, what string, err error, text string, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %q", what, text)
	}
	if err.Error() != text {
		t.Fatalf("%s: error %q, want %q", what, err, text)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: error %q does not match %v", what, err, target)
		}
	}
}
