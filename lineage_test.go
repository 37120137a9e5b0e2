package bgtask

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

func TestLineageExplicitAndAmbient(t *testing.T) {
	ambient := ToolCall{RunID: "run-ambient", CallID: "call-ambient", AgentID: "agent-ambient"}
	cases := []struct {
		name     string
		toolCall *ToolCall
		explicit bgtype.Parent
		want     bgtype.Parent
	}{
		{name: "none", want: bgtype.Parent{}},
		{name: "explicit only",
			explicit: bgtype.Parent{RunID: "run-abc", CallID: "call-xyz", AgentID: "agent-007"},
			want:     bgtype.Parent{RunID: "run-abc", CallID: "call-xyz", AgentID: "agent-007"}},
		{name: "ambient tool call only", toolCall: &ambient,
			want: bgtype.Parent{RunID: "run-ambient", CallID: "call-ambient", AgentID: "agent-ambient"}},
		{name: "explicit fields win, empty ones filled from the tool call", toolCall: &ambient,
			explicit: bgtype.Parent{RunID: "run-explicit"},
			want:     bgtype.Parent{RunID: "run-explicit", CallID: "call-ambient", AgentID: "agent-ambient"}},
		{name: "explicit all fields win", toolCall: &ambient,
			explicit: bgtype.Parent{RunID: "r", CallID: "c", AgentID: "a"},
			want:     bgtype.Parent{RunID: "r", CallID: "c", AgentID: "a"}},
		{name: "partial tool call", toolCall: &ToolCall{CallID: "call-only"},
			explicit: bgtype.Parent{AgentID: "agent-x"},
			want:     bgtype.Parent{CallID: "call-only", AgentID: "agent-x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			ctx := t.Context()
			if tc.toolCall != nil {
				ctx = WithToolCall(ctx, *tc.toolCall)
			}
			seen := make(chan bgtype.Parent, 1)
			id, err := o.Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
				seen <- tk.Parent()
				// The tool call of the spawner is not ambient inside the task.
				if _, ok := ToolCallFromContext(ctx); ok {
					return nil, errors.New("tool call leaked into the task context")
				}
				return nil, nil
			}, WithParent(tc.explicit))
			if err != nil {
				t.Fatal(err)
			}
			if got := <-seen; got != tc.want {
				t.Fatalf("Task.Parent() = %+v, want %+v", got, tc.want)
			}
			final := waitTask(t, o, id)
			if final.Status != bgtype.StatusCompleted {
				t.Fatalf("task: %+v", final)
			}
			if final.Parent != tc.want {
				t.Fatalf("Wait: parent %+v, want %+v", final.Parent, tc.want)
			}
			got, err := o.Get(t.Context(), id)
			if err != nil || got.Parent != tc.want {
				t.Fatalf("Get: parent %+v (%v), want %+v", got.Parent, err, tc.want)
			}
			list := listTasks(t, o)
			if len(list) != 1 || list[0].Parent != tc.want {
				t.Fatalf("List: %+v, want one task with parent %+v", list, tc.want)
			}
			if got.Parent.IsZero() != (tc.want == bgtype.Parent{}) {
				t.Fatalf("IsZero = %v for %+v", got.Parent.IsZero(), got.Parent)
			}
			shutdownManager(t, m)
		})
	}
}

