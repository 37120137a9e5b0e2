package bgtask

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// perOwnerState counts what the Manager keeps per owner, map by map.
func perOwnerState(m *Manager) map[string]int {
	got := make(map[string]int)
	m.mu.Lock()
	got["owners"], got["runs"], got["nodes"] = len(m.owners), len(m.runs), len(m.nodes)
	m.mu.Unlock()
	m.inboxMu.RLock()
	got["inboxes"], got["idleBox"] = len(m.inboxes), len(m.idleBox)
	m.inboxMu.RUnlock()
	m.keepMu.Lock()
	got["sinks"], got["kept"] = len(m.sinks), len(m.kept)
	got["keptOrder"] = m.keptOrder.progress.Len() + m.keptOrder.ends.Len()
	m.keepMu.Unlock()
	m.sent.mu.Lock()
	got["sent"] = len(m.sent.sent)
	m.sent.mu.Unlock()
	return got
}

func emptyState(got map[string]int) bool {
	for _, n := range got {
		if n != 0 {
			return false
		}
	}
	return true
}

// storeKinds are the two ways a Manager keeps what a closed Plugin left:
// in memory (MemoryStore), or on the records (a durable store).
func storeKinds() []struct {
	name string
	opts func() []Option
} {
	return []struct {
		name string
		opts func() []Option
	}{
		{"memory", func() []Option { return nil }},
		{"durable", func() []Option { return []Option{WithStore(&durableMem{Store: memstore.New()})} }},
	}
}

// A Manager has one live Plugin per owner: a second NewPlugin of the owner
// is refused whether or not the first has a run open, a sub-agent's
// Plugin (WithInbox) included, and another owner is not concerned; once
// the first is closed, the owner's next Plugin is made.
func TestNewPluginOnePerOwner(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("run open=%v", open), func(t *testing.T) {
			m := newTestManager(t)
			first, err := m.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if open {
				if err := first.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
			}
			second, err := m.NewReceiver("thread-1", ReceiverConfig{})
			if !errors.Is(err, ErrReceiverExists) || err.Error() != "bgtask: the owner has a live receiver on this Manager" || second != nil {
				t.Fatalf("second NewPlugin = %v, %v; want nil, ErrReceiverExists", second, err)
			}
			if _, err := m.NewReceiver("thread-2", ReceiverConfig{}); err != nil {
				t.Fatalf("NewPlugin of another owner: %v", err)
			}
			// The first one still gets its owner's events.
			id := finishTasks(t, m, "thread-1", nil)[0]
			if open {
				if msgs, err := first.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{id}) {
					t.Fatalf("first Plugin delivered %q, %v; want %s", eventIDs(msgs), err, id)
				}
			}
			if err := first.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			next, err := m.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatalf("NewPlugin after Close: %v", err)
			}
			if err := next.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			// With the run open, the first one handed it out, but no later
			// step proved the model heard it: the next one gets it again.
			want := []string{id}
			if msgs, err := next.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), want) {
				t.Fatalf("next Plugin delivered %q, %v; want %q", eventIDs(msgs), err, want)
			}
		})
	}
	t.Run("sub-agent", func(t *testing.T) {
		m := newTestManager(t)
		ready := make(chan *Task, 1)
		release := make(chan struct{})
		id, err := m.Owner("thread-1").SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			ready <- tk
			<-release
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tk := <-ready
		defer func() { close(release); waitTask(t, m, id) }()
		p, err := m.NewReceiver(tk.ID(), ReceiverConfig{Inbox: tk.Inbox()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.NewReceiver(tk.ID(), ReceiverConfig{Inbox: tk.Inbox()}); !errors.Is(err, ErrReceiverExists) {
			t.Fatalf("second sub-agent Plugin: %v, want ErrReceiverExists", err)
		}
		if err := p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := m.NewReceiver(tk.ID(), ReceiverConfig{Inbox: tk.Inbox()}); err != nil {
			t.Fatalf("sub-agent Plugin after Close: %v", err)
		}
	})
}

// No event is lost or repeated across Close: a completion kept between
// runs, one left undrained in the run open at Close, and one that comes
// after Close are each delivered once by the owner's next Plugin, with the
// MemoryStore (the Manager keeps them) and a durable store (the records
// stay unannounced and the next RunStart announces them).
func TestPluginCloseHandsEventsToTheNextPlugin(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			pr := newReceiverRun(t, kind.opts()...)
			between, a := spawnProbe(t, t.Context(), pr.o)
			undrained, b := spawnProbe(t, t.Context(), pr.o)
			after, c := spawnProbe(t, t.Context(), pr.o)
			if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
				t.Fatal(err)
			}
			close(a.release)
			waitTask(t, pr.m, between)
			if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			close(b.release)
			waitTask(t, pr.m, undrained)
			if err := pr.p.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			close(c.release)
			waitTask(t, pr.m, after)

			next, err := pr.m.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := next.RunStart(t.Context(), RunInfo{RunID: "run-3"}); err != nil {
				t.Fatal(err)
			}
			msgs, err := next.Deliver(t.Context())
			if want := []string{between, undrained, after}; err != nil || !slices.Equal(eventIDs(msgs), want) {
				t.Fatalf("next Plugin delivered %q, %v; want %q once each", eventIDs(msgs), err, want)
			}
			if err := next.RunEnd(t.Context(), RunOutcome{RunID: "run-3"}); err != nil {
				t.Fatal(err)
			}
			if err := next.RunStart(t.Context(), RunInfo{RunID: "run-4"}); err != nil {
				t.Fatal(err)
			}
			if msgs, err := next.Deliver(t.Context()); err != nil || len(msgs) != 0 {
				t.Fatalf("the run after delivered %q, %v; want nothing", eventIDs(msgs), err)
			}
			if pr.m.durable() {
				for _, id := range []string{between, undrained, after} {
					if meta := getTask(t, pr.m, id); !meta.Announced {
						t.Errorf("%s not announced after the next Plugin handed it out", id)
					}
				}
			}
		})
	}
}

