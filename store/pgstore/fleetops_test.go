package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
)

// fleet is two Managers, A and B, each on its own Store of one database.
type fleet struct {
	dsn    string
	sa, sb *pgstore.Store
	ma, mb *bgtask.Manager
}

// ends returns the end events of kind k in the events ib holds now, by task.
func ends(ib *bgtask.Inbox, k bgtype.EventKind) map[string][]bgtype.Event {
	out := map[string][]bgtype.Event{}
	for _, ev := range ib.Drain() {
		if ev.Kind == k {
			out[ev.TaskID] = append(out[ev.TaskID], ev)
		}
	}
	return out
}

// newFleet opens A ("inst_a") and B ("inst_b") on one fresh database with
// opts for both stores. The poll interval is an hour unless opts say
// otherwise: NOTIFY carries what the tests send.
func newFleet(t *testing.T, opts ...pgstore.Option) *fleet {
	t.Helper()
	opts = append([]pgstore.Option{pgstore.WithPollInterval(time.Hour)}, opts...)
	f := &fleet{}
	f.sa, f.dsn = openStore(t, opts...)
	sb, err := pgstore.Open(t.Context(), f.dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	f.sb = sb
	f.ma = startManagerWith(t, f.sa, "inst_a")
	f.mb = startManagerWith(t, f.sb, "inst_b")
	return f
}

// startManagerWith is startManager with Manager options.
func startManagerWith(t *testing.T, s *pgstore.Store, id string, opts ...bgtask.Option) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(append([]bgtask.Option{bgtask.WithStore(s), bgtask.WithInstance(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// guard is a context that turns a hang into a failure.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// A cancel from B of a task (or a tree) that runs on A keeps its reason: on
// the record, in the cause the task sees, and in the cancelled event.
func TestCancelReasonAcrossInstances(t *testing.T) {
	f := newFleet(t)
	oa, ob := f.ma.Owner("alice"), f.mb.Owner("alice")
	ib, err := oa.Inbox() // A's end events for alice
	if err != nil {
		t.Fatal(err)
	}
	causes := make(chan error, 2)
	id, err := oa.Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Cancel(t.Context(), id, bgtask.WithReason("user pressed stop")); err != nil || n != 1 {
		t.Fatalf("B cancels A's task: %d, %v", n, err)
	}
	if cause := <-causes; !errors.Is(cause, bgtask.ErrCanceled) || cause.Error() != "bgtask: task cancelled: user pressed stop" {
		t.Fatalf("cause = %v", cause)
	}
	got, err := oa.Wait(guard(t), id)
	if err != nil || got.Status != bgtype.StatusCanceled || got.CancelReason != "user pressed stop" {
		t.Fatalf("A's record = %s %q, %v; want cancelled with the reason", got.Status, got.CancelReason, err)
	}
	if evs := ends(ib, bgtype.EventCanceled)[id]; len(evs) != 1 || evs[0].CancelReason != "user pressed stop" {
		t.Fatalf("cancelled events %+v, want one with the reason", evs)
	}

	// A tree: the parent and its attached child, each with the reason.
	kid := make(chan string, 1)
	parent, err := oa.Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
		id, err := oa.Spawn(ctx, blockUntilCanceled(nil))
		if err != nil {
			return nil, err
		}
		kid <- id
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	child := <-kid
	if n, err := f.mb.CancelTree(t.Context(), parent, bgtask.WithReason("tree stop")); err != nil || n != 1 {
		t.Fatalf("B cancels A's tree: %d, %v", n, err)
	}
	for _, id := range []string{parent, child} {
		got, err := oa.Wait(guard(t), id)
		if err != nil || got.Status != bgtype.StatusCanceled || got.CancelReason != "tree stop" {
			t.Fatalf("%s = %s %q, %v; want cancelled with the reason", id, got.Status, got.CancelReason, err)
		}
	}
	evs := ends(ib, bgtype.EventCanceled)
	for _, id := range []string{parent, child} {
		if len(evs[id]) != 1 || evs[id][0].CancelReason != "tree stop" {
			t.Fatalf("cancelled events of %s %+v, want one with the reason", id, evs[id])
		}
	}
}

// CancelRun on B of a run whose tasks run on A cancels them there, with
// the reason, and counts them; another owner's run of the same id on A is
// untouched.
func TestCancelRunAcrossInstances(t *testing.T) {
	f := newFleet(t)
	oa := f.ma.Owner("alice")
	run := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1", CallID: "call-1"})
	var ids []string
	for range 2 {
		id, err := oa.Spawn(run, blockUntilCanceled(nil))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	bobs, err := f.ma.Owner("bob").Spawn(run, blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.mb.Owner("alice").CancelRun("run-1", bgtask.WithReason("stop the turn")); err != nil || n != 2 {
		t.Fatalf("B cancels alice's run: %d, %v; want 2", n, err)
	}
	for _, id := range ids {
		got, err := oa.Wait(guard(t), id)
		if err != nil || got.Status != bgtype.StatusCanceled || got.CancelReason != "stop the turn" {
			t.Fatalf("%s = %s %q, %v; want cancelled with the reason", id, got.Status, got.CancelReason, err)
		}
	}
	if got, err := f.ma.Get(t.Context(), bobs); err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("bob's task of the same run id = %s, %v; want running", got.Status, err)
	}
}
