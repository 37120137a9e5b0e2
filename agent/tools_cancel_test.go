package agent

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// TestCancelSelfTaskScopeCascades is awaken #108: self in a task scope
// cancels the task and its descendants.
func TestCancelSelfTaskScopeCascades(t *testing.T) {
	for _, subAgent := range []bool{false, true} {
		name := map[bool]string{false: "owner tools", true: "sub-agent's own tools"}[subAgent]
		t.Run(name, func(t *testing.T) {
			m := newTestManager(t)
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
			child, cp := spawnProbe(t, rp.ctx, kids)
			grand, gp := spawnProbe(t, cp.ctx, kids)
			var hook atomic.Int32
			var r cancelReceipt
			callTool(t, rp.ctx, toolNamed(t, tools, "cancel_task", WithOnSelfCancel(func(context.Context) { hook.Add(1) })), `{"target":{"relation":"self"}}`, &r)
			if r != (cancelReceipt{Status: "accepted", RootTaskID: root, CanceledCount: 3}) {
				t.Fatalf("cancel_task = %+v", r)
			}
			for _, p := range []*probeTask{rp, cp, gp} {
				if cause := <-p.cause; cause == nil {
					t.Fatal("a task of the tree was not cancelled")
				}
			}
			if got := waitTask(t, kids, child).Status; got != bgtype.StatusCanceled {
				t.Errorf("child %s", got)
			}
			if got := waitTask(t, kids, grand).Status; got != bgtype.StatusCanceled {
				t.Errorf("grandchild %s", got)
			}
			if got := waitTask(t, o, root).Status; got != bgtype.StatusCanceled {
				t.Errorf("root %s", got)
			}
			if hook.Load() != 0 {
				t.Error("WithOnSelfCancel called in a task scope")
			}
		})
	}
}

// TestCancelSelfRunScope is awaken #109: self in a run scope cancels the
// run's tasks and their descendants, counts only them, and calls
// WithOnSelfCancel; a second self-cancel says the run was already cancelled.
func TestCancelSelfRunScope(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ctx := runCtx(t.Context(), "run-1")
	child, cp := spawnProbe(t, ctx, o)
	grand, gp := spawnProbe(t, cp.ctx, o)
	other, op := spawnProbe(t, runCtx(t.Context(), "run-2"), o)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var hooked context.Context
	tool := toolNamed(t, o, "cancel_task", WithOnSelfCancel(func(ctx context.Context) { hooked = ctx; cancelRun() }))
	var r cancelReceipt
	callTool(t, runCtx, tool, `{"target":{"relation":"self"}}`, &r)
	if r != (cancelReceipt{Status: "accepted", RootTaskID: "run-1", CanceledCount: 2}) {
		t.Fatalf("cancel_task = %+v", r)
	}
	if hooked != runCtx || runCtx.Err() == nil {
		t.Fatalf("WithOnSelfCancel got %v; run ctx err %v", hooked, runCtx.Err())
	}
	for id, p := range map[string]*probeTask{child: cp, grand: gp} {
		if cause := <-p.cause; !errors.Is(cause, bgtask.ErrCanceled) {
			t.Errorf("%s: cause %v", id, cause)
		}
		if got := waitTask(t, o, id).Status; got != bgtype.StatusCanceled {
			t.Errorf("%s: %s", id, got)
		}
	}
	if err := op.ctxErr(t); err != nil {
		t.Fatalf("a task of another run was cancelled: %v", err)
	}
	// The run is cancelled: a spawn into it is refused.
	if _, err := o.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return nil, nil }); !errors.Is(err, bgtask.ErrCanceled) {
		t.Fatalf("spawn into the cancelled run: %v", err)
	}
	// A second self-cancel signals nothing and says so; a panicking hook is
	// contained.
	panicky := toolNamed(t, o, "cancel_task", WithOnSelfCancel(func(context.Context) { panic("hook") }))
	if got := string(callTool(t, ctx, panicky, `{"target":{"relation":"self"}}`, nil)); got != `{"status":"already_cancelled","root_task_id":"run-1","cancelled_count":0}` {
		t.Fatalf("second cancel_task = %s", got)
	}
	_ = other
}

