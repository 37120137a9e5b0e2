package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// openRO opens a ReadOnly on path and closes it at the end of the test.
func openRO(t testing.TB, path string) *sqlitestore.ReadOnly {
	t.Helper()
	r, err := sqlitestore.OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatalf("OpenReadOnly(%s): %v", path, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// tableSum is a checksum of every row of the named tables, as another
// program reads them.
func tableSum(t testing.TB, path string, tables ...string) string {
	t.Helper()
	db := rawDB(t, path)
	var out string
	for _, tab := range tables {
		var s string
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) || ':' || coalesce(group_concat(x, '|'), '') FROM (SELECT json_array(*) AS x FROM (SELECT * FROM "+tab+" ORDER BY 1))").Scan(&s); err != nil {
			t.Fatalf("checksum %s: %v", tab, err)
		}
		out += tab + "=" + s + ";"
	}
	return out
}

// OpenReadOnly refuses what it cannot read, with an error that says why,
// and creates no file for a path that does not exist.
func TestOpenReadOnlyErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	_, err := sqlitestore.OpenReadOnly(t.Context(), missing)
	wantErr(t, "missing", err, "sqlitestore: open "+missing+": stat "+missing+": no such file or directory", os.ErrNotExist)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s: %v", missing, err)
	}

	newer := filepath.Join(dir, "newer.db")
	openAt(t, newer).Close()
	execSQL(t, rawDB(t, newer), "PRAGMA user_version = 99")
	_, err = sqlitestore.OpenReadOnly(t.Context(), newer)
	wantErr(t, "newer", err, fmt.Sprintf("sqlitestore: open %s: sqlitestore: database schema is newer than this code: database schema version 99, this code knows up to %d", newer, sqlitestore.SchemaVersion), sqlitestore.ErrSchemaTooNew)

	older := filepath.Join(dir, "older.db")
	openAt(t, older).Close()
	execSQL(t, rawDB(t, older), fmt.Sprintf("PRAGMA user_version = %d", sqlitestore.SchemaVersion-1))
	_, err = sqlitestore.OpenReadOnly(t.Context(), older)
	wantErr(t, "older", err, fmt.Sprintf("sqlitestore: open %s: sqlitestore: database schema is older than this code: schema version %d, this code reads %d; run the application once to migrate it", older, sqlitestore.SchemaVersion-1, sqlitestore.SchemaVersion), sqlitestore.ErrSchemaTooOld)

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = sqlitestore.OpenReadOnly(t.Context(), empty)
	wantErr(t, "empty", err, "sqlitestore: open "+empty+": sqlitestore: database schema is older than this code: it holds no task schema (0 objects); run the application once to create it", sqlitestore.ErrSchemaTooOld)

	_, err = sqlitestore.OpenReadOnly(t.Context(), dir)
	wantErr(t, "dir", err, "sqlitestore: open "+dir+": is a directory")
}