// TestLineageNestedSpawn: a spawn inside a task links to it and inherits its
// run; TaskFromContext gives the task (awaken tests 39 and 13).
func TestLineageNestedSpawn(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	if _, ok := TaskFromContext(t.Context()); ok {
		t.Fatal("TaskFromContext outside a task reported a task")
	}
	type spawned struct {
		self  string
		child string
		err   error
	}
	rootOut := make(chan spawned, 1)
	childOut := make(chan spawned, 1)
	grandchild := newProbe()
	child := func(ctx context.Context, tk *Task) (any, error) {
		id, err := o.Spawn(ctx, grandchild.fn, WithName("grandchild"))
		childOut <- spawned{self: tk.ID(), child: id, err: err}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	callCtx := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1", AgentID: "agent-1"})
	rootID, err := o.Spawn(callCtx, func(ctx context.Context, tk *Task) (any, error) {
		got, ok := TaskFromContext(ctx)
		if !ok || got != tk {
			return nil, errors.New("TaskFromContext(ctx) is not the task")
		}
		derived, cancel := context.WithCancel(context.WithValue(ctx, otherKey{}, 1))
		defer cancel()
		if got, ok := TaskFromContext(derived); !ok || got != tk {
			return nil, errors.New("TaskFromContext(derived ctx) is not the task")
		}
		// The spawn uses a derived context: lineage still follows.
		id, err := o.Spawn(derived, child, WithName("child"))
		rootOut <- spawned{self: tk.ID(), child: id, err: err}
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithName("root"))
	if err != nil {
		t.Fatal(err)
	}
	r := <-rootOut
	if r.err != nil || r.self != rootID {
		t.Fatalf("root: self %q (want %q), nested spawn err %v", r.self, rootID, r.err)
	}
	c := <-childOut
	if c.err != nil || c.self != r.child {
		t.Fatalf("child: self %q (want %q), nested spawn err %v", c.self, r.child, c.err)
	}
	<-grandchild.started
	if tk, ok := TaskFromContext(grandchild.ctx); !ok || tk.ID() != c.child || tk != grandchild.task {
		t.Fatal("TaskFromContext in the grandchild is not the grandchild")
	}

	want := map[string]bgtype.Parent{
		rootID:  {RunID: "run-1", CallID: "call-1", AgentID: "agent-1"},
		r.child: {TaskID: rootID, RunID: "run-1"},
		c.child: {TaskID: r.child, RunID: "run-1"},
	}
	for id, p := range want {
		got, err := o.Get(t.Context(), id)
		if err != nil || got.Parent != p || got.Status != bgtype.StatusRunning {
			t.Fatalf("Get(%s): %+v, %v; want running with parent %+v", id, got, err, p)
		}
	}
	if got := taskIDs(listTasks(t, o)); !slices.Equal(got, []string{rootID, r.child, c.child}) {
		t.Fatalf("List = %v, want root, child, grandchild", got)
	}
	if n, err := o.CancelTree(t.Context(), rootID); n != 3 || err != nil {
		t.Fatalf("CancelTree(root) = %d, %v; want 3", n, err)
	}
	for id := range want {
		if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled {
			t.Fatalf("%s: %q, want cancelled", id, got.Status)
		}
	}
	if cause := <-grandchild.cause; !errors.Is(cause, errParentCanceled) {
		t.Fatalf("grandchild cause %v, want ErrCanceled (parent)", cause)
	}
	shutdownManager(t, m)
}

// TestLineageOtherManager: a task of one Manager is not the ambient parent
// of a spawn on another Manager, and does not pass its run on.
func TestLineageOtherManager(t *testing.T) {
	m1, m2 := newTestManager(t), newTestManager(t)
	o1, o2 := m1.Owner("thread-1"), m2.Owner("thread-1")
	out := make(chan string, 1)
	errc := make(chan error, 1)
	other := newProbe()
	id1, err := o1.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		id, err := o2.Spawn(ctx, other.fn)
		out <- id
		errc <- err
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithParent(bgtype.Parent{RunID: "run-m1"}))
	if err != nil {
		t.Fatal(err)
	}
	id2 := <-out
	if err := <-errc; err != nil {
		t.Fatalf("spawn on the other manager: %v", err)
	}
	got, err := o2.Get(t.Context(), id2)
	if err != nil || !got.Parent.IsZero() {
		t.Fatalf("other manager's task: parent %+v, %v; want none", got.Parent, err)
	}
	<-other.started
	if tk, ok := TaskFromContext(other.ctx); !ok || tk.ID() != id2 {
		t.Fatal("TaskFromContext in the other manager's task")
	}
	// Cancelling on m1 does not reach m2's task.
	if n, err := m1.CancelRun("thread-1", "run-m1"); n != 1 || err != nil {
		t.Fatalf("CancelRun on m1 = %d, %v; want 1", n, err)
	}
	if n, err := m1.CancelTree(t.Context(), id1); n != 0 || err != nil {
		t.Fatalf("CancelTree on m1 = %d, %v; want 0 (already signalled)", n, err)
	}
	waitTask(t, o1, id1)
	if err := other.ctxErr(t); err != nil {
		t.Fatalf("m2's task was cancelled by m1: %v", err)
	}
	if _, err := m1.Get(t.Context(), id2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("m1 knows m2's task: %v", err)
	}
	shutdownManager(t, m1)
	if err := other.ctxErr(t); err != nil {
		t.Fatalf("m1's shutdown cancelled m2's task: %v", err)
	}
	close(other.release)
	if got := waitTask(t, o2, id2); got.Status != bgtype.StatusCompleted {
		t.Fatalf("m2's task: %+v", got)
	}
	shutdownManager(t, m2)
}

// TestLineageSpawnIntoAnotherOwnerFromTask: a task of owner A spawning a task
// for owner B (not its own sub-agent) with its context.
func TestLineageSpawnIntoAnotherOwnerFromTask(t *testing.T) {
	m := newTestManager(t)
	a, b := m.Owner("thread-A"), m.Owner("thread-B")
	errc := make(chan error, 1)
	id, err := a.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		_, err := b.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil })
		errc <- err
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The ambient parent belongs to another owner: the spawn is refused as
	// ErrNotFound (parent) rather than linking across owners.
	if err := <-errc; !errors.Is(err, errParentNotFound) {
		t.Fatalf("cross-owner nested spawn: %v, want ErrNotFound (parent)", err)
	}
	waitTask(t, a, id)
	if got := listTasks(t, b); len(got) != 0 {
		t.Fatalf("thread-B has %v", taskIDs(got))
	}
	shutdownManager(t, m)
}