// TestCancelSelfWithoutScope is awaken #110.
func TestCancelSelfWithoutScope(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	_, p := spawnProbe(t, t.Context(), o)
	_, foreign := spawnProbe(t, t.Context(), m.Owner("thread-2"))
	tool := toolNamed(t, o, "cancel_task")
	for name, ctx := range map[string]context.Context{
		"no scope":             t.Context(),
		"blank run":            bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: " ", AgentID: "a"}),
		"another owner's task": foreign.ctx,
		"another manager's task": func() context.Context {
			_, q := spawnProbe(t, t.Context(), newTestManager(t).Owner("thread-1"))
			return q.ctx
		}(),
	} {
		for _, args := range []string{`{"target":{"relation":"self"}}`, `{"target":{"relation":"child","name":"x"}}`} {
			err := callToolErr(t, ctx, tool, args)
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
	m := newTestManager(t)
	o := m.Owner("thread-1")
	_, root := spawnProbe(t, runCtx(t.Context(), "run-1"), o)
	byName, bp := spawnProbe(t, root.ctx, o, bgtask.WithName("crawler"))
	_, bgp := spawnProbe(t, bp.ctx, o) // its child: a descendant of the root's child
	byID, ip := spawnProbe(t, root.ctx, o)
	sibling, sp := spawnProbe(t, runCtx(t.Context(), "run-1"), o, bgtask.WithName("sibling"))
	done, err := o.Spawn(root.ctx, func(context.Context, *bgtask.Task) (any, error) { return 1, nil }, bgtask.WithName("finished"))
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, o, done)
	theirs, tp := spawnProbe(t, t.Context(), m.Owner("thread-2"), bgtask.WithName("crawler2"))
	tool := toolNamed(t, o, "cancel_task")
	call := func(ctx context.Context, name string) cancelReceipt {
		var r cancelReceipt
		callTool(t, ctx, tool, toJSON(map[string]any{"target": map[string]string{"relation": "child", "name": name}}), &r)
		return r
	}

	// Unknown, another owner's by id or name.
	for _, name := range []string{"nope", "task_0000", theirs, "crawler2"} {
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
	if r := call(root.ctx, "crawler"); r != (cancelReceipt{Status: "accepted", RootTaskID: byName, CanceledCount: 2}) {
		t.Fatalf("cancel crawler = %+v", r)
	}
	<-bp.cause
	<-bgp.cause
	// Again, while it may still be winding down or after it ended.
	if r := call(root.ctx, byName); r.CanceledCount != 0 || (r.Status == "failed" && r.Error != "task_not_running") {
		t.Fatalf("second cancel = %+v", r)
	}
	waitTask(t, o, byName)
	if r := call(root.ctx, "crawler"); r != (cancelReceipt{Status: "failed", RootTaskID: byName, Error: "task_not_running"}) {
		t.Fatalf("cancel ended crawler = %+v", r)
	}
	// By id.
	if r := call(root.ctx, byID); r != (cancelReceipt{Status: "accepted", RootTaskID: byID, CanceledCount: 1}) {
		t.Fatalf("cancel by id = %+v", r)
	}
	<-ip.cause
	// Whatever the scope, a name reaches the owner's task: a nested one
	// from the run, one of run-1 from run-2.
	if r := call(runCtx(t.Context(), "run-1"), "crawler"); r != (cancelReceipt{Status: "failed", RootTaskID: byName, Error: "task_not_running"}) {
		t.Fatalf("a nested task by name from the run = %+v", r)
	}
	if r := call(runCtx(t.Context(), "run-2"), "sibling"); r != (cancelReceipt{Status: "accepted", RootTaskID: sibling, CanceledCount: 1}) {
		t.Fatalf("cancel sibling from another run = %+v", r)
	}
	<-sp.cause
	for _, p := range []*probeTask{root, tp} {
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("cancelled a task not asked for: %v", err)
		}
	}
}

// TestCancelThreadIsolation: another owner's tools cannot cancel a task,
// even in the same run.
func TestCancelThreadIsolation(t *testing.T) {
	m := newTestManager(t)
	id, p := spawnProbe(t, runCtx(t.Context(), "run-1"), m.Owner("thread-1"), bgtask.WithName("job"))
	tool := toolNamed(t, m.Owner("thread-2"), "cancel_task")
	for _, name := range []string{id, "job"} {
		var r cancelReceipt
		callTool(t, runCtx(t.Context(), "run-1"), tool, `{"target":{"relation":"child","name":"`+name+`"}}`, &r)
		if r != (cancelReceipt{Status: "failed", RootTaskID: name, Error: "task_not_found"}) {
			t.Fatalf("thread-2 cancels %s: %+v", name, r)
		}
	}
	if err := p.ctxErr(t); err != nil {
		t.Fatalf("thread-1's task was cancelled: %v", err)
	}
}

