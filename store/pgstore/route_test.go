package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// notice is a row of bgtask_notices as the tests read it.
type notice struct {
	Owner, TaskID, TaskOwner string
	ToTask, Delivered        bool
}

// readNotices returns every notice, in the order they were recorded.
func readNotices(t *testing.T, dsn string) []notice {
	t.Helper()
	conn := sqlConn(t, dsn)
	rs, err := conn.Query(context.Background(), `SELECT owner, task_id, task_owner, to_task, delivered_at IS NOT NULL FROM bgtask_notices ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rs, pgx.RowToStructByPos[notice])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// commitAll commits each record under its own owner.
func commitAll(t *testing.T, s *pgstore.Store, metas ...bgtype.TaskMeta) {
	t.Helper()
	for i, m := range metas {
		m.CreatedAt = t0.Add(time.Duration(i) * time.Second) // the reaper's order
		if err := s.Commit(t.Context(), m.Owner, store.UpsertAction(m)); err != nil {
			t.Fatalf("commit %s: %v", m.ID, err)
		}
	}
}

// The reaper addresses each notice to the nearest live owner up the
// record's lineage: past sub-agents reaped in the same pass, sub-agents
// that ended before, sub-agents left running on a dead instance, and two
// levels of them; it stops at an owner that is not a task and at a
// sub-agent live on a live instance. Each notice names its record and the
// record's own owner, and is claimed once, by the owner it is addressed to.
func TestReapAddressesNearestLiveOwner(t *testing.T) {
	t.Parallel()
	// Dated against a grace of an hour: "ghost" stopped heartbeating a day
	// ago, "live" now; no real time is measured.
	s, dsn := openStore(t, pgstore.WithGrace(time.Hour))
	ctx := t.Context()
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '2 days', 'alive'),
		('live', now(), now(), 'alive'), ('closed', now(), now(), 'stopped')`)
	on := func(id, owner string, st bgtype.Status, inst string) bgtype.TaskMeta {
		return onInstance(rec(id, owner, st), inst)
	}
	commitAll(t, s,
		on("task_plain", "alice", bgtype.StatusRunning, "ghost"),
		// A sub-agent reaped in the same pass, and its child.
		on("task_sub", "alice", bgtype.StatusRunning, "ghost"),
		on("task_sub_child", "task_sub", bgtype.StatusRunning, "ghost"),
		// A sub-agent that completed before the crash; its child ran on.
		on("task_done", "alice", bgtype.StatusCompleted, "ghost"),
		on("task_done_child", "task_done", bgtype.StatusAwaitingInput, "ghost"),
		// Two levels: a sub-agent's sub-agent, and its child.
		on("task_top", "bob", bgtype.StatusRunning, "ghost"),
		on("task_mid", "task_top", bgtype.StatusRunning, "ghost"),
		on("task_leaf", "task_mid", bgtype.StatusQueued, "ghost"),
		// A sub-agent that runs on a live instance takes its child's notice.
		on("task_alive", "carol", bgtype.StatusRunning, "live"),
		on("task_alive_child", "task_alive", bgtype.StatusRunning, "ghost"),
		// A sub-agent of an instance that closed with it running.
		on("task_closed", "dave", bgtype.StatusRunning, "closed"),
		on("task_closed_child", "task_closed", bgtype.StatusRunning, "ghost"),
		// A sub-agent this pass skips (another reaper holds it): its
		// instance is dead, so it will never take a notice.
		on("task_held", "erin", bgtype.StatusRunning, "ghost"),
		on("task_held_child", "task_held", bgtype.StatusRunning, "ghost"),
	)
	release := lockRow(t, dsn, "task_held")
	if n, err := s.Reap(ctx); err != nil || n != 11 {
		t.Fatalf("Reap = %d, %v; want 11", n, err)
	}
	release()
	if n, err := s.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("second Reap = %d, %v; want 1 (task_held)", n, err)
	}
	want := []notice{
		{Owner: "alice", TaskID: "task_plain", TaskOwner: "alice"},
		{Owner: "alice", TaskID: "task_sub", TaskOwner: "alice"},
		{Owner: "alice", TaskID: "task_sub_child", TaskOwner: "task_sub"},
		{Owner: "alice", TaskID: "task_done_child", TaskOwner: "task_done"},
		{Owner: "bob", TaskID: "task_top", TaskOwner: "bob"},
		{Owner: "bob", TaskID: "task_mid", TaskOwner: "task_top"},
		{Owner: "bob", TaskID: "task_leaf", TaskOwner: "task_mid"},
		{Owner: "task_alive", TaskID: "task_alive_child", TaskOwner: "task_alive", ToTask: true},
		{Owner: "dave", TaskID: "task_closed", TaskOwner: "dave"},
		{Owner: "dave", TaskID: "task_closed_child", TaskOwner: "task_closed"},
		{Owner: "erin", TaskID: "task_held_child", TaskOwner: "task_held"},
		{Owner: "erin", TaskID: "task_held", TaskOwner: "erin"},
	}
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("notices:\n got %+v\nwant %+v", got, want)
	}
	for owner, ids := range map[string][]string{
		"alice":      {"task_plain", "task_sub", "task_sub_child", "task_done_child"},
		"bob":        {"task_top", "task_mid", "task_leaf"},
		"task_alive": {"task_alive_child"},
		"dave":       {"task_closed", "task_closed_child"},
		"erin":       {"task_held_child", "task_held"},
		"task_sub":   nil, // the dead sub-agents get nothing
		"task_done":  nil,
		"task_mid":   nil,
		"carol":      nil, // its sub-agent runs: the child's notice is the sub-agent's
	} {
		for round := range 2 { // the second claim finds nothing
			evs, err := s.TakeNotices(ctx, owner)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				if ev.Kind != bgtype.EventInterrupted {
					t.Fatalf("%s's notice %+v", owner, ev)
				}
				got = append(got, ev.TaskID)
			}
			if round == 1 {
				ids = nil
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("TakeNotices(%s) #%d = %q, want %q", owner, round+1, got, ids)
			}
		}
	}
}

