package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
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
	return newFleetVia(t, nil, opts...)
}

// newFleetVia is newFleet whose B opens the DSN via returns for the
// database's (via nil: the database's own).
func newFleetVia(t *testing.T, via func(dsn string) string, opts ...pgstore.Option) *fleet {
	t.Helper()
	opts = append([]pgstore.Option{pgstore.WithPollInterval(time.Hour)}, opts...)
	f := &fleet{}
	f.sa, f.dsn = openStore(t, opts...)
	bDSN := f.dsn
	if via != nil {
		bDSN = via(f.dsn)
	}
	sb, err := pgstore.Open(t.Context(), bDSN, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	f.sb = sb
	f.ma = startManagerWith(t, f.sa, "inst_a")
	f.mb = startManagerWith(t, f.sb, "inst_b")
	return f
}

// newDeafenedFleet is newFleet (with opts) whose A can be made to hear
// nothing more: deafenA cuts A's listener, which reconnects only after an
// hour (A polls hourly too). It first waits for the pass of A's poller
// that the listener's connect asked for: run after the cut, at a time no
// test controls, that pass would hand over a message recorded meanwhile.
func newDeafenedFleet(t *testing.T, opts ...pgstore.Option) (f *fleet, deafenA func()) {
	t.Helper()
	return newDeafenedFleetVia(t, nil, opts...)
}

// newDeafenedFleetVia is newDeafenedFleet whose B opens the DSN via
// returns (newFleetVia).
func newDeafenedFleetVia(t *testing.T, via func(dsn string) string, opts ...pgstore.Option) (f *fleet, deafenA func()) {
	t.Helper()
	var passes atomic.Int64
	f = newFleetVia(t, via, append(opts, pgstore.WithReconnectBackoff(time.Hour, time.Hour), pgstore.WithAfterPoll(func(id string) {
		if id == "inst_a" {
			passes.Add(1)
		}
	}))...)
	return f, func() {
		t.Helper()
		listener := func() int64 {
			return sqlExec(t, f.dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_a")
		}
		waitFor(t, "A's poller made the pass of its listener's connect", func() bool { return passes.Load() > 0 })
		if n := sqlExec(t, f.dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_a"); n != 1 {
			t.Fatalf("ended %d listening sessions of A, want 1", n)
		}
		waitFor(t, "A's listener gone", func() bool { return listener() == 0 })
	}
}

// startManagerWith is startManager with Manager options.
func startManagerWith(t *testing.T, s *pgstore.Store, id string, opts ...bgtask.Option) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(append([]bgtask.Option{bgtask.WithStore(s), bgtask.WithInstance(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m.Runtime()); err != nil {
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
	t.Parallel()
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
	t.Parallel()
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

// waitOut is what a Wait returned.
type waitOut struct {
	meta bgtype.TaskMeta
	err  error
}

func goWait(ctx context.Context, wait func(context.Context, string) (bgtype.TaskMeta, error), id string) <-chan waitOut {
	c := make(chan waitOut, 1)
	go func() {
		meta, err := wait(ctx, id)
		c <- waitOut{meta, err}
	}()
	return c
}

// Wait on B for a task that runs on A returns when A commits its end, with
// what a local Wait returns; WaitSettled returns at A's input request;
// another owner's view gets not found.
func TestWaitAcrossInstances(t *testing.T) {
	t.Parallel()
	for _, killListener := range []bool{false, true} {
		t.Run(fmt.Sprintf("killListener=%v", killListener), func(t *testing.T) {
			// Without B's listener only the poll reads the record; the
			// poll interval decides nothing but how soon.
			poll := time.Hour
			if killListener {
				poll = 20 * time.Millisecond
			}
			f := newFleet(t, pgstore.WithPollInterval(poll), pgstore.WithReconnectBackoff(time.Hour, time.Hour))
			listener := func() int64 {
				return sqlExec(t, f.dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_b")
			}
			waitFor(t, "B listens", func() bool { return listener() == 1 })
			if killListener {
				sqlExec(t, f.dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_b")
				waitFor(t, "B's listener gone", func() bool { return listener() == 0 })
			}
			oa, ob := f.ma.Owner("alice"), f.mb.Owner("alice")
			release := make(chan error)
			id, err := oa.Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
				if err := <-release; err != nil {
					return nil, err
				}
				return "done", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.mb.Owner("bob").Wait(t.Context(), id); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: "+id {
				t.Fatalf("bob's Wait on B = %v, want not found", err)
			}
			done := goWait(guard(t), ob.Wait, id)
			release <- nil
			got := <-done
			if got.err != nil || got.meta.Status != bgtype.StatusCompleted || string(got.meta.Result) != `"done"` {
				t.Fatalf("B's Wait = %s %s, %v; want completed", got.meta.Status, got.meta.Result, got.err)
			}

			id, err = oa.Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
				return nil, <-release
			})
			if err != nil {
				t.Fatal(err)
			}
			done = goWait(guard(t), f.mb.Wait, id)
			release <- errors.New("boom")
			got = <-done
			var te *bgtask.TaskError
			if got.meta.Status != bgtype.StatusFailed || !errors.As(got.err, &te) || te.Message != "boom" || te.TaskID != id {
				t.Fatalf("B's Wait = %s, %v; want failed with a *TaskError", got.meta.Status, got.err)
			}

			asked := make(chan bgtype.Message, 1)
			id, err = oa.Spawn(t.Context(), func(ctx context.Context, task *bgtask.Task) (any, error) {
				msg, err := task.RequestInput(ctx, "which one?")
				asked <- msg
				return nil, err
			})
			if err != nil {
				t.Fatal(err)
			}
			got = <-goWait(guard(t), ob.WaitSettled, id)
			if got.err != nil || got.meta.Status != bgtype.StatusAwaitingInput || got.meta.Input == nil || got.meta.Input.Prompt != "which one?" {
				t.Fatalf("B's WaitSettled = %+v, %v; want awaiting input", got.meta, got.err)
			}
			if _, err := oa.Send(t.Context(), id, bgtype.Message{InReplyTo: got.meta.Input.ID, Content: "this"}); err != nil {
				t.Fatal(err)
			}
			if msg := <-asked; msg.Content != "this" {
				t.Fatalf("answer %+v", msg)
			}
		})
	}
}

// A Wait on B for a task of an instance that dies returns once a reaper
// interrupted it.
func TestWaitAcrossInstancesInstanceDies(t *testing.T) {
	t.Parallel()
	f := newFleet(t, pgstore.WithGrace(time.Hour))
	id, err := f.ma.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	done := goWait(guard(t), f.mb.Owner("alice").Wait, id)
	sqlExec(t, f.dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_a'`)
	if n, err := f.sb.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("B's reaper: %d, %v; want 1", n, err)
	}
	if got := <-done; got.err != nil || got.meta.Status != bgtype.StatusInterrupted {
		t.Fatalf("B's Wait = %s, %v; want interrupted", got.meta.Status, got.err)
	}
}

// A message from B to a sub-agent that runs on A reaches its inbox once,
// in order, and B's Send returns once it did, with A's message id; A's
// history has it. The mistakes get the errors a local send gives: a plain
// task (not a sub-agent), an answer to no request, an ended task, another
// owner's task. An answer from B to A's task's input request is returned
// by RequestInput.
func TestSendAcrossInstances(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	oa, ob := f.ma.Owner("alice"), f.mb.Owner("alice")
	got := make(chan string, 10)
	agent, err := oa.SpawnAgent(t.Context(), func(ctx context.Context, task *bgtask.Task) (any, error) {
		for {
			if err := task.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			for _, ev := range task.Inbox().Drain() {
				var msg bgtype.Message
				if err := json.Unmarshal(ev.Payload, &msg); err != nil {
					return nil, err
				}
				got <- msg.Content
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range []string{"one", "two", "three"} {
		id, err := ob.Send(guard(t), agent, bgtype.Message{From: "parent", Content: c})
		if err != nil || id == "" {
			t.Fatalf("B's Send(%q) = %q, %v", c, id, err)
		}
		ids = append(ids, id)
	}
	for _, want := range []string{"one", "two", "three"} {
		if c := <-got; c != want {
			t.Fatalf("the sub-agent got %q, want %q", c, want)
		}
	}
	hist, err := oa.Messages(t.Context(), agent)
	if err != nil || len(hist) != 3 || hist[0].ID != ids[0] || hist[2].Content != "three" || hist[2].Direction != bgtask.MessageIn {
		t.Fatalf("A's history %+v, %v; want the three messages B sent", hist, err)
	}
	if n := sqlExec(t, f.dsn, `SELECT 1 FROM bgtask_messages WHERE handled_at IS NOT NULL AND err_code = ''`); n != 3 {
		t.Fatalf("%d messages handled, want 3", n)
	}

	// Another owner's view: not found, never a hint.
	if _, err := f.mb.Owner("bob").Send(t.Context(), agent, bgtype.Message{Content: "x"}); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: "+agent {
		t.Fatalf("bob's Send = %v", err)
	}

	// A plain task: not a sub-agent; an answer to no request.
	asked := make(chan bgtype.Message, 1)
	requested := make(chan struct{})
	plain, err := oa.Spawn(t.Context(), func(ctx context.Context, task *bgtask.Task) (any, error) {
		<-requested
		msg, err := task.RequestInput(ctx, "which one?")
		asked <- msg
		return msg.Content, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Send(guard(t), plain, bgtype.Message{Content: "hi"}); !errors.Is(err, bgtask.ErrNotSubAgent) || err.Error() != "bgtask: task has no inbox (not a sub-agent): "+plain {
		t.Fatalf("B's Send to a plain task = %v", err)
	}
	if _, err := ob.Send(guard(t), plain, bgtype.Message{Content: "hi", InReplyTo: "in_none"}); !errors.Is(err, bgtask.ErrNoInputRequest) ||
		err.Error() != fmt.Sprintf("bgtask: task has no such open input request: task %s, request %q", plain, "in_none") {
		t.Fatalf("B's answer to no request = %v", err)
	}
	close(requested)
	settled, err := ob.WaitSettled(guard(t), plain)
	if err != nil || settled.Input == nil {
		t.Fatalf("WaitSettled = %+v, %v", settled, err)
	}
	if _, err := ob.Send(guard(t), plain, bgtype.Message{Content: "that one", InReplyTo: settled.Input.ID}); err != nil {
		t.Fatalf("B's answer = %v", err)
	}
	if msg := <-asked; msg.Content != "that one" {
		t.Fatalf("RequestInput returned %+v", msg)
	}
	if end, err := ob.Wait(guard(t), plain); err != nil || string(end.Result) != `"that one"` {
		t.Fatalf("the task ended %s %s, %v", end.Status, end.Result, err)
	}

	// An ended task: a *StatusError.
	_, err = ob.Send(guard(t), plain, bgtype.Message{Content: "late"})
	var se *bgtask.StatusError
	if !errors.As(err, &se) || !errors.Is(err, bgtask.ErrTerminal) || se.Status != bgtype.StatusCompleted || err.Error() != "bgtask: task "+plain+" already completed" {
		t.Fatalf("B's Send to an ended task = %v", err)
	}
}

// When A dies before it handed B's message over, the reaper fails the
// message and B's Send says that A is gone and the task interrupted.
func TestSendAcrossInstancesInstanceDies(t *testing.T) {
	t.Parallel()
	f, deafenA := newDeafenedFleet(t, pgstore.WithGrace(time.Hour))
	agent, err := f.ma.Owner("alice").SpawnAgent(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	deafenA()
	sent := make(chan error, 1)
	go func() {
		_, err := f.mb.Owner("alice").Send(guard(t), agent, bgtype.Message{Content: "are you there?"})
		sent <- err
	}()
	waitFor(t, "the message recorded", func() bool {
		return sqlExec(t, f.dsn, `SELECT 1 FROM bgtask_messages WHERE handled_at IS NULL`) == 1
	})
	sqlExec(t, f.dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_a'`)
	if n, err := f.sb.Reap(t.Context()); err != nil || n != 1 {
		t.Fatalf("B's reaper: %d, %v; want 1", n, err)
	}
	err = <-sent
	if !errors.Is(err, bgtask.ErrTerminal) || err.Error() != fmt.Sprintf(`bgtask: task %s: its instance "inst_a" is gone (the task is interrupted); the message was not delivered`, agent) {
		t.Fatalf("B's Send = %v", err)
	}
	if got, err := f.mb.Get(t.Context(), agent); err != nil || got.Status != bgtype.StatusInterrupted {
		t.Fatalf("the sub-agent = %s, %v; want interrupted", got.Status, err)
	}
}

// A Send whose ctx ends before A handed the message over withdraws it:
// A never delivers it.
func TestSendAcrossInstancesWithdrawn(t *testing.T) {
	t.Parallel()
	f, deafenA := newDeafenedFleet(t)
	agent, err := f.ma.Owner("alice").SpawnAgent(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	deafenA()
	sendWithdrawn(t, f, agent, nil)
}

// sendWithdrawn sends a message from B to agent (a task of A's that hears
// nothing) with a ctx it cancels once the message is recorded, calls
// afterCancel (if not nil) before it waits for the Send, and checks that
// the Send returned the usual cancel and withdrew the message, which no one
// claimed.
func sendWithdrawn(t *testing.T, f *fleet, agent string, afterCancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	sent := make(chan error, 1)
	go func() {
		_, err := f.mb.Owner("alice").Send(ctx, agent, bgtype.Message{Content: "never mind"})
		sent <- err
	}()
	waitFor(t, "the message recorded", func() bool {
		return sqlExec(t, f.dsn, `SELECT 1 FROM bgtask_messages WHERE handled_at IS NULL`) == 1
	})
	cancel()
	if afterCancel != nil {
		afterCancel()
	}
	err := <-sent
	var row string
	sqlScan(t, f.dsn, `SELECT string_agg(format('%s claimed=%s handled=%s', err_code, claimed_at IS NOT NULL, handled_at IS NOT NULL), '; ') FROM bgtask_messages`, &row)
	if !errors.Is(err, context.Canceled) || err.Error() != fmt.Sprintf(`bgtask: send to %s on instance "inst_a": context canceled`, agent) || row != "withdrawn claimed=f handled=t" {
		t.Fatalf("B's Send = %v, the message row %q; want context.Canceled, withdrawn and not claimed", err, row)
	}
}

// A Send whose ctx ends after the server recorded its message, but before
// its answer reached the sender (a slow network: a proxy holds it), still
// withdraws the message: the insert runs to its end, then the Send
// withdraws what it recorded. Cut off there, the Send returned at once and
// left the message for the task's instance to deliver, while its sender
// had been told it was not.
func TestSendCutOffAfterItsInsertWithdraws(t *testing.T) {
	t.Parallel()
	var proxy *cutProxy
	f, deafenA := newDeafenedFleetVia(t, func(dsn string) string {
		p, via := newCutProxy(t, dsn) // closed after B
		proxy = p
		return via
	})
	agent, err := f.ma.Owner("alice").SpawnAgent(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	deafenA()
	release := proxy.holdAnswerTo("INSERT INTO bgtask_messages")
	defer release()
	sendWithdrawn(t, f, agent, release) // cancelled while the server's answer is held
}

// A second live process (here a second Store) cannot start an instance id
// that another one runs; once that one is gone (its connection closed, as
// when its process dies), the id starts again at once, and the first
// one, if it lived on, finds itself lost at its next heartbeat. Start's
// waiting take of the lock (instanceLockSQL, bounded by lock_timeout) is
// what refuses here; the listener's reconnect, the one user of the try
// (tryInstanceLockSQL), is held off, so relock_test.go proves the try.
func TestStartRefusesALiveInstanceID(t *testing.T) {
	t.Parallel()
	// s1 never reconnects its listener: only s2 can take the lock.
	s1, dsn := openStore(t, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour), pgstore.WithReconnectBackoff(time.Hour, time.Hour))
	startManager(t, s1, "inst_dup")
	s2, err := pgstore.Open(t.Context(), dsn, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	m2, err := bgtask.New(bgtask.WithStore(s2), bgtask.WithInstance("inst_dup"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Shutdown(context.Background()) })
	err = s2.Start(t.Context(), m2.Runtime())
	if !errors.Is(err, pgstore.ErrInstanceRunning) ||
		err.Error() != `pgstore: instance already running: pgstore: instance "inst_dup" is already running (registered by another live process): give each process its own instance id` {
		t.Fatalf("second Start = %v", err)
	}
	if s1.Lost() {
		t.Fatal("the refused Start made the running instance lost")
	}
	// The refused Start's connection (it tried the lock under the same
	// application name) ends on the server in its own time: wait for it,
	// so that the one listener left is the first process's.
	waitFor(t, "the refused Start's session gone", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_dup") == 1
	})
	// The first process's sessions end (as when it is killed): its
	// listening connection goes, and with it the lock.
	if n := sqlExec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_dup"); n != 1 {
		t.Fatalf("terminated %d listeners", n)
	}
	waitFor(t, "the listener gone", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_dup") == 0
	})
	if err := s2.Start(t.Context(), m2.Runtime()); err != nil {
		t.Fatalf("Start once the holder is gone = %v", err)
	}
	// The first one lived on: its heartbeat finds another registration.
	waitFor(t, "the first process lost", s1.Lost)
	if s2.Lost() {
		t.Fatal("the new registration is lost")
	}
}
