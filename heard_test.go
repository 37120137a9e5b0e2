package bgtask

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
)

// givers are the ways a model is given a task's end: an event a step
// handed out, or a call's result (decision 804), followed by the step
// whose model call reads it; both are heard alike. Each gives the end of
// a new task of pr's owner and returns its id.
var givers = []struct {
	name string
	give func(t *testing.T, pr *receiverRun) (id string)
}{
	{"event", func(t *testing.T, pr *receiverRun) string {
		id := finishTasks(t, pr.m, "thread-1", nil)[0]
		if got := deliverIDs(t, pr.p); !slices.Equal(got, []string{id}) {
			t.Fatalf("first step handed out %q, want %q", got, id)
		}
		return id
	}},
	{"foreground result", func(t *testing.T, pr *receiverRun) string {
		res, err := pr.o.Foreground(t.Context(), time.Hour, func(context.Context, *Task) (any, error) { return "ok", nil })
		if err != nil || res.Status != bgtype.StatusCompleted || string(res.Result) != `"ok"` {
			t.Fatalf("Foreground = %+v, %v; want its result", res, err)
		}
		if got := deliverIDs(t, pr.p); len(got) != 0 {
			t.Fatalf("the step after the call handed out %q, want nothing: the model has the end as the call's result", got)
		}
		return res.TaskID
	}},
	{"wait's answer", func(t *testing.T, pr *receiverRun) string {
		id := finishTasks(t, pr.m, "thread-1", nil)[0]
		meta := getTask(t, pr.o, id)
		pr.o.MarkAnswered(t.Context(), &meta)
		if meta.Announced {
			t.Fatal("MarkAnswered marked it during the run")
		}
		if got := deliverIDs(t, pr.p); len(got) != 0 {
			t.Fatalf("the step after the call handed out %q, want nothing: the model has the end as the call's result", got)
		}
		return id
	}},
}

// An end handed to a model call that never completed is not lost (issue
// 30, item 8): it is marked heard only when a later boundary proves the
// model answered it, and handed out again when the run was aborted and the
// thread is then forgotten, or the process dies, before that proof.
func TestEndHeardOnlyWhenAnswered(t *testing.T) {
	tests := []struct {
		name string
		// after the run that handed the end out: what happens, and whether
		// the owner's next run (on a new Receiver or process) gets it again
		then       func(t *testing.T, pr *receiverRun, ds *durableMem) (next *Receiver)
		again      bool
		markedWhen string // "", or the step after which it is marked
	}{
		{"run answered, then the thread is forgotten", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			endRun(t, pr.p, RunOutcome{RunID: "run-1"})
			return reopen(t, pr)
		}, false, "run end"},
		{"run aborted, then the thread is forgotten", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			endRun(t, pr.p, RunOutcome{RunID: "run-1", Aborted: true})
			return reopen(t, pr)
		}, true, ""},
		{"run aborted, canceled too, then the thread is forgotten", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			endRun(t, pr.p, RunOutcome{RunID: "run-1", Aborted: true, Canceled: true})
			return reopen(t, pr)
		}, true, ""},
		{"the thread is forgotten with the run open", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			return reopen(t, pr)
		}, true, ""},
		{"the process dies with the run open", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			m := newTestManager(t, WithStore(ds)) // the first one's memory is gone: only the store is read
			r, err := m.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, true, ""},
		{"the host gives it back, then ends the run", func(t *testing.T, pr *receiverRun, ds *durableMem) *Receiver {
			if n, err := pr.p.Undeliver(); n != 1 || err != nil {
				t.Fatalf("Undeliver = %d, %v; want 1", n, err)
			}
			endRun(t, pr.p, RunOutcome{RunID: "run-1"})
			return pr.p
		}, true, ""},
	}
	for _, g := range givers {
		for _, tt := range tests {
			t.Run(g.name+"/"+tt.name, func(t *testing.T) {
				ds := &durableMem{Store: memstore.New()}
				pr := newReceiverRun(t, WithStore(ds))
				id := g.give(t, pr)
				if marked(t, ds, id) {
					t.Fatal("marked heard before the model answered")
				}
				next := tt.then(t, pr, ds)
				if got := marked(t, ds, id); got != (tt.markedWhen != "") {
					t.Fatalf("marked = %v after the run, want %v", got, tt.markedWhen != "")
				}
				if err := next.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
					t.Fatal(err)
				}
				var want []string
				if tt.again {
					want = []string{id}
				}
				if got := deliverIDs(t, next); !slices.Equal(got, want) {
					t.Fatalf("the next run's first step handed out %q, want %q", got, want)
				}
				if got := deliverIDs(t, next); len(got) != 0 {
					t.Fatalf("the next run's second step handed out %q, want nothing", got)
				}
				if !marked(t, ds, id) {
					t.Fatal("not marked heard after the next run's second step")
				}
				if n := pr.m.answers.held(); n != 0 {
					t.Fatalf("%d ends still held for calls that returned", n)
				}
			})
		}
	}
}

// A host that keeps an aborted run's conversation shows its events to the
// model in the owner's next run: they are not handed out again, and are
// marked heard once that run's model answered (its second step).
func TestAbortedRunsEventsHeardInTheNextRun(t *testing.T) {
	for _, g := range givers {
		t.Run(g.name, func(t *testing.T) {
			ds := &durableMem{Store: memstore.New()}
			pr := newReceiverRun(t, WithStore(ds))
			id := g.give(t, pr)
			endRun(t, pr.p, RunOutcome{RunID: "run-1", Aborted: true})
			if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			if got := deliverIDs(t, pr.p); len(got) != 0 || marked(t, ds, id) {
				t.Fatalf("next run's first step: handed out %q, marked %v; want nothing, unmarked", got, marked(t, ds, id))
			}
			if got := deliverIDs(t, pr.p); len(got) != 0 || !marked(t, ds, id) {
				t.Fatalf("next run's second step: handed out %q, marked %v; want nothing, marked", got, marked(t, ds, id))
			}
		})
	}
}

