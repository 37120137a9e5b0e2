package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// waitingRecords commits n records of kind waiting in the queue (attempt
// 2, no instance), created a second apart from base, and returns them.
func waitingRecords(t *testing.T, s store.Store, kind, prefix string, base time.Time, n int) []bgtype.TaskMeta {
	t.Helper()
	var recs []bgtype.TaskMeta
	for i := range n {
		at := base.Add(time.Duration(i) * time.Second)
		m := bgtype.TaskMeta{ID: fmt.Sprintf("task_%s%02d", prefix, i), Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusQueued,
			CreatedAt: at, Attempt: 2, Resume: &bgtype.Resume{Kind: kind, Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: at}}
		if err := s.Commit(t.Context(), "alice", store.UpsertAction(m)); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestClaimTasks: ClaimTasks claims the oldest waiting records of the
// kinds named, up to Max, each running on the instance on the attempt it
// waited for; a kind with a limit only up to it, counting its running
// records; other kinds' records and rows that another transaction holds
// are left waiting, without waiting for the lock.
func TestClaimTasks(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	free := waitingRecords(t, s, "free/v1", "f", base, 5)
	capped := waitingRecords(t, s, "capped/v1", "c", base.Add(time.Minute), 4)
	other := waitingRecords(t, s, "other/v1", "o", base, 1)
	// One capped record runs already: the limit of 3 leaves room for 2.
	run := capped[3]
	run.Status, run.Instance = bgtype.StatusRunning, "inst_x"
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(run)); err != nil {
		t.Fatal(err)
	}
	// Another transaction holds the oldest free record (another instance's claim under way).
	conn := sqlConn(t, dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM bgtask_tasks WHERE id = $1 FOR UPDATE`, free[0].ID); err != nil {
		t.Fatal(err)
	}
	at := base.Add(time.Hour)
	got, err := s.ClaimTasks(t.Context(), store.Claim{Instance: "inst_a", Kinds: map[string]int{"free/v1": 0, "capped/v1": 3}, Max: 5, At: at})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
		if m.Status != bgtype.StatusRunning || m.Instance != "inst_a" || m.Attempt != 2 || !m.Resume.ResumedAt.Equal(at) {
			t.Fatalf("claimed %+v %+v", m, m.Resume)
		}
		if stored, err := s.Get(t.Context(), m.ID); err != nil || stored.Status != bgtype.StatusRunning || stored.Instance != "inst_a" {
			t.Fatalf("%s stored as %+v, %v", m.ID, stored, err)
		}
	}
	// free[1..3] (the oldest four, free[0] held), then capped[0..1] would be
	// six: Max keeps the five oldest, whatever their kind.
	want := []string{free[1].ID, free[2].ID, free[3].ID, free[4].ID, capped[0].ID}
	if !slices.Equal(ids, want) {
		t.Fatalf("claimed %v, want %v", ids, want)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err = s.ClaimTasks(t.Context(), store.Claim{Instance: "inst_b", Kinds: map[string]int{"free/v1": 0, "capped/v1": 3}, Max: 10, At: at})
	ids = ids[:0]
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	// free[0], now free; capped[1] only: capped[0] and [3] run, the limit is 3
	if want := []string{free[0].ID, capped[1].ID}; err != nil || !slices.Equal(ids, want) {
		t.Fatalf("second claim: %v, %v; want %v", ids, err, want)
	}
	for _, m := range append(other, capped[2]) {
		if stored, err := s.Get(t.Context(), m.ID); err != nil || !store.Waiting(&stored) {
			t.Fatalf("%s: %+v, %v; want it waiting", m.ID, stored, err)
		}
	}
	if got, err := s.ClaimTasks(t.Context(), store.Claim{Instance: "inst_b", Kinds: map[string]int{"free/v1": 0}, Max: 10, At: at}); err != nil || len(got) != 0 {
		t.Fatalf("a claim with nothing waiting: %v, %v", got, err)
	}
}

// TestClaimWaitingPassesHeldRows: a Manager's claim pass does not queue
// behind a waiting record that another instance's claim holds: it returns
// while the row is held, and the others run meanwhile. Before, a pass
// claimed record by record, oldest first, each claim waiting for the
// row's lock, so the instances of a fleet queued behind each other on the
// same rows (BenchmarkClaimRequeued: 4 instances claimed slower than 1);
// this pass waited until the row was let go.
func TestClaimWaitingPassesHeldRows(t *testing.T) {
	t.Parallel()
	const n = 6
	dsn := pgtest.NewDSN(t)
	r := newLimitRig(n)
	k := r.kind(t, 0)
	s0, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	recs := waitingRecords(t, s0, "limit/v1", "w", time.Now().Add(-time.Hour), n)
	conn := sqlConn(t, dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM bgtask_tasks WHERE id = $1 FOR UPDATE`, recs[0].ID); err != nil {
		t.Fatal(err)
	}
	_, m := limitInstance(t, dsn, "inst_a", k) // its claim loop starts now, the row held
	passed := make(chan struct{})
	go func() {
		defer close(passed)
		if _, err := m.ClaimWaiting(context.WithoutCancel(t.Context())); err != nil { // its claim loop may share the work
			t.Errorf("ClaimWaiting: %v", err)
		}
	}()
	select {
	case <-passed:
	case <-time.After(hangGuard):
		t.Fatalf("ClaimWaiting still waits for the held row after %v", hangGuard)
	}
	next := func() string {
		t.Helper()
		select {
		case id := <-r.started:
			return id
		case <-time.After(hangGuard):
			t.Fatalf("no attempt started within %v", hangGuard)
		}
		return ""
	}
	var started []string
	for range n - 1 {
		started = append(started, next())
	}
	slices.Sort(started)
	want := []string{recs[1].ID, recs[2].ID, recs[3].ID, recs[4].ID, recs[5].ID}
	if !slices.Equal(started, want) {
		t.Fatalf("started %v while %s was held, want %v", started, recs[0].ID, want)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != recs[0].ID { // the claim loop's next pass
		t.Fatalf("started %s, want %s", got, recs[0].ID)
	}
	for _, rec := range recs {
		close(r.gate(rec.ID))
		if meta := waitDone(t, m, rec.ID); meta.Status != bgtype.StatusCompleted || meta.Instance != "inst_a" || meta.Attempt != 2 {
			t.Fatalf("%+v", meta)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, k := range r.runs {
		if k != 1 {
			t.Fatalf("%s ran %d times", id, k)
		}
	}
}
