package bgtask

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestCancelSelfTaskScopeCascades is awaken #108: self in a task scope
// cancels the task and its descendants.
func TestCancelSelfTaskScopeCascades(t *testing.T) {
	for _, subAgent := range []bool{false, true} {
		name := map[bool]string{false: "owner tools", true: "sub-agent's own tools"}[subAgent]
		t.Run(name, func(t *testing.T) {
			m := mtNew(t)
			o := m.Owner("thread-1")
			spawn, rp := o.Spawn, newProbe()
			if subAgent { // only a sub-agent owns tasks as an agent
				spawn = o.SpawnAgent
			}
			root, err := spawn(runCtx(t.Context(), "run-1"), rp.fn)
			if err != nil {
				t.Fatal(err)
			}
			<-rp.started
			// Children spawned inside the root's context link to it.
			kids, tools := o, o
			if subAgent {
				ag, err := rp.task.Agent()
				if err != nil {
					t.Fatal(err)
				}
				kids, tools = ag, ag
			}
			child, cp := mtSpawnProbe(t, rp.ctx, kids)
			grand, gp := mtSpawnProbe(t, cp.ctx, kids)
			var hook atomic.Int32
			var r cancelReceipt
			ttCall(t, rp.ctx, ttTool(t, tools, "cancel_task", OnSelfCancel(func(context.Context) { hook.Add(1) })), `{"target":{"relation":"self"}}`, &r)
			if r != (cancelReceipt{Status: "accepted", RootTaskID: root, CancelledCount: 3}) {
				t.Fatalf("cancel_task = %+v", r)
			}
			for _, p := range []*mtProbe{rp, cp, gp} {
				if cause := <-p.cause; cause == nil {
					t.Fatal("a task of the tree was not cancelled")
				}
			}
			if got := mtWait(t, kids, child).Status; got != StatusCancelled {
				t.Errorf("child %s", got)
			}
			if got := mtWait(t, kids, grand).Status; got != StatusCancelled {
				t.Errorf("grandchild %s", got)
			}
			if got := mtWait(t, o, root).Status; got != StatusCancelled {
				t.Errorf("root %s", got)
			}
			if hook.Load() != 0 {
				t.Error("OnSelfCancel called in a task scope")
			}
		})
	}
}

// TestCancelSelfRunScope is awaken #109: self in a run scope cancels the
// run's tasks and their descendants, counts the run, and calls OnSelfCancel.
func TestCancelSelfRunScope(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	ctx := runCtx(t.Context(), "run-1")
	child, cp := mtSpawnProbe(t, ctx, o)
	grand, gp := mtSpawnProbe(t, cp.ctx, o)
	other, op := mtSpawnProbe(t, runCtx(t.Context(), "run-2"), o)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var hooked context.Context
	tool := ttTool(t, o, "cancel_task", OnSelfCancel(func(ctx context.Context) { hooked = ctx; cancelRun() }))
	var r cancelReceipt
	ttCall(t, runCtx, tool, `{"target":{"relation":"self"}}`, &r)
	if r != (cancelReceipt{Status: "accepted", RootTaskID: "run-1", CancelledCount: 3}) {
		t.Fatalf("cancel_task = %+v", r)
	}
	if hooked != runCtx || runCtx.Err() == nil {
		t.Fatalf("OnSelfCancel got %v; run ctx err %v", hooked, runCtx.Err())
	}
	for id, p := range map[string]*mtProbe{child: cp, grand: gp} {
		if cause := <-p.cause; !errors.Is(cause, ErrRunCancelled) {
			t.Errorf("%s: cause %v", id, cause)
		}
		if got := mtWait(t, o, id).Status; got != StatusCancelled {
			t.Errorf("%s: %s", id, got)
		}
	}
	if err := op.ctxErr(t); err != nil {
		t.Fatalf("a task of another run was cancelled: %v", err)
	}
	// The run is cancelled: a spawn into it is refused.
	if _, err := o.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrRunCancelled) {
		t.Fatalf("spawn into the cancelled run: %v", err)
	}
	// A second self-cancel still counts the run; a panicking hook is contained.
	panicky := ttTool(t, o, "cancel_task", OnSelfCancel(func(context.Context) { panic("hook") }))
	ttCall(t, ctx, panicky, `{"target":{"relation":"self"}}`, &r)
	if r != (cancelReceipt{Status: "accepted", RootTaskID: "run-1", CancelledCount: 1}) {
		t.Fatalf("second cancel_task = %+v", r)
	}
	_ = other
}

// TestCancelSelfWithoutScope is awaken #110.
func TestCancelSelfWithoutScope(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	_, p := mtSpawnProbe(t, t.Context(), o)
	_, foreign := mtSpawnProbe(t, t.Context(), m.Owner("thread-2"))
	tool := ttTool(t, o, "cancel_task")
	for name, ctx := range map[string]context.Context{
		"no scope":               t.Context(),
		"blank run":              WithToolCall(t.Context(), ToolCall{RunID: " ", AgentID: "a"}),
		"another owner's task":   foreign.ctx,
		"another manager's task": func() context.Context { _, q := mtSpawnProbe(t, t.Context(), mtNew(t).Owner("thread-1")); return q.ctx }(),
	} {
		for _, args := range []string{`{"target":{"relation":"self"}}`, `{"target":{"relation":"child","name":"x"}}`} {
			err := ttCallErr(t, ctx, tool, args)
			if err.Error() != "current_task_unavailable" || !errors.Is(err, ErrNoCurrentTask) {
				t.Errorf("%s: %s: %v", name, args, err)
			}
		}
	}
	if err := p.ctxErr(t); err != nil {
		t.Fatalf("a task was cancelled: %v", err)
	}
}

