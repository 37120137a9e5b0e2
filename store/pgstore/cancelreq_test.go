package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
)

// Tests of a cancel request (ReadOnly.RequestCancel, the inspector's path)
// of a resumable task that waits in the queue between two attempts: no
// instance runs it, so the request is addressed to no instance ("").

// waitingTask commits a resumable record of alice that waits in the queue
// for its second attempt, and returns it.
func waitingTask(t *testing.T, s *pgstore.Store) bgtype.TaskMeta {
	t.Helper()
	now := time.Now()
	w := bgtype.TaskMeta{ID: idgen.NewTask(now), Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusQueued, CreatedAt: now,
		Attempt: 2, Resume: &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: now}}
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(w)); err != nil {
		t.Fatal(err)
	}
	return w
}

// newManager is a Manager of instance id on s, which it does not start.
func newManager(t *testing.T, s *pgstore.Store, id string) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// cancelRequests lists every cancel request, oldest first, as
// "<instance> <reason> tree=<tree> handled=<handled>".
func cancelRequests(t *testing.T, dsn string) []string {
	t.Helper()
	conn := sqlConn(t, dsn)
	rs, err := conn.Query(t.Context(), `SELECT instance, reason, tree, handled_at IS NOT NULL FROM bgtask_cancel_requests ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var got []string
	for rs.Next() {
		var (
			inst, reason  string
			tree, handled bool
		)
		if err := rs.Scan(&inst, &reason, &tree, &handled); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%q %s tree=%t handled=%t", inst, reason, tree, handled))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// A cancel request of a waiting task is carried out by the instance whose
// poller reads it: its Manager ends the task cancelled as a claim of the
// waiting attempt, with the request's reason. Before, the request was
// addressed to no instance, no poller read it, and the task ran at its
// next claim.
func TestCancelRequestReachesAWaitingTask(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	m := newManager(t, s, "inst_a")
	w := waitingTask(t, s)
	if _, err := openRO(t, dsn).RequestCancel(t.Context(), w.ID, false, "operator"); err != nil {
		t.Fatal(err)
	}

	if err := pgstore.HandleCancels(t.Context(), s, m.Runtime(), "inst_a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != bgtype.StatusCanceled || got.CancelReason != "operator" || got.Instance != "inst_a" || got.Attempt != 2 {
		t.Errorf("the waiting task after the request: %s, reason %q, instance %q, attempt %d; want cancelled, operator, inst_a, attempt 2",
			got.Status, got.CancelReason, got.Instance, got.Attempt)
	}
	if got, want := cancelRequests(t, dsn), []string{`"" operator tree=false handled=true`}; !slices.Equal(got, want) {
		t.Errorf("cancel requests %q, want %q", got, want)
	}
}

// claimFirst is a runtime whose task is claimed by another instance just
// before it carries out a cancel request.
type claimFirst struct {
	store.Runtime
	claim func()
}

func (r claimFirst) CancelRequested(ctx context.Context, id string, tree bool, reason string) (int, error) {
	r.claim()
	return r.Runtime.CancelRequested(ctx, id, tree, reason)
}

// A waiting task that another instance claims while a cancel request of it
// is carried out (the claim won) gets the request on its claiming
// instance: the request is addressed to that instance, with its reason,
// and the task runs on there until that instance carries it out.
func TestCancelRequestFollowsAClaimedWaitingTask(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	m := newManager(t, s, "inst_a")
	w := waitingTask(t, s)
	if _, err := openRO(t, dsn).RequestCancel(t.Context(), w.ID, false, "operator"); err != nil {
		t.Fatal(err)
	}

	rt := claimFirst{Runtime: m.Runtime(), claim: func() {
		c := w
		c.Status, c.Instance, c.StartedAt = bgtype.StatusRunning, "inst_b", time.Now()
		if err := s.Commit(t.Context(), "alice", store.UpsertAction(c)); err != nil {
			t.Error(err)
		}
	}}
	if err := pgstore.HandleCancels(t.Context(), s, rt, "inst_a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != bgtype.StatusRunning || got.Instance != "inst_b" || got.Attempt != 2 {
		t.Errorf("the claimed task: %s, instance %q, attempt %d; want running, inst_b, attempt 2", got.Status, got.Instance, got.Attempt)
	}
	want := []string{`"" operator tree=false handled=true`, `"inst_b" operator tree=false handled=false`}
	if got := cancelRequests(t, dsn); !slices.Equal(got, want) {
		t.Errorf("cancel requests %q, want %q", got, want)
	}
}

// In a fleet, a cancel request of a waiting task wakes every instance's
// listener (the poll ticks once an hour) and exactly one carries it out.
func TestCancelRequestReachesAWaitingTaskInAFleet(t *testing.T) {
	t.Parallel()
	sa, dsn := openStore(t, pgstore.WithPollInterval(time.Hour))
	sb, err := pgstore.Open(t.Context(), dsn, pgstore.WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ma := startManager(t, sa, "inst_a")
	mb := startManager(t, sb, "inst_b")
	w := waitingTask(t, sa)
	if _, err := openRO(t, dsn).RequestCancel(t.Context(), w.ID, false, "operator"); err != nil {
		t.Fatal(err)
	}

	var got bgtype.TaskMeta
	waitFor(t, "the waiting task cancelled", func() bool {
		var err error
		got, err = sa.Get(t.Context(), w.ID)
		return err != nil || got.Status.IsTerminal()
	})
	if got.Status != bgtype.StatusCanceled || got.CancelReason != "operator" || (got.Instance != "inst_a" && got.Instance != "inst_b") || got.Attempt != 2 {
		t.Errorf("the waiting task after the request: %s, reason %q, instance %q, attempt %d; want cancelled, operator, inst_a or inst_b, attempt 2",
			got.Status, got.CancelReason, got.Instance, got.Attempt)
	}
	waitFor(t, "the request handled", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM bgtask_cancel_requests WHERE handled_at IS NULL`) == 0
	})
	// The Manager counts the end after its record is committed: wait for
	// the count, then check that only one instance counted it.
	waitFor(t, "the cancelled end counted", func() bool {
		return ma.Stats().Canceled+mb.Stats().Canceled > 0
	})
	if a, b := ma.Stats().Canceled, mb.Stats().Canceled; a+b != 1 {
		t.Errorf("cancelled ends: %d on inst_a, %d on inst_b; want 1 in all", a, b)
	}
	if got, want := cancelRequests(t, dsn), []string{`"" operator tree=false handled=true`}; !slices.Equal(got, want) {
		t.Errorf("cancel requests %q, want %q", got, want)
	}
}