// A notice addressed to a live sub-agent that it did not take moves up
// once the sub-agent ended, or died: the next reaper pass walks it again.
func TestReapReaddressesNotices(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"completed", "died"} {
		t.Run(end, func(t *testing.T) {
			s, dsn := openStore(t, pgstore.WithGrace(time.Hour))
			ctx := t.Context()
			sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '2 days', 'alive'),
				('live', now(), now(), 'alive')`)
			sub := onInstance(rec("task_sub", "alice", bgtype.StatusRunning), "live")
			commitAll(t, s, sub, onInstance(rec("task_child", "task_sub", bgtype.StatusRunning), "ghost"))
			if n, err := s.Reap(ctx); err != nil || n != 1 {
				t.Fatalf("Reap = %d, %v; want 1", n, err)
			}
			if n, err := s.Reap(ctx); err != nil || n != 0 { // the sub-agent still runs: the notice stays
				t.Fatalf("Reap = %d, %v; want 0", n, err)
			}
			want := []notice{{Owner: "task_sub", TaskID: "task_child", TaskOwner: "task_sub", ToTask: true}}
			if got := readNotices(t, dsn); !slices.Equal(got, want) {
				t.Fatalf("notices %+v, want %+v", got, want)
			}
			switch end {
			case "completed":
				done := sub
				done.Status, done.FinishedAt = bgtype.StatusCompleted, t0.Add(time.Minute)
				if err := s.Commit(ctx, "alice", store.UpsertAction(done)); err != nil {
					t.Fatal(err)
				}
				if n, err := s.Reap(ctx); err != nil || n != 0 {
					t.Fatalf("Reap = %d, %v; want 0", n, err)
				}
			case "died":
				// The transaction that interrupts the sub-agent moves the
				// notice too: no one sees the one without the other.
				sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = 'live'`)
				if n, err := pgstore.ReapBatch(ctx, s); err != nil || n != 1 {
					t.Fatalf("ReapBatch = %d, %v; want 1", n, err)
				}
			}
			want = []notice{{Owner: "alice", TaskID: "task_child", TaskOwner: "task_sub"}}
			if end == "died" {
				want = append(want, notice{Owner: "alice", TaskID: "task_sub", TaskOwner: "alice"})
			}
			if got := readNotices(t, dsn); !slices.Equal(got, want) {
				t.Fatalf("notices %+v, want %+v", got, want)
			}
			if evs, err := s.TakeNotices(ctx, "task_sub"); err != nil || len(evs) != 0 {
				t.Fatalf("the ended sub-agent's notices = %v, %v; want none", evs, err)
			}
			evs, err := s.TakeNotices(ctx, "alice")
			if err != nil || len(evs) != len(want) || evs[0].TaskID != "task_child" {
				t.Fatalf("alice's notices = %+v, %v", evs, err)
			}
		})
	}
}

