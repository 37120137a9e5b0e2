package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

func TestSendDelivers(t *testing.T) {
	vias := []struct {
		name string
		send func(ctx context.Context, m *Manager, owner, id string, msg bgtype.Message) error
	}{
		{"owner", func(ctx context.Context, m *Manager, owner, id string, msg bgtype.Message) error {
			_, err := m.Owner(owner).Send(ctx, id, msg)
			return err
		}},
		{"manager", func(ctx context.Context, m *Manager, owner, id string, msg bgtype.Message) error {
			_, err := m.Send(ctx, owner, id, msg)
			return err
		}},
	}
	for _, via := range vias {
		t.Run(via.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			id, got, tk := spawnReceiver(t, o, 1, WithName("worker"))
			if tk.Inbox() == nil || tk.ID() != id {
				t.Fatalf("sub-agent handle: id %q inbox %v", tk.ID(), tk.Inbox())
			}
			if err := via.send(t.Context(), m, "thread-1", id, bgtype.Message{From: "parent-agent", Content: "hello from parent"}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			evs := <-got
			if len(evs) != 1 {
				t.Fatalf("sub-agent got %+v", evs)
			}
			ev := evs[0]
			if ev.Kind != bgtype.EventCustom || ev.EventType != bgtype.EventTypeMessage || ev.TaskID != id {
				t.Fatalf("event %+v, want custom %q for %s", ev, bgtype.EventTypeMessage, id)
			}
			msg, ok := ev.Message()
			if !ok || msg != (bgtype.Message{From: "parent-agent", Content: "hello from parent"}) {
				t.Fatalf("Message() = %+v, %v", msg, ok)
			}
			b, err := json.Marshal(ev)
			want := `{"kind":"custom","task_id":"` + id + `","name":"worker","event_type":"agent_message","payload":{"from":"parent-agent","content":"hello from parent"}}`
			if err != nil || string(b) != want {
				t.Fatalf("event JSON\n got %s (%v)\nwant %s", b, err, want)
			}
			if final := waitTask(t, o, id); final.Status != bgtype.StatusCompleted || string(final.Result) != "1" {
				t.Fatalf("sub-agent: %+v", final)
			}
			// The message went to the sub-agent only, not to the owner.
			if ks := eventKinds(drainOwner(t, o)); !slices.Equal(ks, []bgtype.EventKind{bgtype.EventCompleted}) {
				t.Fatalf("owner's events %v, want only completed", ks)
			}
			shutdownManager(t, m)
		})
	}
}

func TestSendEmptyContent(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, got, _ := spawnReceiver(t, o, 1)
	if _, err := o.Send(t.Context(), id, bgtype.Message{}); err != nil {
		t.Fatalf("Send empty: %v", err)
	}
	evs := <-got
	if msg, ok := evs[0].Message(); !ok || msg != (bgtype.Message{}) {
		t.Fatalf("Message() = %+v, %v; want empty message", msg, ok)
	}
	if string(evs[0].Payload) != `{"from":"","content":""}` {
		t.Fatalf("payload %s", evs[0].Payload)
	}
	waitTask(t, o, id)
	shutdownManager(t, m)
}