func TestCancelAfterShutdown(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	shutdownManager(t, m)
	err := callToolErr(t, runCtx(t.Context(), "run-1"), toolNamed(t, o, "cancel_task"), `{"target":{"relation":"self"}}`)
	if !errors.Is(err, bgtask.ErrClosed) {
		t.Fatalf("cancel_task after Shutdown: %v", err)
	}
	// Reads go on working.
	callTool(t, t.Context(), toolNamed(t, o, "list_tasks"), `{}`, nil)
}

// TestCancelSelfTwoOwnersSameRunID: two threads whose loops both call their
// run "run-1". Thread A's self-cancel, through cancel_task or through its
// plugin's RunEnd, cancels only A's tasks and refuses only A's later spawns;
// its receipt counts only A's tasks. It used to cancel B's tasks, block B's
// next spawn, and count B's task and the run.
func TestCancelSelfTwoOwnersSameRunID(t *testing.T) {
	for _, how := range []string{"cancel_task", "RunEnd"} {
		t.Run(how, func(t *testing.T) {
			m := newTestManager(t)
			plugins := map[string]*Plugin{}
			for _, owner := range []string{"thread-A", "thread-B"} {
				p, err := NewPlugin(m, owner, Config{})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				plugins[owner] = p
			}
			a, b := plugins["thread-A"].Owner(), plugins["thread-B"].Owner()
			ctx := runCtx(t.Context(), "run-1")
			aid, ap := spawnProbe(t, ctx, a)
			bid, bp := spawnProbe(t, ctx, b)
			_, bchild := spawnProbe(t, bp.ctx, b)

			if how == "cancel_task" {
				got := string(callTool(t, ctx, toolNamed(t, a, "cancel_task"), `{"target":{"relation":"self"}}`, nil))
				if want := `{"status":"accepted","root_task_id":"run-1","cancelled_count":1}`; got != want {
					t.Fatalf("A's cancel_task = %s, want %s", got, want)
				}
			} else if err := plugins["thread-A"].RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1", Canceled: true}); err != nil {
				t.Fatal(err)
			}
			if cause := <-ap.cause; !errors.Is(cause, bgtask.ErrCanceled) {
				t.Fatalf("A's task: cause %v, want ErrCanceled (run)", cause)
			}
			if got := waitTask(t, a, aid); got.Status != bgtype.StatusCanceled {
				t.Fatalf("A's task %s, want cancelled", got.Status)
			}
			for _, p := range []*probeTask{bp, bchild} {
				if err := p.ctxErr(t); err != nil {
					t.Fatalf("B's task was cancelled: %v", err)
				}
			}
			fn := func(context.Context, *bgtask.Task) (any, error) { return nil, nil }
			if _, err := a.Spawn(ctx, fn); !errors.Is(err, bgtask.ErrCanceled) {
				t.Fatalf("A's spawn into its cancelled run-1: %v, want ErrCanceled (run)", err)
			}
			id, err := b.Spawn(ctx, fn)
			if err != nil {
				t.Fatalf("B's spawn into its run-1: %v", err)
			}
			if got := waitTask(t, b, id); got.Status != bgtype.StatusCompleted || got.Parent.RunID != "run-1" {
				t.Fatalf("B's new task %s in run %q, want completed in run-1", got.Status, got.Parent.RunID)
			}
			// B's own self-cancel still finds its run live.
			got := string(callTool(t, ctx, toolNamed(t, b, "cancel_task"), `{"target":{"relation":"self"}}`, nil))
			if want := `{"status":"accepted","root_task_id":"run-1","cancelled_count":2}`; got != want {
				t.Fatalf("B's cancel_task = %s, want %s", got, want)
			}
			if got := waitTask(t, b, bid); got.Status != bgtype.StatusCanceled {
				t.Fatalf("B's task %s, want cancelled", got.Status)
			}
		})
	}
}

