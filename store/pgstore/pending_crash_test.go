package pgstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// pendingCalls makes a Manager on s with WithOnPendingOwner, shuts it down
// (which waits for the callback's goroutine) and returns the owners the
// callback was called with, in call order.
func pendingCalls(t *testing.T, s store.Store, instance string) []string {
	t.Helper()
	calls := make(chan string, 64)
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(instance), bgtask.WithOnPendingOwner(func(owner string) { calls <- owner }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(calls)
	var got []string
	for o := range calls {
		got = append(got, o)
	}
	return got
}

// Instance A, a real process, is killed with SIGKILL while alice's tasks
// run; bob's task on instance B ended and bob's loop took it. After the
// restart (A's tasks reaped: interrupted records and notices)
// WithOnPendingOwner is called exactly once, for alice, never for bob; an
// untaken notice alone still makes alice pending; once she took it,
// nobody is.
func TestCrashPendingOwners(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	a := startInstance(t, dsn, "inst_pend_a", "alice", 3)
	b := startInstance(t, dsn, "inst_pend_b", "bob", 1)
	b.send("cancel " + b.tasks[0])
	if line := b.next(); line != "cancelled 1 ok" {
		t.Fatalf("cancel on B: %q", line)
	}
	waitFor(t, "bob's loop takes the end of his task", func() bool {
		b.send("drain bob")
		took := false
		for line := b.next(); line != "end"; line = b.next() {
			took = took || line == "took "+b.tasks[0]
		}
		return took
	})
	b.quit()
	a.kill()

	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitFor(t, "A's tasks reaped", func() bool {
		// Again on every check: a heartbeat A sent just before it died may
		// still land after the first update.
		sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = 'inst_pend_a' AND state = 'alive'`)
		if _, err := s.InterruptOrphaned(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, id := range a.tasks {
			if m, err := s.Get(t.Context(), id); err != nil || m.Status != bgtype.StatusInterrupted {
				return false
			}
		}
		return true
	})
	if m, err := s.Get(t.Context(), b.tasks[0]); err != nil || m.Status != bgtype.StatusCanceled || !m.Announced {
		t.Fatalf("bob's task: %+v, %v; want cancelled and announced", m, err)
	}

	if got := pendingCalls(t, s, "inst_pend_c"); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("after the crash the callback was called with %q, want alice once", got)
	}
	// The records taken, the notices not: alice is still pending.
	if n := sqlExec(t, dsn, `UPDATE bgtask_tasks SET announced = true WHERE owner = 'alice'`); n != int64(len(a.tasks)) {
		t.Fatalf("marked %d of alice's records announced, want %d", n, len(a.tasks))
	}
	if got := pendingCalls(t, s, "inst_pend_d"); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("with alice's notices untaken the callback was called with %q, want alice once", got)
	}
	evs, err := s.TakeNotices(t.Context(), "alice")
	if err != nil || len(evs) != len(a.tasks) {
		t.Fatalf("TakeNotices(alice) = %d notices, %v; want %d", len(evs), err, len(a.tasks))
	}
	for _, ev := range evs {
		if ev.Kind != bgtype.EventInterrupted || !strings.Contains(ev.Error, "inst_pend_a") {
			t.Fatalf("notice %+v", ev)
		}
	}
	if got := pendingCalls(t, s, "inst_pend_e"); len(got) != 0 {
		t.Fatalf("after alice took everything the callback was called with %q, want nobody", got)
	}
}