func TestSendErrors(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ctx := t.Context()

	liveAgent := newProbe()
	liveAgentID, err := o.SpawnAgent(ctx, liveAgent.fn)
	if err != nil {
		t.Fatal(err)
	}
	<-liveAgent.started
	livePlainID, livePlain := spawnProbe(t, ctx, o)
	ended := func(agent bool, fn Func) string {
		spawn := o.Spawn
		if agent {
			spawn = o.SpawnAgent
		}
		id, err := spawn(ctx, fn)
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, o, id)
		return id
	}
	completedAgent := ended(true, func(context.Context, *Task) (any, error) { return nil, nil })
	failedAgent := ended(true, func(context.Context, *Task) (any, error) { return nil, errors.New("x") })
	canceledAgent := func() string {
		id, p := func() (string, *probeTask) {
			p := newProbe()
			id, err := o.SpawnAgent(ctx, p.fn)
			if err != nil {
				t.Fatal(err)
			}
			<-p.started
			return id, p
		}()
		if _, err := o.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		<-p.cause
		waitTask(t, o, id)
		return id
	}()
	completedPlain := ended(false, func(context.Context, *Task) (any, error) { return nil, nil })
	const unknown = "task_00000000000000000000000000000000"
	msg := bgtype.Message{From: "parent", Content: "hi"}

	cases := []struct {
		name       string
		send       func() error
		want       error
		not        []error
		wantStatus bgtype.Status // for ErrTerminal: the *StatusError's status
		id         string
	}{
		{name: "owner: unknown", send: func() error { _, err := o.Send(ctx, unknown, msg); return err }, want: ErrNotFound},
		{name: "manager: unknown", send: func() error { _, err := m.Send(ctx, "thread-1", unknown, msg); return err }, want: ErrNotFound},
		{name: "manager: wrong owner, live sub-agent", want: errNotOwner,
			send: func() error { _, err := m.Send(ctx, "thread-WRONG", liveAgentID, msg); return err }},
		{name: "manager: wrong owner comes before terminal", want: errNotOwner, not: []error{ErrTerminal},
			send: func() error { _, err := m.Send(ctx, "thread-WRONG", completedAgent, msg); return err }},
		{name: "manager: wrong owner comes before not-a-sub-agent", want: errNotOwner, not: []error{ErrNotSubAgent},
			send: func() error { _, err := m.Send(ctx, "thread-WRONG", livePlainID, msg); return err }},
		{name: "owner view: another owner's is not found", want: ErrNotFound, not: []error{errNotOwner},
			send: func() error { _, err := m.Owner("thread-WRONG").Send(ctx, liveAgentID, msg); return err }},
		{name: "completed sub-agent", want: ErrTerminal, wantStatus: bgtype.StatusCompleted, id: completedAgent,
			send: func() error { _, err := o.Send(ctx, completedAgent, msg); return err }},
		{name: "completed sub-agent via manager", want: ErrTerminal, wantStatus: bgtype.StatusCompleted, id: completedAgent,
			send: func() error { _, err := m.Send(ctx, "thread-1", completedAgent, msg); return err }},
		{name: "failed sub-agent", want: ErrTerminal, wantStatus: bgtype.StatusFailed, id: failedAgent,
			send: func() error { _, err := o.Send(ctx, failedAgent, msg); return err }},
		{name: "cancelled sub-agent", want: ErrTerminal, wantStatus: bgtype.StatusCanceled, id: canceledAgent,
			send: func() error { _, err := o.Send(ctx, canceledAgent, msg); return err }},
		{name: "terminal comes before not-a-sub-agent", want: ErrTerminal, wantStatus: bgtype.StatusCompleted, id: completedPlain,
			not:  []error{ErrNotSubAgent},
			send: func() error { _, err := o.Send(ctx, completedPlain, msg); return err }},
		{name: "live plain task", want: ErrNotSubAgent,
			send: func() error { _, err := o.Send(ctx, livePlainID, msg); return err }},
		{name: "manager: empty owner", want: bgtype.ErrInvalidOwner,
			send: func() error { _, err := m.Send(ctx, "", liveAgentID, msg); return err }},
		{name: "owner view: blank owner", want: bgtype.ErrInvalidOwner,
			send: func() error { _, err := m.Owner(" ").Send(ctx, liveAgentID, msg); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.send()
			if !errors.Is(err, tc.want) {
				t.Fatalf("Send = %v, want %v", err, tc.want)
			}
			for _, not := range tc.not {
				if errors.Is(err, not) {
					t.Fatalf("Send = %v, also matches %v", err, not)
				}
			}
			if tc.want == ErrTerminal {
				var se *StatusError
				if !errors.As(err, &se) || se.Status != tc.wantStatus || se.TaskID != tc.id {
					t.Fatalf("Send = %#v, want *StatusError{%s, %s}", err, tc.id, tc.wantStatus)
				}
				if want := fmt.Sprintf("bgtask: task %s already %s", tc.id, tc.wantStatus); se.Error() != want {
					t.Fatalf("error text %q, want %q", se.Error(), want)
				}
			}
		})
	}
	if n := liveAgent.task.Inbox().Len(); n != 0 {
		t.Fatalf("a refused Send reached the sub-agent: %d event(s)", n)
	}
	close(livePlain.release)
	close(liveAgent.release)
	waitTask(t, o, livePlainID)
	waitTask(t, o, liveAgentID)
	shutdownManager(t, m)
}

