package pgstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/store/pgstore"
)

// Two Stores on one database, each with a transaction open: A's ended a
// task of owner a and B's one of owner b (each statement locks the
// owner's terminal count, decision 170), then each takes a late arrival
// ending a task of the other owner. Before the lock order, A waited for b
// and B for a: a deadlock, which PostgreSQL broke after deadlock_timeout
// by failing one transaction (40P01) and which the Store then committed
// again. With the order, B's late arrival (a sorts before b, which B's
// transaction holds) waits for B's next transaction, and A's joins. The
// transaction is a group's (two commits queued behind a lone one that
// holds the slot) or a lone commit's (decision 801), the fleet's shape
// with each instance's first commit after a wave.
func TestOpenGroupsTakeOwnersInOrder(t *testing.T) {
	for _, lone := range []bool{false, true} {
		name := "group"
		if lone {
			name = "lone commit"
		}
		t.Run(name, func(t *testing.T) { testOpenOwnersInOrder(t, lone) })
	}
}

func testOpenOwnersInOrder(t *testing.T, lone bool) {
	// One transaction slot each; no age limit, whose retention may lock
	// any owner's count (then no late arrival that ends a task joins).
	opts := []pgstore.Option{pgstore.WithRetainFor(0)}
	if !lone {
		opts = append(opts, pgstore.WithLoneCommitsAlone())
	}
	a, dsn := openStoreDSN(t, "pool_max_conns=1", opts...)
	b := openMore(t, dsn, "pool_max_conns=1", opts...)
	ctx := t.Context()
	commit := upserter(ctx)
	stores := map[string]*pgstore.Store{"A": a, "B": b}
	for name, s := range stores {
		for _, m := range []bgtype.TaskMeta{
			rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning),
			rec("task_"+name+"_a", "a", bgtype.StatusRunning),
			rec("task_"+name+"_b", "b", bgtype.StatusRunning),
		} {
			if err := commit(s, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A's transaction ends a's task, B's b's (a group also spawns one of
	// that owner); the late arrival ends the other owner's task.
	first := map[string]string{"A": "a", "B": "b"}
	late := map[string]string{"A": "b", "B": "a"}
	// Each Store's one slot waits for a row the test locks: a holder
	// row, that the group's two commits queue behind it, or the row the
	// lone commit ends.
	held := `SELECT 1 FROM bgtask_tasks WHERE owner LIKE 'holder_%' FOR UPDATE`
	if lone {
		held = `SELECT 1 FROM bgtask_tasks WHERE id IN ('task_A_a', 'task_B_b') FOR UPDATE`
	}
	release := holdLocks(t, dsn, held)
	var bg background
	spawn := func(s *pgstore.Store, m bgtype.TaskMeta) { bg.run(m.ID, func() error { return commit(s, m) }) }
	for name, s := range stores {
		m := rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning)
		m.Description = "held"
		if lone {
			m = rec("task_"+name+"_"+first[name], first[name], bgtype.StatusCompleted)
		}
		spawn(s, m)
	}
	waitFor(t, "both Stores' slots wait for the held rows", func() bool { return lockWaiters(t, dsn) == 2 })
	opened := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}
	for name, s := range stores {
		if !lone {
			spawn(s, rec("task_"+name+"_"+first[name], first[name], bgtype.StatusCompleted))
			spawn(s, rec("task_"+name+"_new", first[name], bgtype.StatusRunning))
			waitFor(t, "the group queues on "+name, func() bool { return pgstore.QueuedCommits(s) == 2 })
		}
		other := map[string]string{"A": "B", "B": "A"}[name]
		var once sync.Once
		pgstore.SetAfterOpen(s, func() {
			once.Do(func() {
				// Both transactions hold their first owner before
				// either takes its late arrival.
				spawn(s, rec("task_"+name+"_"+late[name], late[name], bgtype.StatusCompleted))
				waitQueued(t, s, 1)
				close(opened[name])
				select {
				case <-opened[other]:
				case <-time.After(hangGuard):
					t.Errorf("%s: the other Store's transaction never opened", name)
				}
			})
		})
		t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
	}
	d0 := pgstore.Deadlocks(a) + pgstore.Deadlocks(b)
	release()
	bg.wait(t)
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b) - d0; n != 0 {
		t.Errorf("%d deadlocks, want 0", n)
	}
	if n := pgstore.LateCommits(a); n != 1 {
		t.Errorf("A: %d late commits joined, want 1 (b sorts after a)", n)
	}
	if n := pgstore.LateCommits(b); n != 0 {
		t.Errorf("B: %d late commits joined, want 0 (a sorts before b)", n)
	}
	var n int64
	sqlScan(t, dsn, `SELECT count(*) FROM bgtask_tasks WHERE status = 'completed'`, &n)
	if n != 4 {
		t.Errorf("%d completed records, want 4", n)
	}
	var counts string
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner) FROM bgtask_owner_terminal WHERE n <> 0`, &counts)
	if counts != "a=2,b=2" {
		t.Errorf("terminal counts %s, want a=2,b=2", counts)
	}
}
