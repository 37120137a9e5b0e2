package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

func TestCorruptRows(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	ctx := t.Context()
	good := rec("task_good", "alice", bgtype.StatusRunning)
	other := rec("task_other", "bob", bgtype.StatusRunning)
	if err := s.Commit(ctx, "alice", store.UpsertAction(good), store.UpsertAction(rec("task_status", "alice", bgtype.StatusRunning)), store.UpsertAction(rec("task_json", "alice", bgtype.StatusCompleted))); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "bob", store.UpsertAction(other)); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET status = 'exploded' WHERE id = 'task_status'`)
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET result = '{"broken":' WHERE id = 'task_json'`)

	tests := []struct {
		id   string
		want string
	}{
		{"task_status", `bgtask: corrupt task metadata: task task_status: unknown status "exploded"`},
		{"task_json", "bgtask: corrupt task metadata: task task_json: result is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			_, err := s.Get(ctx, tt.id)
			if !errors.Is(err, bgtype.ErrCorrupt) || err.Error() != tt.want {
				t.Fatalf("Get = %v, want %q", err, tt.want)
			}
			next := rec(tt.id, "alice", bgtype.StatusCompleted)
			if err := s.Commit(ctx, "alice", store.UpsertAction(next)); !errors.Is(err, bgtype.ErrCorrupt) || !strings.Contains(err.Error(), tt.id) {
				t.Fatalf("Commit over a corrupt row = %v", err)
			}
		})
	}
	if _, err := s.Load(ctx, "alice"); !errors.Is(err, bgtype.ErrCorrupt) {
		t.Fatalf("Load = %v, want ErrCorrupt", err)
	}
	// List yields the good row, then one error naming both corrupt ones.
	var listed []string
	var listErr error
	for m, err := range s.List(ctx, "alice") {
		if err != nil {
			listErr = err
			continue
		}
		listed = append(listed, m.ID)
	}
	if !errors.Is(listErr, bgtype.ErrCorrupt) || !strings.Contains(listErr.Error(), "task_status") || !strings.Contains(listErr.Error(), "task_json") ||
		len(listed) != 1 || listed[0] != "task_good" {
		t.Fatalf("List = %q, then %v; want task_good, then an error naming task_status and task_json", listed, listErr)
	}
	// The other records are intact and still writable.
	if got, err := s.Get(ctx, "task_other"); err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("Get(task_other) = %+v, %v", got, err)
	}
	done := good
	done.Status, done.FinishedAt = bgtype.StatusCompleted, t0.Add(9e9)
	if err := s.Commit(ctx, "alice", store.UpsertAction(done)); err != nil {
		t.Fatalf("Commit of a good row beside corrupt ones: %v", err)
	}
	if got, err := s.Get(ctx, "task_good"); err != nil || got.Status != bgtype.StatusCompleted {
		t.Fatalf("Get(task_good) = %+v, %v", got, err)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_tasks SET version = version WHERE (id = 'task_status' AND status = 'exploded') OR (id = 'task_json' AND result = '{"broken":')`); n != 2 {
		t.Fatalf("corrupt rows changed: %d left as they were", n)
	}
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	if err := s.Commit(t.Context(), "o", store.UpsertAction(rec("task_a", "o", bgtype.StatusRunning))); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `INSERT INTO bgtask_schema_migrations (version) VALUES (99)`)
	_, err := pgstore.Open(t.Context(), dsn)
	want := fmt.Sprintf("pgstore: database schema is newer than this code: database is at schema version 99, this code knows versions up to %d; upgrade the code (nothing was changed)", pgstore.SchemaVersion)
	if !errors.Is(err, pgstore.ErrSchemaTooNew) || err.Error() != want {
		t.Fatalf("Open = %v\nwant %s", err, want)
	}
	if got, err := s.Get(t.Context(), "task_a"); err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("data after refused Open: %+v, %v", got, err)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_schema_migrations SET version = version`); n != int64(pgstore.SchemaVersion)+1 {
		t.Fatalf("migrations table has %d rows, want %d (each version and 99)", n, pgstore.SchemaVersion+1)
	}
}

// Two processes opening a fresh database at once migrate it once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := pgstore.Open(t.Context(), dsn)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_schema_migrations SET version = version`); n != int64(pgstore.SchemaVersion) {
		t.Fatalf("%d migration rows, want %d", n, pgstore.SchemaVersion)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  pgstore.Option
		want string
	}{
		{"heartbeat", pgstore.WithHeartbeatInterval(0), "pgstore: invalid option: heartbeat interval 0s, want > 0"},
		{"grace", pgstore.WithGrace(pgstore.DefaultHeartbeatInterval), "pgstore: invalid option: grace 5s is less than two heartbeat intervals (10s)"},
		{"poll", pgstore.WithPollInterval(-1), "pgstore: invalid option: poll interval -1ns, want > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pgstore.Open(t.Context(), "postgres://127.0.0.1:1/none", tt.opt)
			if !errors.Is(err, pgstore.ErrInvalidOption) || err.Error() != tt.want {
				t.Fatalf("Open = %v, want %q", err, tt.want)
			}
		})
	}
}