// After every owner's Plugin is closed and its tasks ended, the Manager
// keeps nothing per owner: no Plugin, no inbox, no kept event, no run, no
// memory of deliveries. An owner whose task ends after Close is forgotten
// too once its next Plugin took the event (with a durable store the record
// holds it, so nothing is kept at all).
func TestPluginCloseLeavesNothingPerOwner(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			m := newTestManager(t, kind.opts()...)
			for i := range 20 {
				owner := fmt.Sprint("thread-", i)
				p, err := m.NewReceiver(owner, ReceiverConfig{})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				ctx := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"})
				id, err := p.Owner().Spawn(ctx, func(context.Context, *Task) (any, error) { return "ok", nil })
				if err != nil {
					t.Fatal(err)
				}
				waitTask(t, m, id)
				if msgs, err := p.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{id}) {
					t.Fatalf("Deliver = %q, %v", eventIDs(msgs), err)
				}
				if err := p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				if err := p.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if got := perOwnerState(m); !emptyState(got) {
				t.Fatalf("after Close of every owner the Manager keeps %v, want nothing", got)
			}

			p, err := m.NewReceiver("late", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			id, probe := spawnProbe(t, t.Context(), p.Owner())
			if err := p.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			close(probe.release)
			waitTask(t, m, id)
			wantKept := 1
			if m.durable() {
				wantKept = 0
			}
			if got := perOwnerState(m); got["kept"] != wantKept || got["inboxes"] != 0 || got["owners"] != 0 || got["sent"] != 0 {
				t.Fatalf("after a task ended past Close the Manager keeps %v, want %d kept event", got, wantKept)
			}
			next, err := m.NewReceiver("late", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := next.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
				t.Fatal(err)
			}
			if msgs, err := next.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{id}) {
				t.Fatalf("next Plugin delivered %q, %v; want %s", eventIDs(msgs), err, id)
			}
			if err := next.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil { // the model answered: heard
				t.Fatal(err)
			}
			if err := next.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := perOwnerState(m); !emptyState(got) {
				t.Fatalf("after the last Close the Manager keeps %v, want nothing", got)
			}
		})
	}
}

