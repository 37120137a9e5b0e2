package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

// openRO opens a ReadOnly on dsn and closes it at the end of the test.
func openRO(t *testing.T, dsn string) *pgstore.ReadOnly {
	t.Helper()
	r, err := pgstore.OpenReadOnly(t.Context(), dsn)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// tasksSum sums up the tasks and cancel requests, to see that reading
// changed nothing.
func tasksSum(t *testing.T, dsn string) string {
	t.Helper()
	var s string
	sqlScan(t, dsn, `SELECT (SELECT count(*) || ':' || coalesce(max(version), 0) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY id)), '') FROM bgtask_tasks t)
		|| '/' || (SELECT count(*) FROM bgtask_cancel_requests)`, &s)
	return s
}

// OpenReadOnly refuses what it cannot read, with an error that says why,
// and changes nothing.
func TestOpenReadOnlyErrors(t *testing.T) {
	t.Parallel()
	_, dsn := openStore(t)
	_, err := pgstore.OpenReadOnly(t.Context(), "postgres://x:y@localhost:notaport/db")
	if err == nil || !strings.HasPrefix(err.Error(), "pgstore: cannot parse `postgres://x:xxxxx@localhost:notaport/db`") {
		t.Fatalf("bad DSN: %v", err)
	}
	sqlExec(t, dsn, `INSERT INTO bgtask_schema_migrations (version) VALUES (99)`)
	_, err = pgstore.OpenReadOnly(t.Context(), dsn)
	if !errors.Is(err, pgstore.ErrSchemaTooNew) || err.Error() != fmt.Sprintf("pgstore: database schema is newer than this code: database is at schema version 99, this code knows versions up to %d; upgrade the code", pgstore.SchemaVersion) {
		t.Fatalf("newer: %v", err)
	}
	sqlExec(t, dsn, `DELETE FROM bgtask_schema_migrations WHERE version >= $1`, pgstore.SchemaVersion)
	_, err = pgstore.OpenReadOnly(t.Context(), dsn)
	if !errors.Is(err, pgstore.ErrSchemaTooOld) || err.Error() != fmt.Sprintf("pgstore: database schema is older than this code: database is at schema version %d, this code reads %d; run the application once to migrate it", pgstore.SchemaVersion-1, pgstore.SchemaVersion) {
		t.Fatalf("older: %v", err)
	}
	sqlExec(t, dsn, `DROP TABLE bgtask_schema_migrations`)
	_, err = pgstore.OpenReadOnly(t.Context(), dsn)
	if !errors.Is(err, pgstore.ErrSchemaTooOld) || err.Error() != "pgstore: database schema is older than this code: the database holds no bgtask schema; run the application once to create it" {
		t.Fatalf("none: %v", err)
	}
	var n int
	sqlScan(t, dsn, `SELECT count(*) FROM pg_tables WHERE tablename = 'bgtask_schema_migrations'`, &n)
	if n != 0 {
		t.Fatal("OpenReadOnly created the version table")
	}
}

// List reads across owners with each filter, oldest first, over several
// pages, and nothing is written; the connections refuse writes.
//
// Not parallel: SetListPage sets the page size of every ReadOnly.
func TestReadOnlyList(t *testing.T) {
	defer pgstore.SetListPage(2)()
	s, dsn := openStore(t)
	at := func(m bgtype.TaskMeta, n int) bgtype.TaskMeta {
		m.CreatedAt = t0.Add(time.Duration(n) * time.Second)
		return m
	}
	a1 := at(rec("task_a1", "alice", bgtype.StatusRunning), 1)
	a1.Tags, a1.Parent.RunID = []string{"web"}, "run-1"
	a2 := at(rec("task_a2", "alice", bgtype.StatusCompleted), 2)
	b3 := at(rec("task_b3", "bob", bgtype.StatusFailed), 3)
	b3.Tags, b3.Parent.RunID = []string{"web", "db"}, "run-1"
	b4 := rec("task_b4", "bob", bgtype.StatusAwaitingInput)
	b4.CreatedAt = time.Time{}
	a5 := at(rec("task_a5", "alice", bgtype.StatusInterrupted), 5)
	for owner, ms := range map[string][]bgtype.TaskMeta{"alice": {a1, a2, a5}, "bob": {b3, b4}} {
		for _, m := range ms {
			if err := s.Commit(t.Context(), owner, store.UpsertAction(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := tasksSum(t, dsn)
	r := openRO(t, dsn)
	for _, tc := range []struct {
		name string
		f    pgstore.Filter
		want []string
	}{
		{"all", pgstore.Filter{}, []string{"task_b4", "task_a1", "task_a2", "task_b3", "task_a5"}},
		{"owner", pgstore.Filter{Owner: "alice"}, []string{"task_a1", "task_a2", "task_a5"}},
		{"statuses", pgstore.Filter{Statuses: []bgtype.Status{bgtype.StatusFailed, bgtype.StatusInterrupted}}, []string{"task_b3", "task_a5"}},
		{"tag", pgstore.Filter{Tag: "web"}, []string{"task_a1", "task_b3"}},
		{"run", pgstore.Filter{RunID: "run-1"}, []string{"task_a1", "task_b3"}},
		{"all filters", pgstore.Filter{Owner: "bob", Tag: "db", RunID: "run-1", Statuses: []bgtype.Status{bgtype.StatusFailed}}, []string{"task_b3"}},
		{"none", pgstore.Filter{Owner: "carol"}, nil},
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
	for _, err := range r.List(t.Context(), pgstore.Filter{Statuses: []bgtype.Status{"done"}}) {
		if !errors.Is(err, bgtype.ErrInvalidStatus) {
			t.Fatalf("bad status: %v", err)
		}
	}
	if _, err := r.Get(t.Context(), "task_none"); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: task_none" {
		t.Fatalf("Get unknown: %v", err)
	}
	if after := tasksSum(t, dsn); after != before {
		t.Fatalf("reading changed the database: %s, then %s", before, after)
	}
	r.Close()
	if _, err := r.Get(t.Context(), "task_a1"); !errors.Is(err, pgstore.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// A cancel request written through a ReadOnly reaches the instance that
// runs the task; an ended task and an unknown id record nothing.
func TestReadOnlyRequestCancel(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	m := startManager(t, s, "inst_ro")
	o := m.Owner("alice")
	id, err := o.Spawn(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := openRO(t, dsn)
	waitFor(t, "task running", func() bool {
		got, err := r.Get(t.Context(), id)
		return err == nil && got.Status == bgtype.StatusRunning
	})
	got, err := r.RequestCancel(t.Context(), id, false, "operator said so")
	if err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("RequestCancel = %s, %v", got.Status, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if meta, _ := o.Wait(ctx, id); meta.Status != bgtype.StatusCanceled || meta.CancelReason != "operator said so" {
		t.Fatalf("task ended %s %q, want cancelled with the reason", meta.Status, meta.CancelReason)
	}
	before := tasksSum(t, dsn)
	if got, err := r.RequestCancel(t.Context(), id, true, ""); err != nil || got.Status != bgtype.StatusCanceled {
		t.Fatalf("RequestCancel(ended) = %s, %v", got.Status, err)
	}
	if _, err := r.RequestCancel(t.Context(), "task_none", false, ""); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: task_none" {
		t.Fatalf("RequestCancel(unknown) = %v", err)
	}
	if after := tasksSum(t, dsn); after != before {
		t.Fatalf("a refused request changed the database: %s, then %s", before, after)
	}
}