// TestCancelSelfReceipts: a self-cancel that signals nothing says why, in
// a run scope and in a task scope, and a run's WithOnSelfCancel is called every
// time. It used to answer "accepted" with cancelled_count 1.
func TestCancelSelfReceipts(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	hooked := 0
	tool := toolNamed(t, o, "cancel_task", WithOnSelfCancel(func(context.Context) { hooked++ }))
	self := `{"target":{"relation":"self"}}`
	_, tp := spawnProbe(t, t.Context(), o)
	taskID := tp.task.ID()
	steps := []struct {
		name       string
		ctx        context.Context
		want       string
		wantHooked int
	}{
		{"run without tasks", runCtx(t.Context(), "run-empty"), `{"status":"nothing_to_cancel","root_task_id":"run-empty","cancelled_count":0}`, 1},
		{"run again", runCtx(t.Context(), "run-empty"), `{"status":"already_cancelled","root_task_id":"run-empty","cancelled_count":0}`, 2},
		{"task", tp.ctx, `{"status":"accepted","root_task_id":"` + taskID + `","cancelled_count":1}`, 2},
		{"task again", tp.ctx, `{"status":"already_cancelled","root_task_id":"` + taskID + `","cancelled_count":0}`, 2},
	}
	for _, s := range steps {
		if got := string(callTool(t, s.ctx, tool, self, nil)); got != s.want {
			t.Errorf("%s: cancel_task = %s, want %s", s.name, got, s.want)
		}
		if hooked != s.wantHooked {
			t.Errorf("%s: WithOnSelfCancel called %d times, want %d", s.name, hooked, s.wantHooked)
		}
	}
	waitTask(t, o, taskID)
	// The task has ended; a goroutine it left behind asks again.
	if got, want := string(callTool(t, tp.ctx, tool, self, nil)), `{"status":"already_cancelled","root_task_id":"`+taskID+`","cancelled_count":0}`; got != want {
		t.Errorf("ended task: cancel_task = %s, want %s", got, want)
	}
}

// TestCancelByIDAnyLiveTask: by task_id, cancel_task reaches any of the
// owner's tasks that list_tasks shows, whatever run or task started it,
// and one another instance runs with a SharedStore. It used to find only
// children of the current task or run.
func TestCancelByIDAnyLiveTask(t *testing.T) {
	f := &fakeShared{Store: memstore.New()}
	m := newTestManager(t, bgtask.WithStore(f), bgtask.WithInstance("this-instance"))
	o := m.Owner("thread-1")
	earlier, ep := spawnProbe(t, runCtx(t.Context(), "run-0"), o, bgtask.WithName("old"))
	_, root := spawnProbe(t, runCtx(t.Context(), "run-1"), o)
	nested, np := spawnProbe(t, root.ctx, o)
	_, caller := spawnProbe(t, runCtx(t.Context(), "run-1"), o)
	remote := remoteRecord(t, f, "task_0190d5f4c5a87000a000000000000001")
	tool := toolNamed(t, o, "cancel_task")
	call := func(ctx context.Context, name string) string {
		return string(callTool(t, ctx, tool, toJSON(map[string]any{"target": map[string]string{"relation": "child", "name": name}}), nil))
	}
	run1 := runCtx(t.Context(), "run-1")
	for _, c := range []struct {
		name string
		ctx  context.Context
		id   string
		p    *probeTask
	}{
		{"a task of an earlier run, from the run", run1, earlier, ep},
		{"a nested task, from another task", caller.ctx, nested, np},
	} {
		want := `{"status":"accepted","root_task_id":"` + c.id + `","cancelled_count":1}`
		if got := call(c.ctx, c.id); got != want {
			t.Fatalf("%s: %s, want %s", c.name, got, want)
		}
		if cause := <-c.p.cause; !errors.Is(cause, bgtask.ErrCanceled) {
			t.Fatalf("%s: cause %v, want ErrCanceled", c.name, cause)
		}
	}
	want := `{"status":"accepted","root_task_id":"` + remote.ID + `","cancelled_count":1}`
	if got := call(run1, remote.ID); got != want {
		t.Fatalf("a task of another instance: %s, want %s", got, want)
	}
	f.Mu.Lock()
	requests := slices.Clone(f.Requests)
	f.Mu.Unlock()
	if !slices.Equal(requests, []string{remote.ID + "+tree"}) {
		t.Fatalf("cancel requests %v, want the remote task's tree", requests)
	}
	for _, p := range []*probeTask{root, caller} {
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("a task not asked for was cancelled: %v", err)
		}
	}
	shutdownManager(t, m)
}