func TestCancelChild(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	rootID, root := mtSpawnProbe(t, runCtx(t.Context(), "run-1"), o)
	byName, bp := mtSpawnProbe(t, root.ctx, o, WithName("crawler"))
	_, bgp := mtSpawnProbe(t, bp.ctx, o) // its child: a descendant of the root's child
	byID, ip := mtSpawnProbe(t, root.ctx, o)
	sibling, sp := mtSpawnProbe(t, runCtx(t.Context(), "run-1"), o, WithName("sibling"))
	done, err := o.Spawn(root.ctx, func(context.Context, *Task) (any, error) { return 1, nil }, WithName("finished"))
	if err != nil {
		t.Fatal(err)
	}
	mtWait(t, o, done)
	theirs, tp := mtSpawnProbe(t, t.Context(), m.Owner("thread-2"), WithName("crawler2"))
	tool := ttTool(t, o, "cancel_task")
	call := func(ctx context.Context, name string) cancelReceipt {
		var r cancelReceipt
		ttCall(t, ctx, tool, ttArgs(map[string]any{"target": map[string]string{"relation": "child", "name": name}}), &r)
		return r
	}

	// Not children of the root: unknown, a sibling (by name and id), another owner's.
	for _, name := range []string{"nope", "task_0000", "sibling", sibling, theirs, "crawler2", rootID} {
		if r := call(root.ctx, name); r != (cancelReceipt{Status: "failed", RootTaskID: name, Error: "task_not_found"}) {
			t.Errorf("cancel child %q = %+v", name, r)
		}
	}
	// A child that already completed.
	for _, name := range []string{"finished", done} {
		if r := call(root.ctx, name); r != (cancelReceipt{Status: "failed", RootTaskID: done, Error: "task_not_running"}) {
			t.Errorf("cancel completed child %q = %+v", name, r)
		}
	}
	// By name, with its descendant.
	if r := call(root.ctx, "crawler"); r != (cancelReceipt{Status: "accepted", RootTaskID: byName, CancelledCount: 2}) {
		t.Fatalf("cancel crawler = %+v", r)
	}
	<-bp.cause
	<-bgp.cause
	// Again, while it may still be winding down or after it ended.
	if r := call(root.ctx, byName); r.CancelledCount != 0 || (r.Status == "failed" && r.Error != "task_not_running") {
		t.Fatalf("second cancel = %+v", r)
	}
	mtWait(t, o, byName)
	if r := call(root.ctx, "crawler"); r != (cancelReceipt{Status: "failed", RootTaskID: byName, Error: "task_not_running"}) {
		t.Fatalf("cancel ended crawler = %+v", r)
	}
	// By id.
	if r := call(root.ctx, byID); r != (cancelReceipt{Status: "accepted", RootTaskID: byID, CancelledCount: 1}) {
		t.Fatalf("cancel by id = %+v", r)
	}
	<-ip.cause
	// In the run scope, the run's top-level tasks are its children.
	if r := call(runCtx(t.Context(), "run-1"), byName); r != (cancelReceipt{Status: "failed", RootTaskID: byName, Error: "task_not_found"}) {
		t.Fatalf("a nested task as a child of the run = %+v", r)
	}
	if r := call(runCtx(t.Context(), "run-2"), "sibling"); r != (cancelReceipt{Status: "failed", RootTaskID: "sibling", Error: "task_not_found"}) {
		t.Fatalf("a task of another run = %+v", r)
	}
	if r := call(runCtx(t.Context(), "run-1"), "sibling"); r != (cancelReceipt{Status: "accepted", RootTaskID: sibling, CancelledCount: 1}) {
		t.Fatalf("cancel sibling in the run = %+v", r)
	}
	<-sp.cause
	for _, p := range []*mtProbe{root, tp} {
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("cancelled a task not asked for: %v", err)
		}
	}
}

// TestCancelThreadIsolation: another owner's tools cannot cancel a task,
// even in the same run.
func TestCancelThreadIsolation(t *testing.T) {
	m := mtNew(t)
	id, p := mtSpawnProbe(t, runCtx(t.Context(), "run-1"), m.Owner("thread-1"), WithName("job"))
	tool := ttTool(t, m.Owner("thread-2"), "cancel_task")
	for _, name := range []string{id, "job"} {
		var r cancelReceipt
		ttCall(t, runCtx(t.Context(), "run-1"), tool, `{"target":{"relation":"child","name":"`+name+`"}}`, &r)
		if r != (cancelReceipt{Status: "failed", RootTaskID: name, Error: "task_not_found"}) {
			t.Fatalf("thread-2 cancels %s: %+v", name, r)
		}
	}
	if err := p.ctxErr(t); err != nil {
		t.Fatalf("thread-1's task was cancelled: %v", err)
	}
}

func TestCancelAfterShutdown(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	mtShutdown(t, m)
	err := ttCallErr(t, runCtx(t.Context(), "run-1"), ttTool(t, o, "cancel_task"), `{"target":{"relation":"self"}}`)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("cancel_task after Shutdown: %v", err)
	}
	// Reads go on working.
	ttCall(t, t.Context(), ttTool(t, o, "list_tasks"), `{}`, nil)
}