// The events kept for an owner are bounded: quiet progress is coalesced,
// and at the limit the oldest event that does not end a task goes first;
// one that ends a task goes only when all kept events end tasks, and a new
// event that does not end one is then the one dropped.
func TestEventKeepLimit(t *testing.T) {
	term := func(id string) bgtype.Event { return bgtype.Event{Kind: bgtype.EventCompleted, TaskID: id} }
	msg := func(id string) bgtype.Event {
		return bgtype.Event{Kind: bgtype.EventCustom, EventType: "note", TaskID: id}
	}
	quiet := func(id, payload string) bgtype.Event {
		return bgtype.Event{Kind: bgtype.EventCustom, EventType: "progress", TaskID: id, Quiet: true, Payload: []byte(payload)}
	}
	for _, tc := range []struct {
		name    string
		add     []bgtype.Event
		want    []string // kind:task of the kept events
		dropped []string
	}{
		{"coalesced", []bgtype.Event{quiet("a", "1"), quiet("a", "2"), term("b")}, []string{"custom:a:2", "completed:b"}, nil},
		{"non-terminal first", []bgtype.Event{term("a"), msg("b"), term("c"), term("d")}, []string{"completed:a", "completed:c", "completed:d"}, []string{"custom:b"}},
		{"all terminal", []bgtype.Event{term("a"), term("b"), term("c"), term("d")}, []string{"completed:b", "completed:c", "completed:d"}, []string{"completed:a"}},
		{"new non-terminal", []bgtype.Event{term("a"), term("b"), term("c"), msg("d")}, []string{"completed:a", "completed:b", "completed:c"}, []string{"custom:d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k eventKeep
			var dropped []string
			for _, ev := range tc.add {
				if d, full := k.add(ev, 3); full {
					dropped = append(dropped, string(d.Kind)+":"+d.TaskID)
				}
			}
			var got []string
			for _, ev := range k.evs {
				s := string(ev.Kind) + ":" + ev.TaskID
				if ev.Quiet {
					s += ":" + string(ev.Payload)
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(dropped, tc.dropped) {
				t.Fatalf("kept %q, dropped %q; want %q, %q", got, dropped, tc.want, tc.dropped)
			}
		})
	}
	m := newTestManager(t)
	if _, err := m.NewReceiver("thread-1", ReceiverConfig{KeepLimit: -1}); err == nil || err.Error() != "bgtask: NewReceiver: keep limit -1 events, want at least 1 (0 for the default)" {
		t.Fatalf("KeepLimit -1: %v", err)
	}
	if r, err := m.NewReceiver("thread-1", ReceiverConfig{}); err != nil || r.keepMax != defaultKeepLimit {
		t.Fatalf("KeepLimit 0: %v, %v; want the default", r, err)
	}
}

// A run is a value: RunStart while a run is open is refused and changes
// nothing; a RunEnd naming another run (empty, the next one, or an old
// request's, arriving late) ends and cancels nothing; the open run goes on.
func TestPluginRunIsAValue(t *testing.T) {
	pr := newReceiverRun(t) // run-1 is open
	id1, p1 := spawnProbe(t, WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "c1"}), pr.o)
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); !errors.Is(err, ErrRunOpen) || err.Error() != "bgtask: a run is already open" {
		t.Fatalf("RunStart while run-1 is open: %v, want ErrRunOpen", err)
	}
	wrongRun := "bgtask: no run started: the run id is not the open run's"
	for _, run := range []string{"run-2", ""} {
		if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: run, Canceled: true}); !errors.Is(err, ErrNoRun) || err.Error() != wrongRun {
			t.Fatalf("RunEnd(%q) while run-1 is open: %v, want %q", run, err, wrongRun)
		}
	}
	if err := p1.ctxErr(t); err != nil {
		t.Fatalf("run-1's task was cancelled by a RunEnd of another run: %v", err)
	}
	if _, err := pr.p.Deliver(t.Context()); err != nil {
		t.Fatalf("run-1 no longer open: %v", err)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	id2, p2 := spawnProbe(t, WithToolCall(t.Context(), ToolCall{RunID: "run-2", CallID: "c2"}), pr.o)
	// run-1's request, late, stops its run: run-2 is not touched.
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1", Canceled: true}); !errors.Is(err, ErrNoRun) || err.Error() != wrongRun {
		t.Fatalf("late RunEnd of run-1: %v, want %q", err, wrongRun)
	}
	if err := p2.ctxErr(t); err != nil {
		t.Fatalf("run-2's task was cancelled by run-1's late RunEnd: %v", err)
	}
	if _, err := pr.p.Deliver(t.Context()); err != nil {
		t.Fatalf("run-2 no longer open: %v", err)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-2", Canceled: true}); err != nil {
		t.Fatal(err)
	}
	if cause := <-p2.cause; !errors.Is(cause, errRunCanceled) {
		t.Fatalf("run-2's task ended with cause %v, want ErrCanceled (run)", cause)
	}
	waitStatus(t, pr.m, id2, bgtype.StatusCanceled)
	if err := p1.ctxErr(t); err != nil {
		t.Fatalf("run-1's task was cancelled with run-2: %v", err)
	}
	close(p1.release)
	waitStatus(t, pr.m, id1, bgtype.StatusCompleted)
}