// TestSendConcurrentSubAgents: two sub-agents messaged at once each get
// exactly their own messages, in order.
func TestSendConcurrentSubAgents(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	const n = 50
	names := []string{"alpha", "beta"}
	ids := make([]string, len(names))
	gots := make([]<-chan []bgtype.Event, len(names))
	for i, name := range names {
		ids[i], gots[i], _ = spawnReceiver(t, o, n, WithName(name))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names)*n)
	start := make(chan struct{})
	for i, name := range names {
		wg.Go(func() {
			<-start
			for k := range n {
				if _, err := o.Send(context.Background(), ids[i], bgtype.Message{From: "parent", Content: fmt.Sprintf("%s %d", name, k)}); err != nil {
					errs <- err
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Send: %v", err)
	}
	for i, name := range names {
		evs := <-gots[i]
		if len(evs) != n {
			t.Fatalf("%s got %d events, want %d", name, len(evs), n)
		}
		for k, ev := range evs {
			msg, ok := ev.Message()
			if want := fmt.Sprintf("%s %d", name, k); !ok || msg.Content != want || ev.TaskID != ids[i] {
				t.Fatalf("%s event %d: %+v (%q), want %q", name, k, ev, msg.Content, want)
			}
		}
		if got := waitTask(t, o, ids[i]); got.Status != bgtype.StatusCompleted {
			t.Fatalf("%s: %+v", name, got)
		}
	}
	shutdownManager(t, m)
}

// TestSubAgentReceivesItsTasksEvents: tasks a sub-agent starts through
// Task.Agent report to the sub-agent's inbox, not to its owner's.
func TestSubAgentReceivesItsTasksEvents(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	type out struct {
		child string
		evs   []bgtype.Event
	}
	res := make(chan out, 1)
	agentID, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		ag, err := tk.Agent()
		if err != nil {
			return nil, err
		}
		child, err := ag.Spawn(ctx, func(ctx context.Context, c *Task) (any, error) {
			if err := c.Emit("data_ready", map[string]int{"rows": 10}); err != nil {
				return nil, err
			}
			return map[string]int{"rows": 10}, nil
		}, WithWake(bgtype.WakeOnActivity))
		if err != nil {
			return nil, err
		}
		var evs []bgtype.Event
		for len(evs) < 2 {
			if err := tk.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			evs = tk.Inbox().AppendDrain(evs)
		}
		res <- out{child, evs}
		return "summary", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if len(r.evs) != 2 ||
		r.evs[0].Kind != bgtype.EventCustom || r.evs[0].EventType != "data_ready" || r.evs[0].TaskID != r.child || string(r.evs[0].Payload) != `{"rows":10}` ||
		r.evs[1].Kind != bgtype.EventCompleted || r.evs[1].TaskID != r.child || string(r.evs[1].Result) != `{"rows":10}` {
		t.Fatalf("sub-agent's inbox: %+v", r.evs)
	}
	if got := waitTask(t, o, agentID); got.Status != bgtype.StatusCompleted || string(got.Result) != `"summary"` {
		t.Fatalf("sub-agent: %+v", got)
	}
	evs := drainOwner(t, o)
	if len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != agentID {
		t.Fatalf("owner's inbox %+v, want only the sub-agent's completed event", evs)
	}
	child, err := m.Owner(agentID).Get(t.Context(), r.child)
	if err != nil || child.Owner != agentID || child.Parent.TaskID != agentID || child.Status != bgtype.StatusCompleted {
		t.Fatalf("child record %+v, %v", child, err)
	}
	shutdownManager(t, m)
}

// TestSubAgentInboxAfterEnd: the sub-agent's inbox closes when it ends; a
// later Send is ErrTerminal; a message it never read is not passed to its
// owner as if it were the owner's event.
func TestSubAgentInboxAfterEnd(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	started, gate := make(chan struct{}), make(chan struct{})
	handle := make(chan *Task, 1)
	id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handle <- tk
		close(started)
		<-gate
		return "ignored my mail", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	tk := <-handle
	if _, err := o.Send(t.Context(), id, bgtype.Message{From: "parent", Content: "unread"}); err != nil {
		t.Fatalf("Send to the live sub-agent: %v", err)
	}
	if tk.Inbox().Len() != 1 {
		t.Fatalf("sub-agent inbox len %d, want 1", tk.Inbox().Len())
	}
	close(gate)
	waitTask(t, o, id)
	if !tk.Inbox().Closed() {
		t.Fatal("the sub-agent's inbox is open after it ended")
	}
	if _, err := o.Send(t.Context(), id, bgtype.Message{Content: "late"}); !errors.Is(err, ErrTerminal) {
		t.Fatalf("Send after end: %v, want ErrTerminal", err)
	}
	evs := drainOwner(t, o)
	if len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != id {
		t.Fatalf("owner's inbox %+v, want only the completed event", evs)
	}
	shutdownManager(t, m)
}

// TestSubAgentOrphanedTaskEvents: a task that a sub-agent started and that
// outlives it reports to the sub-agent's owner (the sub-agent's inbox is
// closed and its fallback forwards upward), so no event is lost (D6).
func TestSubAgentOrphanedTaskEvents(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	gate := make(chan struct{})
	childID := make(chan string, 1)
	emitErr := make(chan error, 1)
	agentID, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		ag, err := tk.Agent()
		if err != nil {
			return nil, err
		}
		id, err := ag.Spawn(ctx, func(ctx context.Context, c *Task) (any, error) {
			<-gate
			emitErr <- c.Emit("late", 1)
			return "child done", nil
		}, WithWake(bgtype.WakeOnActivity))
		childID <- id
		return "agent done", err
	})
	if err != nil {
		t.Fatal(err)
	}
	cid := <-childID
	if got := waitTask(t, o, agentID); got.Status != bgtype.StatusCompleted {
		t.Fatalf("sub-agent: %+v", got)
	}
	close(gate)
	// Documented: the owner's inbox is closed and its fallback forwards the
	// event, so it is not lost and Emit succeeds.
	if err := <-emitErr; err != nil {
		t.Fatalf("Emit after the sub-agent ended: %v, want nil (forwarded)", err)
	}
	sub := m.Owner(agentID)
	if got := waitTask(t, sub, cid); got.Status != bgtype.StatusCompleted {
		t.Fatalf("orphaned child: %+v", got)
	}
	evs := drainOwner(t, o)
	want := []bgtype.EventKind{bgtype.EventCompleted, bgtype.EventCustom, bgtype.EventCompleted}
	if ks := eventKinds(evs); !slices.Equal(ks, want) || evs[0].TaskID != agentID || evs[1].TaskID != cid || evs[2].TaskID != cid {
		var stuck []bgtype.EventKind
		m.inboxMu.RLock()
		if ib := m.inboxes[agentID]; ib != nil {
			stuck = eventKinds(ib.Drain())
		}
		m.inboxMu.RUnlock()
		t.Fatalf("terminal event of a task outliving its sub-agent owner must reach the sub-agent's owner. "+
			"owner's inbox %v (ids %v), want %v: sub-agent completed, then the child's custom and completed events; "+
			"events left in an inbox registered for the ended sub-agent: %v", ks, func() []string {
			var ids []string
			for _, e := range evs {
				ids = append(ids, e.TaskID)
			}
			return ids
		}(), want, stuck)
	}
	shutdownManager(t, m)
}

// A plain task has no inbox, so it cannot act as an agent: tasks it started
// through Agent would report to an inbox nobody reads. A sub-agent can.
func TestTaskAgentRefusedForPlainTask(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	type res struct {
		owner string
		err   error
	}
	got := make(chan res, 2)
	body := func(ctx context.Context, tk *Task) (any, error) {
		ag, err := tk.Agent()
		got <- res{ag.ID(), err}
		return nil, nil
	}
	plain, err := o.Spawn(t.Context(), body)
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if !errors.Is(r.err, ErrNotSubAgent) || r.err.Error() != "bgtask: task has no inbox (not a sub-agent): "+plain+" cannot own tasks" || r.owner != "" {
		t.Fatalf("plain task Agent() = %q, %v", r.owner, r.err)
	}
	agent, err := o.SpawnAgent(t.Context(), body)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.owner != agent {
		t.Fatalf("sub-agent Agent() = %q, %v; want %q, nil", r.owner, r.err, agent)
	}
	waitTask(t, o, plain)
	waitTask(t, o, agent)
}
