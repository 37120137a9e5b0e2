package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testKindLimiter, for a store.KindLimiter only: concurrent ClaimUnder
// calls of a kind, each by its own instance, admit exactly limit claims;
// running records of another kind and closures take no slot; a record
// that ended frees its slot; a claim of an ended record, or of a record
// another instance claimed first, changes nothing and takes no slot; a
// claim without a kind or with no limit is an invalid action.
func testKindLimiter(t *testing.T, c Config) {
	s := c.New(t)
	l, ok := s.(store.KindLimiter)
	if !ok {
		t.Skip("not a store.KindLimiter")
	}
	const (
		kind  = "crawl/v1"
		n     = 12
		limit = 3
	)
	waiting := func(i int) bgtype.TaskMeta {
		m := rec(fmt.Sprintf("task_w%02d", i), "alice", bgtype.StatusQueued, i)
		m.Attempt = 1
		m.Resume = &bgtype.Resume{Kind: kind, Spec: json.RawMessage(`{}`), MaxAttempts: 3}
		return m
	}
	claimOf := func(m bgtype.TaskMeta, inst string) bgtype.TaskMeta {
		u := m
		u.Resume = m.Resume.Clone()
		u.Status, u.Instance, u.StartedAt = bgtype.StatusRunning, inst, at(50)
		return u
	}
	claim := func(m bgtype.TaskMeta, inst string) bool {
		t.Helper()
		room, err := l.ClaimUnder(t.Context(), claimOf(m, inst), limit)
		if err != nil {
			t.Fatalf("ClaimUnder(%s by %s): %v", m.ID, inst, err)
		}
		return room
	}

	// Running work that takes no slot of the kind: another kind's, a closure's.
	other := rec("task_other", "bob", bgtype.StatusRunning, 30)
	other.Instance, other.Attempt = "inst-x", 1
	other.Resume = &bgtype.Resume{Kind: "other/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3}
	commit(t, s, "bob", store.UpsertAction(other))
	closure := rec("task_closure", "bob", bgtype.StatusRunning, 31)
	closure.Instance = "inst-x"
	commit(t, s, "bob", store.UpsertAction(closure))

	var recs []bgtype.TaskMeta
	for i := range n {
		recs = append(recs, waiting(i))
		commit(t, s, "alice", store.UpsertAction(recs[i]))
	}
	// Every record claimed at once by an instance of its own: limit of them run.
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		rooms = make([]bool, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			rooms[i], errs[i] = l.ClaimUnder(t.Context(), claimOf(recs[i], fmt.Sprintf("inst-%02d", i)), limit)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent ClaimUnder: %v", err)
	}
	var running, queued []int
	for i := range n {
		got := get(t, s, recs[i].ID)
		switch {
		case rooms[i] && got.Status == bgtype.StatusRunning && got.Instance == fmt.Sprintf("inst-%02d", i) && got.Attempt == 1:
			running = append(running, i)
		case !rooms[i] && store.Waiting(&got) && got.Attempt == 1:
			queued = append(queued, i)
		default:
			t.Fatalf("claim %d: room %v, record %s on %q, attempt %d", i, rooms[i], got.Status, got.Instance, got.Attempt)
		}
	}
	if len(running) != limit {
		t.Fatalf("%d concurrent claims ran (%v), want %d (the limit)", len(running), running, limit)
	}
	if claim(recs[queued[0]], "inst-late") {
		t.Fatalf("a claim at the limit had room")
	}

	// An ended attempt frees its slot: one more claim runs, then none.
	done := get(t, s, recs[running[0]].ID)
	commit(t, s, "alice", store.UpsertAction(ended(done, bgtype.StatusCompleted, 60)))

	// A claim of an ended record changes nothing and takes no slot.
	cancelled := get(t, s, recs[queued[0]].ID)
	cancelled = ended(cancelled, bgtype.StatusCanceled, 61)
	cancelled.Instance = "inst-canceller"
	commit(t, s, "alice", store.UpsertAction(cancelled))
	claim(cancelled, "inst-late") // with room or not: the record says
	if got := get(t, s, cancelled.ID); got.Status != bgtype.StatusCanceled || got.Instance != "inst-canceller" {
		t.Fatalf("a claim of a cancelled record: %s on %q, want cancelled on inst-canceller", got.Status, got.Instance)
	}

	// Two instances claim one record: the first runs it; the second
	// changes nothing and takes no slot.
	first := recs[queued[1]]
	if !claim(first, "inst-first") {
		t.Fatalf("a claim below the limit had no room")
	}
	claim(first, "inst-second")
	if got := get(t, s, first.ID); got.Status != bgtype.StatusRunning || got.Instance != "inst-first" {
		t.Fatalf("after two claims: %s on %q, want running on inst-first", got.Status, got.Instance)
	}
	if claim(recs[queued[2]], "inst-late") {
		t.Fatalf("a claim had room with %d running (the limit)", limit)
	}
	if kq, ok := s.(store.KindQueue); ok {
		w, err := kq.WaitingTasks(t.Context(), n)
		var want []string
		for _, i := range queued[2:] {
			want = append(want, recs[i].ID)
		}
		if err != nil || !slices.Equal(idsOf(w), want) {
			t.Fatalf("WaitingTasks = %v, %v; want %v", idsOf(w), err, want)
		}
	}

	// Invalid claims.
	plain := rec("task_plain", "alice", bgtype.StatusRunning, 70)
	if _, err := l.ClaimUnder(t.Context(), plain, limit); !errors.Is(err, store.ErrInvalidAction) {
		t.Errorf("ClaimUnder of a closure's record = %v, want ErrInvalidAction", err)
	}
	if _, err := l.ClaimUnder(t.Context(), claimOf(recs[queued[2]], "inst-late"), 0); !errors.Is(err, store.ErrInvalidAction) {
		t.Errorf("ClaimUnder with limit 0 = %v, want ErrInvalidAction", err)
	}
}