// TestLineageSubAgentChildren: a sub-agent's own tasks (Task.Agent) are
// owned by the sub-agent and linked to it.
func TestLineageSubAgentChildren(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	type out struct {
		id  string
		err error
	}
	res := make(chan out, 1)
	leaf := newProbe()
	agentID, err := o.SpawnAgent(WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"}),
		func(ctx context.Context, tk *Task) (any, error) {
			ag, err := tk.Agent()
			if err != nil {
				return nil, err
			}
			id, err := ag.Spawn(ctx, leaf.fn, WithName("leaf"))
			res <- out{id, err}
			<-ctx.Done()
			return nil, ctx.Err()
		}, WithName("worker"))
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("sub-agent's spawn: %v", r.err)
	}
	<-leaf.started
	sub := m.Owner(agentID)
	got, err := sub.Get(t.Context(), r.id)
	if err != nil || got.Owner != agentID || got.Parent != (bgtype.Parent{TaskID: agentID, RunID: "run-1"}) {
		t.Fatalf("leaf: %+v, %v; want owner %s, parent {%s run-1}", got, err, agentID, agentID)
	}
	if _, err := o.Get(t.Context(), r.id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the parent owner sees the sub-agent's task: %v", err)
	}
	if ids := taskIDs(listTasks(t, o)); !slices.Equal(ids, []string{agentID}) {
		t.Fatalf("thread-1 lists %v", ids)
	}
	agent, _ := o.Get(t.Context(), agentID)
	if agent.Type != bgtype.TypeSubAgent || agent.Name != "worker" {
		t.Fatalf("sub-agent record %+v", agent)
	}
	// CancelTree from the parent owner reaches the sub-agent's own tasks.
	if n, err := o.CancelTree(t.Context(), agentID); n != 2 || err != nil {
		t.Fatalf("CancelTree(sub-agent) = %d, %v; want 2", n, err)
	}
	if cause := <-leaf.cause; !errors.Is(cause, errParentCanceled) {
		t.Fatalf("leaf cause %v", cause)
	}
	if got := waitTask(t, sub, r.id); got.Status != bgtype.StatusCanceled {
		t.Fatalf("leaf %q", got.Status)
	}
	if got := waitTask(t, o, agentID); got.Status != bgtype.StatusCanceled {
		t.Fatalf("sub-agent %q", got.Status)
	}
	shutdownManager(t, m)
}

// TestLineageExplicitTaskKeepsAmbientRun: WithParent fills the fields left
// empty from the context. Naming the running task explicitly as the parent
// leaves RunID empty, so it must still come from that task, and a spawn into
// a cancelled run must be refused exactly as the ambient spawn is.
func TestLineageExplicitTaskKeepsAmbientRun(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	type out struct {
		ambient, explicit bgtype.Parent
		errA, errE        error
	}
	res := make(chan out, 1)
	canceled := make(chan out, 1)
	gate := make(chan struct{})
	root, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		var r out
		var idA, idE string
		idA, r.errA = o.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil })
		idE, r.errE = o.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil },
			WithParent(bgtype.Parent{TaskID: tk.ID()}))
		if r.errA == nil {
			meta, _ := o.Wait(ctx, idA)
			r.ambient = meta.Parent
		}
		if r.errE == nil {
			meta, _ := o.Wait(ctx, idE)
			r.explicit = meta.Parent
		}
		res <- r
		<-gate
		// The run is cancelled now: both forms must be refused. Detached, so
		// the parent's own cancellation does not decide, and WithoutCancel so
		// the commit does not fail on ctx.
		c := context.WithoutCancel(ctx)
		var after out
		_, after.errA = o.Spawn(c, func(context.Context, *Task) (any, error) { return nil, nil }, WithDetached())
		_, after.errE = o.Spawn(c, func(context.Context, *Task) (any, error) { return nil, nil }, WithDetached(),
			WithParent(bgtype.Parent{TaskID: tk.ID()}))
		canceled <- after
		return nil, context.Cause(ctx)
	}, WithParent(bgtype.Parent{RunID: "run-1"}))
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.errA != nil || r.errE != nil {
		t.Fatalf("nested spawns: %v, %v", r.errA, r.errE)
	}
	want := bgtype.Parent{TaskID: root, RunID: "run-1"}
	if r.ambient != want {
		t.Fatalf("ambient nested spawn: parent %+v, want %+v", r.ambient, want)
	}
	if _, err := m.CancelRun("thread-1", "run-1"); err != nil {
		t.Fatal(err)
	}
	close(gate)
	after := <-canceled
	waitTask(t, o, root)
	if !errors.Is(after.errA, errRunCanceled) {
		t.Fatalf("ambient detached spawn into the cancelled run: %v, want ErrCanceled (run)", after.errA)
	}
	if r.explicit != want || !errors.Is(after.errE, errRunCanceled) {
		t.Fatalf("WithParent(Parent{TaskID: self}) inside a task must keep the task's run: "+
			"parent %+v, want %+v; spawn into the cancelled run: %v, want ErrCanceled (run)", r.explicit, want, after.errE)
	}
	shutdownManager(t, m)
}

// otherKey is an unrelated context key, to derive a context with more values.
type otherKey struct{}