// ctxStrict is a durable store whose commits fail once their context has
// ended, as a database driver's do.
type ctxStrict struct{ *durableMem }

func (s ctxStrict) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.durableMem.Commit(ctx, owner, actions...)
}

// A request's context is not the run's: a client that hangs up (or a
// request deadline) ends the run without cancelling its tasks, whose ends
// reach the next run; a user's stop (ErrRunStopped) cancels them. RunEnd
// and the marks of a boundary do their work with the ended context.
func TestRunEndOfAnEndedRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cause   error
		stopped bool
	}{
		{"client hung up", context.Canceled, false},
		{"request deadline", context.DeadlineExceeded, false},
		{"user stopped", ErrRunStopped, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &durableMem{Store: memstore.New()}
			pr := newReceiverRun(t, WithStore(ctxStrict{ds}))
			req, cancel := context.WithCancelCause(t.Context())
			id, probe := spawnProbe(t, WithToolCall(req, ToolCall{RunID: "run-1", CallID: "c1"}), pr.o)
			done := finishTasks(t, pr.m, "thread-1", nil)[0]
			cancel(tc.cause)
			if RunStopped(req) != tc.stopped {
				t.Fatalf("RunStopped = %v, want %v", RunStopped(req), tc.stopped)
			}
			// The loop's last boundary, with the request's ended context:
			// what it hands out is marked all the same, by the RunEnd of a
			// run the model answered.
			if msgs, err := pr.p.Deliver(req); err != nil || !slices.Equal(eventIDs(msgs), []string{done}) {
				t.Fatalf("Deliver with the ended request = %q, %v", eventIDs(msgs), err)
			}
			if err := pr.p.RunEnd(req, RunOutcome{RunID: "run-1", Canceled: RunStopped(req)}); err != nil {
				t.Fatalf("RunEnd with the ended request: %v", err)
			}
			if meta := getTask(t, pr.m, done); !meta.Announced {
				t.Fatal("the event handed out with an ended request context was not marked")
			}
			if tc.stopped {
				if cause := <-probe.cause; !errors.Is(cause, errRunCanceled) {
					t.Fatalf("the stopped run's task ended with cause %v, want ErrCanceled (run)", cause)
				}
				waitStatus(t, pr.m, id, bgtype.StatusCanceled)
				return
			}
			if err := probe.ctxErr(t); err != nil {
				t.Fatalf("the task was cancelled by the request's end: %v", err)
			}
			close(probe.release)
			waitStatus(t, pr.m, id, bgtype.StatusCompleted)
			if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			if msgs, err := pr.p.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{id}) {
				t.Fatalf("the next run delivered %q, %v; want the task's end once", eventIDs(msgs), err)
			}
		})
	}
}