// A notice already claimed is not moved: the sub-agent took it before it
// ended, so its owner does not get it again.
func TestReapLeavesClaimedNotices(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithGrace(time.Hour))
	ctx := t.Context()
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '2 days', 'alive'),
		('live', now(), now(), 'alive')`)
	sub := onInstance(rec("task_sub", "alice", bgtype.StatusRunning), "live")
	commitAll(t, s, sub, onInstance(rec("task_child", "task_sub", bgtype.StatusRunning), "ghost"))
	if n, err := s.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	if evs, err := s.TakeNotices(ctx, "task_sub"); err != nil || len(evs) != 1 || evs[0].TaskID != "task_child" {
		t.Fatalf("the sub-agent's notices = %+v, %v", evs, err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET status = 'completed', terminal_at = now(), finished_at = now() WHERE id = 'task_sub'`)
	if _, err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	want := []notice{{Owner: "task_sub", TaskID: "task_child", TaskOwner: "task_sub", ToTask: true, Delivered: true}}
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("notices %+v, want %+v", got, want)
	}
	if evs, err := s.TakeNotices(ctx, "alice"); err != nil || len(evs) != 0 {
		t.Fatalf("alice's notices = %+v, %v; want none", evs, err)
	}
}

// A walk follows at most 64 owners per statement: a lineage of 150 ended
// sub-agents takes the reaper's walk and its readdressing walk in one pass
// to the 22nd sub-agent from the top, and the next pass to the owner. An
// owner cycle (a corrupt lineage) does not make a pass loop.
func TestReapWalkBounded(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithGrace(time.Hour))
	ctx := t.Context()
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '2 days', 'alive')`)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, finished_at, terminal_at)
		SELECT format('task_h%s', g), CASE WHEN g = 0 THEN 'erin' ELSE format('task_h%s', g - 1) END,
			'completed', now(), now(), now()
		FROM generate_series(0, 149) AS g`)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, finished_at, terminal_at)
		VALUES ('task_x', 'task_y', 'completed', now(), now(), now()), ('task_y', 'task_x', 'completed', now(), now(), now())`)
	commitAll(t, s,
		onInstance(rec("task_deep", "task_h149", bgtype.StatusRunning), "ghost"),
		onInstance(rec("task_loop", "task_x", bgtype.StatusRunning), "ghost"))
	if n, err := s.Reap(ctx); err != nil || n != 2 {
		t.Fatalf("Reap = %d, %v; want 2", n, err)
	}
	// 149 - 64 - 64 = 21; the cycle moves an even number of owners, twice.
	want := []notice{
		{Owner: "task_h21", TaskID: "task_deep", TaskOwner: "task_h149", ToTask: true},
		{Owner: "task_x", TaskID: "task_loop", TaskOwner: "task_x", ToTask: true},
	}
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("after one pass: %+v, want %+v", got, want)
	}
	if _, err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	want[0].Owner, want[0].ToTask = "erin", false
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("after two passes: %+v, want %+v", got, want)
	}
	if evs, err := s.TakeNotices(ctx, "erin"); err != nil || len(evs) != 1 || evs[0].TaskID != "task_deep" {
		t.Fatalf("erin's notices = %+v, %v", evs, err)
	}
}

// noticesVersion is the schema version that addresses notices up the
// lineage.
const noticesVersion = 8

// A database of the version before keeps its notices: an undelivered one
// gets its record's id and owner, and one addressed to a dead sub-agent
// (stranded by the reaper of that version) moves up to the sub-agent's
// owner at the first reaper pass; a delivered one is left as it was.
func TestMigrationAddressesNotices(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, noticesVersion-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, finished_at, terminal_at, instance)
		VALUES ('task_sub', 'alice', 'interrupted', now(), now(), now(), 'gone'),
		       ('task_child', 'task_sub', 'interrupted', now(), now(), now(), 'gone'),
		       ('task_plain', 'bob', 'interrupted', now(), now(), now(), 'gone')`)
	sqlExec(t, dsn, `INSERT INTO bgtask_notices (owner, event, delivered_at) VALUES
		('alice', '{"kind":"interrupted","task_id":"task_sub","error":"gone"}', NULL),
		('task_sub', '{"kind":"interrupted","task_id":"task_child","error":"gone"}', NULL),
		('bob', '{"kind":"interrupted","task_id":"task_plain","error":"gone"}', now())`)
	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	want := []notice{
		{Owner: "alice", TaskID: "task_sub", TaskOwner: "alice"},
		{Owner: "task_sub", TaskID: "task_child", TaskOwner: "task_sub", ToTask: true},
		{Owner: "bob", Delivered: true},
	}
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("after the migration: %+v, want %+v", got, want)
	}
	if n, err := s.Reap(t.Context()); err != nil || n != 0 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	want[1].Owner, want[1].ToTask = "alice", false
	if got := readNotices(t, dsn); !slices.Equal(got, want) {
		t.Fatalf("after a reaper pass: %+v, want %+v", got, want)
	}
	evs, err := s.TakeNotices(t.Context(), "alice")
	var got []string
	for _, ev := range evs {
		got = append(got, ev.TaskID)
	}
	if err != nil || !slices.Equal(got, []string{"task_sub", "task_child"}) {
		t.Fatalf("alice's notices = %q, %v", got, err)
	}
}