// TestCancelByNameAnyRun: with one run per request, a task one request
// started is cancelled by name from the next (it answered task_not_found
// while list_tasks showed it running). A name that two live tasks of the
// owner carry (processes sharing a Store each keep names unique only for
// their own tasks) is refused with both ids, by cancel_task and by
// send_message, and nothing is cancelled or sent. A sub-agent's own task is
// the sub-agent's, not the owner's: its name is not found.
func TestCancelByNameAnyRun(t *testing.T) {
	f := &fakeShared{Store: memstore.New()}
	m := newTestManager(t, bgtask.WithStore(f), bgtask.WithInstance("this-instance"))
	o := m.Owner("thread-1")
	slow, sp := spawnProbe(t, runCtx(t.Context(), "request-1"), o, bgtask.WithName("research-slow"))
	request2 := runCtx(t.Context(), "request-2")
	cancelTool := toolNamed(t, o, "cancel_task")
	cancel := func(name string) string {
		return string(callTool(t, request2, cancelTool, `{"target":{"relation":"child","name":"`+name+`"},"reason":null}`, nil))
	}

	var listed listResult
	callTool(t, request2, toolNamed(t, o, "list_tasks"), `{}`, &listed)
	if len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != slow || listed.Tasks[0].Status != bgtype.StatusRunning {
		t.Fatalf("list_tasks = %+v, want %s running", listed.Tasks, slow)
	}
	if got, want := cancel("research-slow"), `{"status":"accepted","root_task_id":"`+slow+`","cancelled_count":1}`; got != want {
		t.Fatalf("cancel research-slow from the next request = %s, want %s", got, want)
	}
	if cause := <-sp.cause; !errors.Is(cause, bgtask.ErrCanceled) {
		t.Fatalf("cause %v, want ErrCanceled", cause)
	}

	// Two live tasks named "dup": this process's and another's.
	dup, dp := spawnProbe(t, request2, o, bgtask.WithName("dup"))
	remote := bgtype.TaskMeta{ID: "task_0190d5f4c5a87000a000000000000001", Owner: "thread-1", Type: bgtype.TypeTask, Name: "dup",
		Status: bgtype.StatusRunning, Instance: "other-instance", Attempt: 1, CreatedAt: time.Now().Add(time.Hour)}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(remote)); err != nil {
		t.Fatal(err)
	}
	msg := `"message":"2 live tasks are named \"dup\" (` + dup + `, ` + remote.ID + `): give the task_id of the one you mean"`
	if got, want := cancel("dup"), `{"status":"failed","root_task_id":"dup","cancelled_count":0,"error":"task_name_ambiguous",`+msg+`}`; got != want {
		t.Fatalf("cancel dup = %s, want %s", got, want)
	}
	sent := string(callTool(t, request2, toolNamed(t, o, "send_message"), `{"to":{"relation":"child","name":"dup"},"message":"hi","in_reply_to":null}`, nil))
	if want := `{"status":"failed","error":"recipient_ambiguous",` + msg + `}`; sent != want {
		t.Fatalf("send_message to dup = %s, want %s", sent, want)
	}

	// A sub-agent's own task, by name.
	ap := newProbe()
	agent, err := o.SpawnAgent(request2, ap.fn)
	if err != nil {
		t.Fatal(err)
	}
	<-ap.started
	_, ip := spawnProbe(t, t.Context(), m.Owner(agent), bgtask.WithName("inner"))
	if got, want := cancel("inner"), `{"status":"failed","root_task_id":"inner","cancelled_count":0,"error":"task_not_found"}`; got != want {
		t.Fatalf("cancel inner = %s, want %s", got, want)
	}

	for _, p := range []*probeTask{dp, ap, ip} {
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("a task not asked for was cancelled: %v", err)
		}
	}
	f.Mu.Lock()
	requests := slices.Clone(f.Requests)
	f.Mu.Unlock()
	if len(requests) != 0 {
		t.Fatalf("cancel requests %v, want none", requests)
	}
	if msgs, err := o.Messages(t.Context(), dup); err != nil || len(msgs) != 0 {
		t.Fatalf("messages of dup = %v, %v; want none", msgs, err)
	}
}