// List reads across owners with each filter, oldest first, over several
// pages, and the handle changes nothing in the file.
func TestReadOnlyList(t *testing.T) {
	defer sqlitestore.SetListPage(2)()
	s, path := open(t)
	a1 := rec("alice", 1, bgtype.StatusRunning)
	a1.Tags = []string{"web"}
	a1.Parent.RunID = "run-1"
	a2 := rec("alice", 2, bgtype.StatusCompleted)
	b3 := rec("bob", 3, bgtype.StatusFailed)
	b3.Tags = []string{"web", "db"}
	b3.Parent.RunID = "run-1"
	b4 := rec("bob", 4, bgtype.StatusAwaitingInput)
	b4.CreatedAt = time.Time{} // no creation time: sorts first
	a5 := rec("alice", 5, bgtype.StatusInterrupted)
	commit(t, s, "alice", store.UpsertAction(a1), store.UpsertAction(a2), store.UpsertAction(a5))
	commit(t, s, "bob", store.UpsertAction(b3), store.UpsertAction(b4))
	before := tableSum(t, path, "tasks", "task_tags", "cancel_requests")
	r := openRO(t, path)
	for _, tc := range []struct {
		name string
		f    sqlitestore.Filter
		want []string
	}{
		{"all", sqlitestore.Filter{}, []string{b4.ID, a1.ID, a2.ID, b3.ID, a5.ID}},
		{"owner", sqlitestore.Filter{Owner: "alice"}, []string{a1.ID, a2.ID, a5.ID}},
		{"statuses", sqlitestore.Filter{Statuses: []bgtype.Status{bgtype.StatusFailed, bgtype.StatusInterrupted}}, []string{b3.ID, a5.ID}},
		{"tag", sqlitestore.Filter{Tag: "web"}, []string{a1.ID, b3.ID}},
		{"run", sqlitestore.Filter{RunID: "run-1"}, []string{a1.ID, b3.ID}},
		{"all filters", sqlitestore.Filter{Owner: "bob", Tag: "db", RunID: "run-1", Statuses: []bgtype.Status{bgtype.StatusFailed}}, []string{b3.ID}},
		{"none", sqlitestore.Filter{Owner: "carol"}, nil},
	} {
		var got []string
		for m, err := range r.List(t.Context(), tc.f) {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got = append(got, m.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, err := range r.List(t.Context(), sqlitestore.Filter{Statuses: []bgtype.Status{"done"}}) {
		wantErr(t, "bad status", err, `bgtask: invalid task status: "done"`, bgtype.ErrInvalidStatus)
	}
	if got, err := r.Get(t.Context(), b3.ID); err != nil || got.Owner != "bob" || !slices.Equal(got.Tags, b3.Tags) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	_, err := r.Get(t.Context(), "task_none")
	wantErr(t, "Get unknown", err, "bgtask: task not found: task_none", bgtask.ErrNotFound)
	if after := tableSum(t, path, "tasks", "task_tags", "cancel_requests"); after != before {
		t.Fatalf("reading changed the file:\n%s\n%s", before, after)
	}
	r.Close()
	if _, err := r.Get(t.Context(), a1.ID); !errors.Is(err, sqlitestore.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

// A cancel request written through a ReadOnly reaches the task that a
// started Store's Manager runs, with its reason; an ended task and an
// unknown id write nothing.
func TestRequestCancelReachesTheManager(t *testing.T) {
	t.Parallel()
	s, path := open(t, sqlitestore.WithPollInterval(10*time.Millisecond))
	m, err := bgtask.New(bgtask.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if err := s.Start(t.Context(), m.Runtime()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m.Runtime()); !errors.Is(err, sqlitestore.ErrStarted) {
		t.Fatalf("second Start = %v", err)
	}
	o := m.Owner("alice")
	started := make(chan struct{})
	id, err := o.Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	r := openRO(t, path)
	got, err := r.RequestCancel(t.Context(), id, false, "operator said so")
	if err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("RequestCancel = %s, %v", got.Status, err)
	}
	meta, _ := o.Wait(t.Context(), id)
	if meta.Status != bgtype.StatusCanceled || meta.CancelReason != "operator said so" {
		t.Fatalf("task ended %s (reason %q), want cancelled (operator said so)", meta.Status, meta.CancelReason)
	}

	// The poller deletes a request after it carried it out, so the task
	// may end first: wait for the request to go before taking the sum.
	for tableSum(t, path, "cancel_requests") != "cancel_requests=0:;" {
		<-time.After(time.Millisecond)
	}
	before := tableSum(t, path, "tasks", "cancel_requests")
	got, err = r.RequestCancel(t.Context(), id, true, "")
	if err != nil || got.Status != bgtype.StatusCanceled {
		t.Fatalf("RequestCancel(ended) = %s, %v", got.Status, err)
	}
	_, err = r.RequestCancel(t.Context(), "task_none", false, "")
	wantErr(t, "unknown", err, "bgtask: task not found: task_none", bgtask.ErrNotFound)
	if after := tableSum(t, path, "tasks", "cancel_requests"); after != before {
		t.Fatalf("a refused request changed the file:\n%s\n%s", before, after)
	}
}

// Start after Close is refused; Close stops the poller (goleak checks it).
func TestStartAfterClose(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	m, err := bgtask.New(bgtask.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m.Runtime()); !errors.Is(err, sqlitestore.ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
	if _, err := sqlitestore.Open(t.Context(), ":memory:", sqlitestore.WithPollInterval(0)); err == nil || err.Error() != "sqlitestore: WithPollInterval(0s): want > 0" {
		t.Fatalf("WithPollInterval(0): %v", err)
	}
}
