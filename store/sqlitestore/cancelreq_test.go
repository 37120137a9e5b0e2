//go:build unix

package sqlitestore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// cancelRuntime is a store.Runtime that records the cancel requests it is
// handed; onCancel, when set, runs inside each before it returns.
type cancelRuntime struct {
	instance string
	got      []string // "<task> <reason>", in the order handed
	onCancel func(id string)
	none     bool // signal nothing: the task is not here
}

func (r *cancelRuntime) Instance() string { return r.instance }

func (r *cancelRuntime) CancelRequested(_ context.Context, id string, _ bool, reason string) (int, error) {
	r.got = append(r.got, id+" "+reason)
	if r.onCancel != nil {
		r.onCancel(id)
	}
	if r.none {
		return 0, nil
	}
	return 1, nil
}

func (r *cancelRuntime) CancelAll(error) int { return 0 }

func (r *cancelRuntime) MessageRequested(context.Context, string, string, bgtype.Message) store.Delivery {
	return store.Delivery{Code: store.DeliveryEnded}
}

// requestCancel writes a cancel request of id through r, as an operator's
// inspector does.
func requestCancel(t *testing.T, r *sqlitestore.ReadOnly, id, reason string) {
	t.Helper()
	if _, err := r.RequestCancel(t.Context(), id, false, reason); err != nil {
		t.Fatalf("RequestCancel(%s): %v", id, err)
	}
}

// Two Stores on one file, A running inst-a's tasks and B inst-b's. B
// reads a page of requests: one of its own task and one of A's task that
// has ended. While B carries out its own, A expires the ended task's
// request (deleting it, the newest row) and an operator requests the
// cancellation of A's other task, whose new row takes the freed seq. B
// then deletes what it read as done: the new request must survive it and
// reach A, once (the clean-clone failure of
// TestCancelRequestsReachTheirProcess: a request logged by neither
// process).
func TestCancelRequestSurvivesAReusedSeq(t *testing.T) {
	t.Parallel()
	a, path := open(t)
	b := openAt(t, path)
	ro := openRO(t, path)
	ended, live := rec("alice", 1, bgtype.StatusRunning), rec("alice", 2, bgtype.StatusRunning) // inst-a
	commit(t, a, "alice", store.UpsertAction(ended), store.UpsertAction(live))
	own := rec("bob", 3, bgtype.StatusRunning)
	own.Instance = "inst-b"
	commit(t, b, "bob", store.UpsertAction(own))

	requestCancel(t, ro, own.ID, "b's own")
	requestCancel(t, ro, ended.ID, "too late")
	commit(t, a, "alice", store.UpsertAction(rec("alice", 1, bgtype.StatusCanceled)))

	rtA := &cancelRuntime{instance: "inst-a"}
	rtB := &cancelRuntime{instance: "inst-b", onCancel: func(string) {
		if err := sqlitestore.HandleCancels(t.Context(), a, rtA); err != nil {
			t.Errorf("A's poll inside B's: %v", err)
		}
		if got := tableSum(t, path, "cancel_requests"); !strings.HasPrefix(got, "cancel_requests=1:") {
			t.Errorf("after A's poll: %s; want only B's request left", got)
		}
		requestCancel(t, ro, live.ID, "operator")
	}}
	if err := sqlitestore.HandleCancels(t.Context(), b, rtB); err != nil {
		t.Fatalf("B's poll: %v", err)
	}
	if err := sqlitestore.HandleCancels(t.Context(), a, rtA); err != nil {
		t.Fatalf("A's poll: %v", err)
	}
	if err := sqlitestore.HandleCancels(t.Context(), b, rtB); err != nil {
		t.Fatalf("B's second poll: %v", err)
	}
	if want := []string{own.ID + " b's own"}; !slices.Equal(rtB.got, want) {
		t.Errorf("B was handed %q, want %q", rtB.got, want)
	}
	if want := []string{live.ID + " operator"}; !slices.Equal(rtA.got, want) {
		t.Errorf("A was handed %q, want %q (the request after the reused seq lost)", rtA.got, want)
	}
	if got := tableSum(t, path, "cancel_requests"); got != "cancel_requests=0:;" {
		t.Errorf("requests left: %s", got)
	}
}

// A cancel request of a resumable task that waits in the queue between two
// attempts (no instance holds it) is carried out by the first started
// Store that reads it: its Manager ends the task cancelled in the file, as
// a claim of the waiting attempt, with the request's reason. Before, every
// poller expired it (no live instance), and the task ran at its next claim.
func TestCancelRequestReachesAWaitingTask(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance("inst_a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	w := rec("alice", 1, bgtype.StatusQueued)
	w.Instance, w.Attempt, w.Resume = "", 2, &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: base}
	commit(t, s, "alice", store.UpsertAction(w))
	requestCancel(t, openRO(t, path), w.ID, "operator")

	if err := sqlitestore.HandleCancels(t.Context(), s, m.Runtime()); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, w.ID)
	if got.Status != bgtype.StatusCanceled || got.CancelReason != "operator" || got.Instance != "inst_a" || got.Attempt != 2 {
		t.Errorf("the waiting task after the request: %s, reason %q, instance %q, attempt %d; want cancelled, operator, inst_a, attempt 2",
			got.Status, got.CancelReason, got.Instance, got.Attempt)
	}
	if got := tableSum(t, path, "cancel_requests"); got != "cancel_requests=0:;" {
		t.Errorf("requests left: %s", got)
	}
}

// A waiting task that an instance claims while a cancel request of it is
// carried out (the runtime signalled nothing: the claim won) keeps the
// request: the next poll reads the task on its claiming instance and hands
// it to that instance's runtime.
func TestCancelRequestFollowsAClaimedWaitingTask(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	w := rec("alice", 1, bgtype.StatusQueued)
	w.Instance, w.Attempt, w.Resume = "", 2, &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: base}
	commit(t, s, "alice", store.UpsertAction(w))
	requestCancel(t, openRO(t, path), w.ID, "operator")

	rt := &cancelRuntime{instance: "inst-a", none: true, onCancel: func(string) {
		claimed := w
		claimed.Status, claimed.Instance, claimed.StartedAt = bgtype.StatusRunning, "inst-a", base.Add(time.Minute)
		commit(t, s, "alice", store.UpsertAction(claimed))
	}}
	if err := sqlitestore.HandleCancels(t.Context(), s, rt); err != nil {
		t.Fatal(err)
	}
	rt.none, rt.onCancel = false, nil
	if err := sqlitestore.HandleCancels(t.Context(), s, rt); err != nil {
		t.Fatal(err)
	}
	if want := []string{w.ID + " operator", w.ID + " operator"}; !slices.Equal(rt.got, want) {
		t.Errorf("the runtime was handed %q, want %q (once waiting, once claimed)", rt.got, want)
	}
	if got := tableSum(t, path, "cancel_requests"); got != "cancel_requests=0:;" {
		t.Errorf("requests left: %s", got)
	}
}