// Close commits the marks a boundary could not, even with an ended
// request context.
func TestPluginCloseCommitsPendingMarks(t *testing.T) {
	ds := &durableMem{Store: memstore.New(), FailMark: errors.New("disk full")}
	pr := newReceiverRun(t, WithStore(ctxStrict{ds}))
	ids := finishTasks(t, pr.m, "thread-1", nil)
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), ids) {
		t.Fatalf("Deliver = %q, %v", eventIDs(msgs), err)
	}
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 { // the next step: the mark fails
		t.Fatalf("second Deliver = %q, %v", eventIDs(msgs), err)
	}
	ds.Mu.Lock()
	ds.FailMark = nil
	ds.Mu.Unlock()
	req, cancel := context.WithCancel(t.Context())
	cancel()
	if err := pr.p.Close(req); err != nil {
		t.Fatalf("Close with an ended context: %v", err)
	}
	if meta := getTask(t, pr.m, ids[0]); !meta.Announced {
		t.Fatal("Close did not commit the pending mark")
	}
	if got := perOwnerState(pr.m); !emptyState(got) {
		t.Fatalf("after Close the Manager keeps %v", got)
	}
}

// forwardedStore holds a gone sub-agent of thread-1 (left running by a dead
// process, or interrupted by a reaper: agent is its status) whose two tasks
// ended but were never announced.
func forwardedStore(t *testing.T, agent bgtype.Status) (*durableMem, []string) {
	t.Helper()
	ds := &durableMem{Store: memstore.New()}
	for _, r := range []bgtype.TaskMeta{
		{ID: "task_1_agent", Owner: "thread-1", Type: bgtype.TypeSubAgent, Status: agent, CreatedAt: rt0, Instance: "gone", Attempt: 1},
		{ID: "task_2_child", Owner: "task_1_agent", Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, CreatedAt: rt1, FinishedAt: rt1, Instance: "gone", Attempt: 1, Parent: bgtype.Parent{TaskID: "task_1_agent"}},
		{ID: "task_3_child", Owner: "task_1_agent", Type: bgtype.TypeTask, Status: bgtype.StatusFailed, Error: "boom", CreatedAt: rt2, FinishedAt: rt2, Instance: "gone", Attempt: 1, Parent: bgtype.Parent{TaskID: "task_1_agent"}},
	} {
		if err := ds.Store.Commit(t.Context(), r.Owner, store.UpsertAction(r)); err != nil {
			t.Fatal(err)
		}
	}
	return ds, []string{"task_1_agent", "task_2_child", "task_3_child"}
}

// runOnce starts a run of owner on a new Manager over store, optionally
// delivers once and ends the run (the model heard it), and shuts the
// Manager down without a mark (a crash, for what was not delivered). It returns the terminal events delivered.
func runOnce(t *testing.T, store store.Store, owner string, deliver bool) []string {
	t.Helper()
	m, err := New(WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownManager(t, m)
	p, err := m.NewReceiver(owner, ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), RunInfo{RunID: "run"}); err != nil {
		t.Fatal(err)
	}
	if !deliver {
		return nil
	}
	msgs, err := p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunEnd(t.Context(), RunOutcome{RunID: "run"}); err != nil { // the model answered: heard
		t.Fatal(err)
	}
	return eventIDs(msgs)
}

// The ends of a gone sub-agent's tasks, forwarded to its owner at RunStart,
// are marked only once heard, under their own owner: a crash between
// RunStart and the first step loses none, and after the run that hands
// them out no restart announces them again.
func TestForwardedEventsExactlyOnceAcrossCrashes(t *testing.T) {
	ds, ids := forwardedStore(t, bgtype.StatusRunning)
	if got := runOnce(t, ds, "thread-1", false); len(got) != 0 { // RunStart forwards, then the process dies
		t.Fatalf("delivered %q before any step", got)
	}
	for _, id := range ids[1:] {
		if meta, _ := ds.Get(t.Context(), id); meta.Announced {
			t.Fatalf("%s marked announced before it was handed out", id)
		}
	}
	if got := runOnce(t, ds, "thread-1", true); !slices.Equal(got, ids) {
		t.Fatalf("the run after the crash delivered %q, want %q", got, ids)
	}
	for _, id := range ids {
		if meta, _ := ds.Get(t.Context(), id); !meta.Announced {
			t.Errorf("%s not announced after the run that handed it out", id)
		}
	}
	if got := runOnce(t, ds, "thread-1", true); len(got) != 0 {
		t.Fatalf("the next restart delivered %q again", got)
	}
}

