package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

// An instance whose last successful heartbeat was sent nine tenths of the
// grace ago refuses to write before its heartbeat loop runs again, and
// without asking the database; its tasks are then cancelled.
func TestFenceByLocalClock(t *testing.T) {
	t.Parallel()
	const grace = time.Hour
	tests := []struct {
		age      time.Duration
		wantLost bool
	}{
		{grace / 2, false},
		{grace*9/10 - time.Microsecond, false},
		{grace * 9 / 10, true},
		{2 * grace, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.age), func(t *testing.T) {
			// The heartbeat loop ticks every half hour: it never runs
			// during the test, so only the fake clock ages the heartbeat.
			s, dsn := openStore(t, pgstore.WithGrace(grace), pgstore.WithHeartbeatInterval(grace/2))
			advance := pgstore.FakeClock(s)
			m := startManager(t, s, "inst_clock")
			causes := make(chan error, 1)
			if _, err := m.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes)); err != nil {
				t.Fatal(err)
			}
			advance(tt.age)
			err := s.Commit(t.Context(), "alice", store.UpsertAction(rec("task_new", "alice", bgtype.StatusRunning)))
			rows := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_new'`)
			if !tt.wantLost {
				if err != nil || rows != 1 || s.Lost() {
					t.Fatalf("Commit = %v, %d rows, Lost %v; want written", err, rows, s.Lost())
				}
				return
			}
			want := fmt.Sprintf("pgstore: bgtask: runtime instance lost its registration: no heartbeat succeeded for %v (writes stop at 54m0s, the grace 1h0m0s less a tenth)", tt.age)
			if !errors.Is(err, bgtask.ErrInstanceLost) || err.Error() != want || rows != 0 || !s.Lost() {
				t.Fatalf("Commit = %v, %d rows, Lost %v\nwant %s, nothing written", err, rows, s.Lost(), want)
			}
			if _, err := m.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil)); !errors.Is(err, bgtask.ErrInstanceLost) {
				t.Fatalf("Spawn after loss = %v, want ErrInstanceLost", err)
			}
			if cause := waitCause(t, causes); !errors.Is(cause, bgtask.ErrInstanceLost) {
				t.Fatalf("task cancelled with cause %v, want ErrInstanceLost", cause)
			}
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks`); n != 1 {
				t.Fatalf("%d rows, want only the first task's", n)
			}
		})
	}
}

// An instance a reaper declared dead writes nothing more, even while its
// own clock says its heartbeat is fresh: the write itself checks the
// registration in its transaction.
func TestFenceDeclaredDead(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	m := startManager(t, s, "inst_dead")
	causes := make(chan error, 1)
	id, err := m.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_dead'`)
	err = s.Commit(t.Context(), "alice", store.UpsertAction(rec("task_new", "alice", bgtype.StatusRunning)))
	const want = "pgstore: bgtask: runtime instance lost its registration: its registration is dead"
	if err == nil || err.Error() != want {
		t.Fatalf("Commit after the reaper's verdict = %v, want %s", err, want)
	}
	_, err = m.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil))
	if !errors.Is(err, bgtask.ErrInstanceLost) || !errors.Is(err, pgstore.ErrInstanceLost) {
		t.Fatalf("Spawn after the reaper's verdict = %v, want ErrInstanceLost", err)
	}
	// The first refusal marked the store lost: later writes are refused
	// without asking the database.
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(rec("task_new", "alice", bgtype.StatusRunning))); err != pgstore.ErrInstanceLost {
		t.Fatalf("Commit = %v, want %v", err, pgstore.ErrInstanceLost)
	}
	if _, err := s.TakeNotices(t.Context(), "alice"); !errors.Is(err, bgtask.ErrInstanceLost) {
		t.Fatalf("TakeNotices = %v", err)
	}
	if cause := waitCause(t, causes); !errors.Is(cause, bgtask.ErrInstanceLost) {
		t.Fatalf("task cancelled with cause %v, want ErrInstanceLost", cause)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = $1 AND status = 'running'`, id); n != 1 {
		t.Fatal("the first task's record changed: its cancelled end must be refused")
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks`); n != 1 {
		t.Fatalf("%d rows, want only the first task's", n)
	}
	if !s.Lost() {
		t.Fatal("Lost() = false")
	}
}

// The heartbeat and the reaper never wait behind commits: with the
// commits in flight waiting on a row lock and the others queued,
// the heartbeat still advances and the reaper still reaps.
func TestBackgroundNotBehindCommits(t *testing.T) {
	t.Parallel()
	s, dsn := openStoreDSN(t, "pool_max_conns=2", pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(20*time.Millisecond))
	ctx := t.Context()
	if err := s.Commit(ctx, "alice", store.UpsertAction(rec("task_hot", "alice", bgtype.StatusRunning))); err != nil {
		t.Fatal(err)
	}
	startManager(t, s, "inst_busy")
	holder := lockRow(t, dsn, "task_hot")
	var wg sync.WaitGroup
	for range 6 { // MaxInFlight hold connections (the pool has two), the rest queue
		wg.Go(func() {
			m := rec("task_hot", "alice", bgtype.StatusCompleted)
			if err := s.Commit(ctx, "alice", store.UpsertAction(m)); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the commits in flight wait on the lock", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) == pgstore.MaxInFlight
	})
	beat := func() (hb time.Time) {
		sqlScan(t, dsn, `SELECT heartbeat_at FROM bgtask_instances WHERE id = 'inst_busy'`, &hb)
		return hb
	}
	first := beat()
	waitFor(t, "the heartbeat advances while commits hold every connection", func() bool { return beat().After(first) })
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '1 day', 'alive');
		INSERT INTO bgtask_tasks (id, owner, status, instance) VALUES ('task_ghost', 'bob', 'running', 'ghost')`)
	waitFor(t, "the reaper reaps while commits hold every connection", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_ghost' AND status = 'interrupted'`) == 1
	})
	holder()
	wg.Wait()
	if got, err := s.Get(ctx, "task_hot"); err != nil || got.Status != bgtype.StatusCompleted {
		t.Fatalf("task_hot = %+v, %v", got, err)
	}
}

// waitCause returns the cause a blockUntilCancelled task reports.
func waitCause(t *testing.T, causes <-chan error) error {
	t.Helper()
	select {
	case cause := <-causes:
		return cause
	case <-time.After(hangGuard):
		t.Fatal("task not cancelled")
		return nil
	}
}

// lockRow locks a task row in a transaction of its own and returns the
// function that rolls it back.
func lockRow(t *testing.T, dsn, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn := sqlConn(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}
