package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// wakeLog records the events a Receiver's OnWake was given.
type wakeLog struct {
	mu  sync.Mutex
	evs []bgtype.Event
	got chan struct{}
}

func newWakeLog() *wakeLog { return &wakeLog{got: make(chan struct{}, 64)} }

func (w *wakeLog) add(ev bgtype.Event) {
	w.mu.Lock()
	w.evs = append(w.evs, ev)
	w.mu.Unlock()
	w.got <- struct{}{}
}

func (w *wakeLog) kinds() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ev := range w.evs {
		out = append(out, string(ev.Kind)+" "+ev.TaskID)
	}
	return out
}

// A thread whose Receiver idles on B is woken by the end of its task on A
// (issue 29 §3), with the end made from the record; B's run hands the end
// out, and A never shows it; a silent task and a task of an owner B does
// not hold wake nobody.
func TestWakeAcrossInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	_, mb, _ := instanceStore(t, dsn, "inst_b")
	woken := newWakeLog()
	rb, err := mb.NewReceiver("alice", bgtask.ReceiverConfig{OnWake: woken.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	quick := func(context.Context, *bgtask.Task) (any, error) { return "done", nil }
	silent, err := ma.Owner("alice").Spawn(ctx, quick, bgtask.WithWake(bgtype.WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ma.Owner("bob").Spawn(ctx, quick); err != nil {
		t.Fatal(err)
	}
	id, err := ma.Owner("alice").Spawn(ctx, quick)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken.got:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if got, want := woken.kinds(), []string{"completed " + id}; !slices.Equal(got, want) {
		t.Fatalf("B's OnWake heard %q, want %q (not the silent %s, not bob's)", got, want, silent)
	}
	if err := rb.RunStart(ctx, bgtask.RunInfo{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	evs, err := rb.Deliver(ctx)
	if err != nil || len(evs) != 1 || evs[0].TaskID != id || evs[0].Kind != bgtype.EventCompleted {
		t.Fatalf("B's first step = %+v, %v; want the end of %s", evs, err, id)
	}
	// An end while B's run is open reaches B's next run from the store.
	id2, err := ma.Owner("alice").Spawn(ctx, quick)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ma.Wait(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if err := rb.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	// A's own receiver of alice, made now, hands out neither end: B's run
	// heard the first, and takes the second from the store next.
	ra, err := ma.NewReceiver("alice", bgtask.ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rb.RunStart(ctx, bgtask.RunInfo{RunID: "run_b2"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := rb.Deliver(ctx); err != nil || len(evs) != 1 || evs[0].TaskID != id2 {
		t.Fatalf("B's next run = %+v, %v; want the end of %s", evs, err, id2)
	}
	if err := rb.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_b2"}); err != nil {
		t.Fatal(err)
	}
	if err := ra.RunStart(ctx, bgtask.RunInfo{RunID: "run_a"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := ra.Deliver(ctx); err != nil || len(evs) != 0 {
		t.Fatalf("A's run = %+v, %v; want nothing (B heard both)", evs, err)
	}
	for _, k := range woken.kinds() {
		if k != "completed "+id && k != "completed "+id2 {
			t.Errorf("B's OnWake heard %q: not a task of alice's that wakes", k)
		}
	}
}
