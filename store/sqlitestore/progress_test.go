package sqlitestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// A task's reported progress is on its record after the store is closed
// and opened again: the last one folded into the terminal record, and a
// live record's progress-only update.
func TestProgressSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := t.TempDir() + "/tasks.db"
	s, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithTuning(bgtask.Tuning{ProgressInterval: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	id, err := m.Owner("alice").Spawn(ctx, func(ctx context.Context, task *bgtask.Task) (any, error) {
		for n := range int64(4) { // the first is written at once, the rest only with the end
			if err := task.ReportProgress(n, 10, "step <b>\"x\"</b>"); err != nil {
				return nil, err
			}
		}
		<-release
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	live := rec("alice", 1, bgtype.StatusRunning)
	commit(t, s, "alice", store.UpsertAction(live))
	at := base.Add(time.Minute)
	commit(t, s, "alice", store.UpsertAction(bgtype.TaskMeta{ID: live.ID, Owner: "alice", Progress: &bgtype.Progress{Done: 7, Message: "ünï", At: at}}))
	close(release)
	if _, err := m.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, sqlitestore.WithoutRecovery()) // the live record stays live
	got := get(t, s, id)
	if p := got.Progress; got.Status != bgtype.StatusCompleted || p == nil || p.Done != 3 || p.Total != 10 || p.Message != "step <b>\"x\"</b>" || p.At.IsZero() {
		t.Errorf("task after reopen: status %s, progress %+v; want completed with 3/10", got.Status, p)
	}
	got = get(t, s, live.ID)
	if p := got.Progress; got.Status != bgtype.StatusRunning || p == nil || *p != (bgtype.Progress{Done: 7, Message: "ünï", At: at}) {
		t.Errorf("live record after reopen: status %s, progress %+v; want running with 7", got.Status, p)
	}
}

// A database at schema version 3 (before progress and keys) opens, keeps
// its rows (with neither), and refuses a second record with a key.
func TestMigrationAddsProgressAndKeys(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, 3)
	execSQL(t, db, "INSERT INTO tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', 1)")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	if old := get(t, s, "task_old"); old.Progress != nil || old.IdempotencyKey != "" {
		t.Fatalf("old record = %+v, want no progress and no key", old)
	}
	a := rec("alice", 1, bgtype.StatusRunning)
	a.IdempotencyKey = "k"
	commit(t, s, "alice", store.UpsertAction(a))
	b := rec("alice", 2, bgtype.StatusRunning)
	b.IdempotencyKey = "k"
	err := s.Commit(t.Context(), "alice", store.UpsertAction(b))
	if dup, ok := errors.AsType[*bgtype.DuplicateKeyError](err); !ok || dup.TaskID != a.ID || err.Error() != `bgtask: idempotency key "k" already used by task `+a.ID {
		t.Fatalf("Commit of a second record with key k: %v, want a *DuplicateKeyError naming %s", err, a.ID)
	}
	var version int
	if err := rawDB(t, path).QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil || version != sqlitestore.SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, sqlitestore.SchemaVersion)
	}
}