// A step that also picks up a store's notices drops only what was really
// handed out: a gone sub-agent's forwarded tasks are delivered with an
// unrelated notice. A notice of such a task is delivered once with its
// forwarded event, and a notice of a task of a gone sub-agent that Restore
// did not forward (its agent was announced already) is delivered and
// marked under its own owner.
func TestForwardedEventsWithNotices(t *testing.T) {
	ds, ids := forwardedStore(t, bgtype.StatusInterrupted) // a reaper interrupted it; the notice went before
	f := &fakeShared{Store: ds.Store, Notices: map[string][]bgtype.Event{}}
	other := bgtype.TaskMeta{ID: "task_9_reaped", Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusInterrupted, Error: "reaped", ErrorKind: bgtype.KindInterrupted, CreatedAt: rt2, FinishedAt: rt2, Instance: "gone", Attempt: 2}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(other)); err != nil {
		t.Fatal(err)
	}
	f.Notices["thread-1"] = []bgtype.Event{
		{Kind: bgtype.EventInterrupted, TaskID: other.ID, Error: "reaped"},
		{Kind: bgtype.EventCompleted, TaskID: "task_2_child"}, // also forwarded by Restore
	}
	pr := newReceiverRun(t, WithStore(f))
	msgs, err := pr.p.Deliver(t.Context())
	got := eventIDs(msgs)
	slices.Sort(got)
	want := append(slices.Clone(ids), other.ID)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Deliver = %q, %v; want %q once each", got, err, want)
	}
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 { // the next step: heard
		t.Fatalf("next Deliver = %q, %v; want nothing", eventIDs(msgs), err)
	}
	for _, id := range want {
		if meta, _ := f.Get(t.Context(), id); !meta.Announced {
			t.Errorf("%s not announced after it was handed out", id)
		}
	}

	// A reaper's notice, sent to the owner, of a gone sub-agent's task
	// that no Restore forwarded: the agent's own end was announced.
	late := bgtype.TaskMeta{ID: "task_4_child", Owner: "task_1_agent", Type: bgtype.TypeTask, Status: bgtype.StatusInterrupted, Error: "reaped", CreatedAt: rt2, FinishedAt: rt2, Instance: "gone", Attempt: 2}
	if err := f.Commit(t.Context(), "task_1_agent", store.UpsertAction(late)); err != nil {
		t.Fatal(err)
	}
	f.Mu.Lock()
	f.Notices["thread-1"] = []bgtype.Event{{Kind: bgtype.EventInterrupted, TaskID: late.ID, Error: "reaped"}}
	f.Mu.Unlock()
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{late.ID}) {
		t.Fatalf("Deliver of the notice = %q, %v; want %s", eventIDs(msgs), err, late.ID)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if meta, _ := f.Get(t.Context(), late.ID); !meta.Announced {
		t.Fatal("the notice's record was not marked under its own owner")
	}
}