// Undeliver outside a run is ErrNoRun; with nothing handed out it gives
// back nothing.
func TestUndeliverOutsideARun(t *testing.T) {
	pr := newReceiverRun(t)
	if n, err := pr.p.Undeliver(); n != 0 || err != nil {
		t.Fatalf("Undeliver with nothing handed out = %d, %v", n, err)
	}
	endRun(t, pr.p, RunOutcome{RunID: "run-1"})
	if n, err := pr.p.Undeliver(); n != 0 || err != ErrNoRun {
		t.Fatalf("Undeliver outside a run = %d, %v; want 0, ErrNoRun", n, err)
	}
}

func deliverIDs(t *testing.T, r *Receiver) []string {
	t.Helper()
	evs, err := r.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return eventIDs(evs)
}

func endRun(t *testing.T, r *Receiver, out RunOutcome) {
	t.Helper()
	if err := r.RunEnd(t.Context(), out); err != nil {
		t.Fatal(err)
	}
}

// reopen closes pr's Receiver and makes the owner's next one.
func reopen(t *testing.T, pr *receiverRun) *Receiver {
	t.Helper()
	if err := pr.p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, err := pr.m.NewReceiver("thread-1", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func marked(t *testing.T, ds *durableMem, id string) bool {
	t.Helper()
	m, err := ds.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m.Announced
}

// Every boundary but WaitEvent does its work with an ended request
// context (issue 30, item 2): RunStart restores, Deliver hands out, RunEnd
// marks, on a store whose calls fail once their context has ended.
func TestBoundariesWithAnEndedContext(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	m := newTestManager(t, WithStore(ctxStrict{ds}))
	id := finishTasks(t, m, "thread-1", nil)[0]
	r, err := m.NewReceiver("thread-1", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.RunStart(ended, RunInfo{RunID: "run-1"}); err != nil {
		t.Fatalf("RunStart with an ended context: %v", err)
	}
	if got := deliverIDs(t, r); !slices.Equal(got, []string{id}) {
		t.Fatalf("handed out %q, want %q", got, id)
	}
	if err := r.RunEnd(ended, RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if !marked(t, ds, id) {
		t.Fatal("not marked after a RunEnd with an ended context")
	}
}

// With no run of the owner open (its Receiver idle), a foreground call's
// result is marked heard when the call returns, as before decision 804:
// no boundary will prove it, and the owner's next run hears nothing of it.
func TestForegroundResultOutsideARunMarkedAtOnce(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	endRun(t, pr.p, RunOutcome{RunID: "run-1"})
	res, err := pr.o.Foreground(t.Context(), time.Hour, func(context.Context, *Task) (any, error) { return "ok", nil })
	if err != nil || res.Status != bgtype.StatusCompleted {
		t.Fatalf("Foreground = %+v, %v; want its result", res, err)
	}
	if !marked(t, ds, res.TaskID) {
		t.Fatal("not marked heard when the call returned, with no run open")
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if got := deliverIDs(t, pr.p); len(got) != 0 {
		t.Fatalf("the next run handed out %q, want nothing", got)
	}
}

// A call's result is heard by the model call that follows it: an end a
// call returned is not marked by the boundary that precedes that model
// call, and a run that ends right after the call (no model call read it)
// carries it to the owner's next run, whose second step marks it
// (decision 804).
func TestAnswerHeardByTheNextModelCall(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	deliverIDs(t, pr.p) // the step whose model call asks for the tool
	res, err := pr.o.Foreground(t.Context(), time.Hour, func(context.Context, *Task) (any, error) { return "ok", nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := deliverIDs(t, pr.p); len(got) != 0 || marked(t, ds, res.TaskID) {
		t.Fatalf("the step after the call: handed out %q, marked %v; want nothing, unmarked", got, marked(t, ds, res.TaskID))
	}
	if got := deliverIDs(t, pr.p); len(got) != 0 || !marked(t, ds, res.TaskID) {
		t.Fatalf("the step after its model call: handed out %q, marked %v; want nothing, marked", got, marked(t, ds, res.TaskID))
	}

	res, err = pr.o.Foreground(t.Context(), time.Hour, func(context.Context, *Task) (any, error) { return "late", nil })
	if err != nil {
		t.Fatal(err)
	}
	endRun(t, pr.p, RunOutcome{RunID: "run-1"})
	if marked(t, ds, res.TaskID) {
		t.Fatal("a result no model call read was marked at the run's end")
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if got := deliverIDs(t, pr.p); len(got) != 0 || marked(t, ds, res.TaskID) {
		t.Fatalf("next run's first step: handed out %q, marked %v; want nothing (the kept conversation has it), unmarked", got, marked(t, ds, res.TaskID))
	}
	if got := deliverIDs(t, pr.p); len(got) != 0 || !marked(t, ds, res.TaskID) {
		t.Fatalf("next run's second step: handed out %q, marked %v; want nothing, marked", got, marked(t, ds, res.TaskID))
	}
	if n := pr.m.answers.held(); n != 0 {
		t.Fatalf("%d ends still held for calls that returned", n)
	}
}