// An owner's MarkAnnounced with another owner's task ids changes nothing
// about them: not their records, and not the Manager's memory of what it
// delivered, so the victim's next run does not announce them again; a
// task forwarded to the victim is not the attacker's to mark either.
func TestMarkAnnouncedOfAnotherOwnersTasks(t *testing.T) {
	ds, fwd := forwardedStore(t, bgtype.StatusRunning)
	pr := newReceiverRun(t, WithStore(ds)) // forwards the gone sub-agent's tasks to thread-1
	own := finishTasks(t, pr.m, "thread-1", nil)
	victim := append(slices.Clone(fwd), own...)
	if err := pr.m.Owner("thread-2").MarkAnnounced(t.Context(), victim...); err != nil {
		t.Fatal(err)
	}
	for _, id := range victim {
		if meta, _ := ds.Get(t.Context(), id); meta.Announced {
			t.Errorf("%s marked announced by another owner", id)
		}
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil { // a Restore again
		t.Fatal(err)
	}
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil || !slices.Equal(eventIDs(msgs), victim) {
		t.Fatalf("victim's next run delivered %q, %v; want %q once each", eventIDs(msgs), err, victim)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range victim {
		if meta, _ := ds.Get(t.Context(), id); !meta.Announced {
			t.Errorf("%s not announced after the victim took it", id)
		}
	}
}

// Ends that race a Close and the owner's next Plugin reach the next one,
// each once, whichever way the race goes: what the first handed out before
// its Close was not yet heard, and comes again.
func TestPluginCloseRacingEnds(t *testing.T) {
	for _, kind := range storeKinds() {
		t.Run(kind.name, func(t *testing.T) {
			pr := newReceiverRun(t, kind.opts()...)
			release := make(chan struct{})
			var ids []string
			for range 40 {
				id, err := pr.o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { <-release; return "ok", nil })
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			close(release) // the ends race what follows
			first, err := pr.p.Deliver(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := pr.p.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			next, err := pr.m.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := next.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				waitTask(t, pr.m, id)
			}
			second, err := next.Deliver(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// What the first handed out was never proven heard (no boundary
			// followed it): Close gives it back, and the next Receiver hands
			// out every end, each once.
			want := slices.Sorted(slices.Values(ids))
			if got := slices.Sorted(slices.Values(eventIDs(second))); !slices.Equal(got, want) {
				t.Fatalf("the next Receiver delivered %d ends (the first %d), want each of %d once", len(got), len(first), len(want))
			}
			if got := slices.Compact(slices.Sorted(slices.Values(eventIDs(first)))); len(got) != len(first) {
				t.Fatalf("the first Receiver delivered an end twice: %v", eventIDs(first))
			}
		})
	}
}

// An emptied map is made anew once it has seen shrinkAfter deletes (a Go
// map keeps the memory of its largest size), not before, and never while
// it holds entries.
func TestShrunk(t *testing.T) {
	same := func(a, b map[int]bool) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	mp, n := map[int]bool{}, 0
	for i := range shrinkAfter {
		mp[i] = true
	}
	for i := range shrinkAfter - 1 {
		delete(mp, i)
		if got := shrunk(mp, &n); !same(got, mp) {
			t.Fatalf("made anew after %d deletes with %d entries left", i+1, len(mp))
		}
	}
	delete(mp, shrinkAfter-1)
	if got := shrunk(mp, &n); same(got, mp) || len(got) != 0 || n != 0 {
		t.Fatalf("empty after %d deletes: same map %v, %d entries, count %d; want a new empty map, count 0", shrinkAfter, same(got, mp), len(got), n)
	}
	small, n := map[int]bool{1: true}, 0
	for range 2 * shrinkAfter {
		delete(small, 1)
		got := shrunk(small, &n)
		if n == 0 {
			if same(got, small) {
				t.Fatal("not made anew at the count")
			}
			return
		}
		if !same(got, small) {
			t.Fatalf("made anew after %d deletes, want %d", n, shrinkAfter)
		}
		small[1] = true
	}
	t.Fatal("a map that comes and goes was never made anew")
}

// receiverRun makes a Manager and the Receiver of thread-1 with a run
// started, and records the events OnWake hears of.
type receiverRun struct {
	m     *Manager
	p     *Receiver
	o     Owner
	mu    sync.Mutex
	woken []bgtype.Event
}

func newReceiverRun(t *testing.T, opts ...Option) *receiverRun {
	t.Helper()
	pr := &receiverRun{m: newTestManager(t, opts...)}
	pr.o = pr.m.Owner("thread-1")
	var err error
	pr.p, err = pr.m.NewReceiver("thread-1", ReceiverConfig{OnWake: func(ev bgtype.Event) {
		pr.mu.Lock()
		pr.woken = append(pr.woken, ev)
		pr.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	return pr
}

func (pr *receiverRun) wokenKinds() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []string
	for _, ev := range pr.woken {
		out = append(out, string(ev.Kind))
	}
	return out
}

// messageKinds lists the kinds of evs.
func messageKinds(evs []bgtype.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Kind))
	}
	return out
}
