package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// env is a Manager, the plugin of thread-1 and a few host-written tools,
// as in awaken's background_task_lifecycle tests.
type env struct {
	m      *bgtask.Manager
	p      *agent.Plugin
	owner  bgtask.Owner
	tools  []agentloop.Tool
	wakes  atomic.Int32
	finish chan struct{} // closing it lets blocking tasks complete
}

func newEnv(t *testing.T) *env {
	t.Helper()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{m: m, owner: m.Owner("thread-1"), finish: make(chan struct{})}
	wake := func(bgtype.Event) { e.wakes.Add(1) }
	if e.p, err = agent.NewPlugin(m, "thread-1", agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: wake}}); err != nil {
		t.Fatal(err)
	}
	e.tools = []agentloop.Tool{
		e.spawnTool("spawn_task", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			select {
			case <-e.finish:
				return map[string]bool{"done": true}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}),
		e.spawnTool("spawn_quick", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			return map[string]any{"done": true, "source": "background"}, nil
		}),
	}
	t.Cleanup(func() {
		// No deadline: a Shutdown that hangs is a bug the test binary's
		// -timeout reports with every stack, not a race against the clock.
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e
}

// spawnTool is a tool that starts fn for the owner and returns its id.
func (e *env) spawnTool(name string, fn bgtask.Func, opts ...bgtask.SpawnOption) agentloop.Tool {
	return agentloop.Tool{
		Name:   name,
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			id, err := e.owner.Spawn(ctx, fn, opts...)
			if err != nil {
				return nil, err
			}
			return json.Marshal(map[string]string{"task_id": id})
		},
	}
}

func (e *env) config(model agentloop.Model, run string) agentloop.Config {
	return agentloop.Config{Model: model, Tools: e.tools, Hooks: e.p, RunID: run, AgentID: "agent-1"}
}

func runLoop(t *testing.T, cfg agentloop.Config, prompt string) agentloop.Result {
	t.Helper()
	res, err := agentloop.Run(t.Context(), cfg, []agentloop.Message{{Role: "user", Content: prompt}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func call(name string) agentloop.ScriptStep {
	return agentloop.Call(agentloop.CallSpec{Name: name, Args: map[string]any{}})
}

// eventMessages returns the contents of the internal background-event
// messages of a conversation.
func eventMessages(msgs []agentloop.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Internal && strings.HasPrefix(m.Content, "<background-task-event") {
			out = append(out, m.Content)
		}
	}
	return out
}

// Awaken #166, #177: a natural end with a task running ends the top-level
// run waiting, reason awaiting_tasks.
func TestNaturalEndWithRunningTaskWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		model := agentloop.NewScriptedModel(call("spawn_task"), agentloop.Say("started it"))
		res := runLoop(t, e.config(model, "run-1"), "go")
		if res.Status != agentloop.StatusWaiting || res.Reason != agentloop.ReasonAwaitingTasks {
			t.Fatalf("result %s/%s, want waiting/awaiting_tasks", res.Status, res.Reason)
		}
		if res.Steps != 2 || res.Response != "started it" {
			t.Fatalf("steps %d response %q, want 2 and %q", res.Steps, res.Response, "started it")
		}
		close(e.finish)
		synctest.Wait()
		if got := e.wakes.Load(); got != 1 {
			t.Fatalf("OnWake called %d times after the run ended, want 1", got)
		}
		// The next run picks the completion up at its first step.
		model2 := agentloop.NewScriptedModel()
		res = runLoop(t, e.config(model2, "run-2"), "anything new?")
		if res.Status != agentloop.StatusDone || res.Reason != agentloop.ReasonNatural {
			t.Fatalf("second run %s/%s, want done/natural", res.Status, res.Reason)
		}
		evs := eventMessages(model2.Requests()[0].Messages)
		if len(evs) != 1 || !strings.Contains(evs[0], `kind="completed"`) || !strings.Contains(evs[0], `"result":{"done":true}`) {
			t.Fatalf("first request of the second run has events %q, want the one completion", evs)
		}
	})
}

// Awaken #167, #178.
func TestNoTasksEndsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		res := runLoop(t, e.config(agentloop.NewScriptedModel(agentloop.Say("hi")), "run-1"), "hello")
		if res.Status != agentloop.StatusDone || res.Reason != agentloop.ReasonNatural || res.Steps != 1 {
			t.Fatalf("result %+v, want done/natural in 1 step", res)
		}
	})
}

// Awaken #168, #175, #196: an event is one internal user message with the
// tag, the kind and the task id; progress events (on_activity) come before
// the completion.
func TestEventsRenderedAtStepBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		emitter := e.spawnTool("spawn_emitter", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			if err := tk.Emit("data_ready", map[string]int{"rows": 42}); err != nil {
				return nil, err
			}
			return "ok", nil
		}, bgtask.WithWake(bgtype.WakeOnActivity))
		cfg := e.config(agentloop.NewScriptedModel(call("spawn_emitter"), func(agentloop.Request) agentloop.Response {
			synctest.Wait() // the task has finished before the next inference
			return agentloop.Response{Calls: []agentloop.ToolCall{{ID: "noop", Name: "spawn_quick", Args: json.RawMessage(`{}`)}}}
		}), "run-1")
		cfg.Tools = append(cfg.Tools, emitter)
		res := runLoop(t, cfg, "go")
		evs := eventMessages(res.Conversation)
		if len(evs) < 2 {
			t.Fatalf("events in conversation: %q, want the custom and the completed one first", evs)
		}
		if ev, ok := e.p.ParseEvent(evs[0]); !ok || ev.Kind != bgtype.EventCustom || ev.EventType != "data_ready" || string(ev.Payload) != `{"rows":42}` {
			t.Fatalf("first event %q, want the data_ready custom event", evs[0])
		}
		if !strings.Contains(evs[1], `kind="completed"`) || !strings.Contains(evs[1], `"result":"ok"`) {
			t.Fatalf("second event %q, want the completion", evs[1])
		}
	})
}

// Awaken #174: a sub-agent run waits for its task and summarises it, so its
// parent gets one final answer.
func TestSubAgentWaitsForItsTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		model := agentloop.NewScriptedModel(call("spawn_slow"), agentloop.Say("waiting for it"), func(req agentloop.Request) agentloop.Response {
			evs := eventMessages(req.Messages)
			if len(evs) == 1 && strings.Contains(evs[0], "task finished") {
				return agentloop.Response{Text: "final summary: task finished"}
			}
			return agentloop.Response{Text: "no event seen"}
		})
		id, err := e.owner.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			p, err := agent.NewPlugin(e.m, tk.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: tk.Inbox()}})
			if err != nil {
				return nil, err
			}
			slow := agentloop.Tool{Name: "spawn_slow", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				ag, err := tk.Agent()
				if err != nil {
					return nil, err
				}
				id, err := ag.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
					select { // 100 ms of the bubble's fake time
					case <-time.After(100 * time.Millisecond):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return map[string]string{"data": "task finished"}, nil
				})
				return agentloop.Text(id), err
			}}
			res, err := agentloop.Run(ctx, agentloop.Config{Model: model, Tools: []agentloop.Tool{slow}, Hooks: p, RunID: "run-sub", SubAgent: true},
				[]agentloop.Message{{Role: "user", Content: "research"}})
			if err != nil {
				return nil, err
			}
			return res.Response, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		meta, err := e.owner.Wait(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Status != bgtype.StatusCompleted || string(meta.Result) != `"final summary: task finished"` {
			t.Fatalf("sub-agent %s with %s, want completed with the summary", meta.Status, meta.Result)
		}
		if n := len(model.Requests()); n != 3 {
			t.Fatalf("model called %d times, want 3 (tool, natural end, summary)", n)
		}
	})
}

// Awaken #197: a suspended run buffers background events and does not call
// the model until the decision arrives; the next request carries them.
func TestSuspendedRunBuffersEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		decisions := make(chan agentloop.Decision)
		dangerous := agentloop.Tool{Name: "dangerous", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, agentloop.ErrSuspend
		}}
		model := agentloop.NewScriptedModel(agentloop.Call(
			agentloop.CallSpec{Name: "spawn_quick", Args: map[string]any{}},
			agentloop.CallSpec{Name: "dangerous", Args: map[string]any{}},
		))
		cfg := e.config(model, "run-1")
		cfg.Tools = append(cfg.Tools, dangerous)
		cfg.Decisions = decisions
		done := make(chan agentloop.Result)
		go func() {
			res, err := agentloop.Run(t.Context(), cfg, []agentloop.Message{{Role: "user", Content: "go"}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		synctest.Wait() // the quick task has completed; the run waits for the decision
		if n := len(model.Requests()); n != 1 {
			t.Fatalf("model called %d times while suspended, want 1", n)
		}
		decisions <- agentloop.Decision{CallID: "call-1-1", Result: "approved"} // the second call of the first step
		reqs := model.Requests()
		res := <-done
		if res.Status != agentloop.StatusDone || res.Reason != agentloop.ReasonNatural {
			t.Fatalf("result %s/%s, want done/natural", res.Status, res.Reason)
		}
		reqs = model.Requests()
		if len(reqs) != 2 {
			t.Fatalf("model called %d times, want 2", len(reqs))
		}
		evs := eventMessages(reqs[1].Messages)
		if len(evs) != 1 || !strings.Contains(evs[0], `"done":true`) {
			t.Fatalf("second request events %q, want the completion", evs)
		}
	})
}

// Awaken #203 (ported): cancelling a top-level run cancels its task and the
// task's nested child.
func TestCancelRunCancelsDescendants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		var parentID, childID atomic.Value
		nested := e.spawnTool("spawn_nested", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			parentID.Store(tk.ID())
			id, err := e.owner.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
			if err != nil {
				return nil, err
			}
			childID.Store(id)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		ctx, cancel := context.WithCancelCause(t.Context())
		wait := agentloop.Tool{Name: "wait", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			synctest.Wait()              // both tasks have started
			cancel(bgtask.ErrRunStopped) // the user stopped the run
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		cfg := e.config(agentloop.NewScriptedModel(agentloop.Call(
			agentloop.CallSpec{Name: "spawn_nested", Args: map[string]any{}},
			agentloop.CallSpec{Name: "wait", Args: map[string]any{}},
		)), "run-1")
		cfg.Tools = append(cfg.Tools, nested, wait)
		res, err := agentloop.Run(ctx, cfg, []agentloop.Message{{Role: "user", Content: "go"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Reason != agentloop.ReasonCanceled {
			t.Fatalf("reason %q, want cancelled", res.Reason)
		}
		for _, v := range []*atomic.Value{&parentID, &childID} {
			id, _ := v.Load().(string)
			meta, err := e.m.Wait(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if meta.Status != bgtype.StatusCanceled || meta.Error != "bgtask: run cancelled: stopped by the user" {
				t.Fatalf("task %s is %s (%q), want cancelled by the run", id, meta.Status, meta.Error)
			}
		}
		// The run is cancelled for good: a late spawn into it is refused.
		_, err = e.owner.Spawn(bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1"}), func(context.Context, *bgtask.Task) (any, error) { return nil, nil })
		if !errors.Is(err, bgtask.ErrCanceled) {
			t.Fatalf("spawn into the cancelled run: %v, want ErrRunCanceled", err)
		}
	})
}

// A server's run ends with its request: a client that hangs up (the
// request's context cancelled without bgtask.ErrRunStopped) ends the run
// "cancelled" but does not cancel the tasks it started; their ends reach
// the owner's next run.
func TestClientHangUpLeavesTasksRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		req, hangUp := context.WithCancel(t.Context())
		wait := agentloop.Tool{Name: "wait", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			synctest.Wait() // the task has started
			hangUp()        // the HTTP client went away
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		cfg := e.config(agentloop.NewScriptedModel(call("spawn_task"), call("wait")), "run-1")
		cfg.Tools = append(cfg.Tools, wait)
		res, err := agentloop.Run(req, cfg, []agentloop.Message{{Role: "user", Content: "go"}})
		if err != nil || res.Reason != agentloop.ReasonCanceled {
			t.Fatalf("Run = %s, %v; want cancelled", res.Reason, err)
		}
		synctest.Wait()
		running := 0
		for _, err := range e.owner.List(t.Context(), bgtype.StatusRunning) {
			if err != nil {
				t.Fatal(err)
			}
			running++
		}
		if running != 1 {
			t.Fatalf("%d tasks running after the client hung up, want the run's task still running", running)
		}
		close(e.finish)
		synctest.Wait()
		res = runLoop(t, e.config(agentloop.NewScriptedModel(agentloop.Say("noted")), "run-2"), "next")
		if got := eventMessages(res.Conversation); len(got) != 1 || !strings.Contains(got[0], `kind="completed"`) {
			t.Fatalf("the next run delivered %q, want the task's completion once", got)
		}
	})
}

// Awaken #109, #204: cancel_task "self" in a run cancels the run's tasks
// and, through CancelRun, the run itself.
func TestSelfCancelEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		cfg := e.config(agentloop.NewScriptedModel(
			call("spawn_task"),
			agentloop.Call(agentloop.CallSpec{Name: "cancel_task", Args: map[string]any{"target": map[string]string{"relation": "self"}}}),
			agentloop.Say("never asked"),
		), "run-1")
		for _, tool := range agent.Tools(e.owner, agent.WithOnSelfCancel(agentloop.CancelRun)) {
			cfg.Tools = append(cfg.Tools, agentloop.Tool(tool))
		}
		res := runLoop(t, cfg, "go")
		if res.Reason != agentloop.ReasonCanceled || res.Steps != 2 {
			t.Fatalf("result %s after %d steps, want cancelled after 2", res.Reason, res.Steps)
		}
		last := res.Conversation[len(res.Conversation)-1]
		if last.Role != "tool" || last.Content != `{"status":"accepted","root_task_id":"run-1","cancelled_count":1}` {
			t.Fatalf("cancel_task answered %+v, want accepted with 1 (the task, not the run)", last)
		}
		synctest.Wait()
		n := 0
		for _, err := range e.owner.List(t.Context(), bgtype.StatusCanceled) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("%d cancelled tasks, want the spawned one", n)
		}
	})
}

// Awaken #169, #170: the parent's model messages two sub-agents in one step
// (send_message, concurrently delivered); each sub-agent's own loop sees
// the message as a direct user message, answers it, and the parent gets one
// completion from each.
func TestParentMessagesTwoSubAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		echo := func(ctx context.Context, tk *bgtask.Task) (any, error) {
			if err := tk.Inbox().Wait(ctx); err != nil { // instructions first
				return nil, err
			}
			p, err := agent.NewPlugin(e.m, tk.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: tk.Inbox()}})
			if err != nil {
				return nil, err
			}
			model := agentloop.NewScriptedModel(func(req agentloop.Request) agentloop.Response {
				for _, m := range req.Messages {
					if m.Role == "user" && !m.Internal && m.From != "" {
						return agentloop.Response{Text: tk.Name() + " got: " + m.Content}
					}
				}
				return agentloop.Response{Text: "no instructions"}
			})
			res, err := agentloop.Run(ctx, agentloop.Config{Model: model, Hooks: p, RunID: "run-" + tk.Name(), SubAgent: true}, nil)
			return res.Response, err
		}
		for _, name := range []string{"alpha", "beta"} {
			if _, err := e.owner.SpawnAgent(t.Context(), echo, bgtask.WithName(name)); err != nil {
				t.Fatal(err)
			}
		}
		send := func(to string) agentloop.CallSpec {
			return agentloop.CallSpec{Name: "send_message", Args: map[string]any{
				"to": map[string]string{"relation": "child", "name": to}, "message": "task for " + to,
			}}
		}
		model := agentloop.NewScriptedModel(agentloop.Call(send("alpha"), send("beta")), agentloop.Say("sent"))
		cfg := e.config(model, "run-1")
		for _, tool := range agent.Tools(e.owner) {
			cfg.Tools = append(cfg.Tools, agentloop.Tool(tool))
		}
		first := runLoop(t, cfg, "delegate")
		synctest.Wait()
		// The completions reach the first run or, if they raced its end, the next.
		second := runLoop(t, e.config(agentloop.NewScriptedModel(), "run-2"), "results?")
		var got []string
		for _, content := range eventMessages(append(first.Conversation, second.Conversation...)) {
			if strings.Contains(content, `kind="completed"`) {
				got = append(got, content[strings.Index(content, `"result":`):])
			}
		}
		want := []string{`"result":"alpha got: task for alpha"}</background-task-event>`, `"result":"beta got: task for beta"}</background-task-event>`}
		if len(got) != 2 || !(got[0] == want[0] && got[1] == want[1] || got[0] == want[1] && got[1] == want[0]) {
			t.Fatalf("parent got %q, want one completion from each sub-agent echoing its own message", got)
		}
	})
}

type failingModel struct{}

func (failingModel) Next(context.Context, agentloop.Request) (agentloop.Response, error) {
	return agentloop.Response{}, errors.New("rate limited")
}

// The loop's own edges: bad configs, an unknown tool, a failing model, the
// step bound.
func TestRunEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		loopForever := func(agentloop.Request) agentloop.Response {
			return agentloop.Response{Calls: []agentloop.ToolCall{{ID: "c", Name: "nope", Args: json.RawMessage(`{}`)}}}
		}
		for _, tc := range []struct {
			name       string
			cfg        agentloop.Config
			wantErr    string
			wantReason string
			check      func(agentloop.Result) string
		}{
			{name: "no model", cfg: agentloop.Config{}, wantErr: "agentloop: no model"},
			{name: "hooks without run", cfg: agentloop.Config{Model: agentloop.NewScriptedModel(), Hooks: e.p}, wantErr: "agentloop: a run with hooks needs a RunID"},
			{name: "model fails", cfg: agentloop.Config{Model: failingModel{}}, wantErr: "agentloop: model: rate limited"},
			{
				name:       "unknown tool, then the step bound",
				cfg:        agentloop.Config{Model: agentloop.NewScriptedModel(loopForever, loopForever, loopForever), MaxSteps: 3},
				wantReason: agentloop.ReasonMaxSteps,
				check: func(res agentloop.Result) string {
					if res.Steps != 3 {
						return fmt.Sprintf("steps %d, want 3", res.Steps)
					}
					if last := res.Conversation[len(res.Conversation)-1]; last.Role != "tool" || last.Content != `error: unknown tool "nope"` {
						return fmt.Sprintf("last message %+v, want the unknown-tool error", last)
					}
					return ""
				},
			},
		} {
			res, err := agentloop.Run(t.Context(), tc.cfg, nil)
			switch {
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s: %v", tc.name, err)
			case tc.wantReason != "" && res.Reason != tc.wantReason:
				t.Errorf("%s: reason %q, want %q", tc.name, res.Reason, tc.wantReason)
			case tc.check != nil:
				if msg := tc.check(res); msg != "" {
					t.Errorf("%s: %s", tc.name, msg)
				}
			}
		}
	})
}

// A sub-agent waiting for its task is not woken by the task's progress
// (default wake policy), neither at its natural end nor while it waits: the
// model is called once more, with the progress and the completion together.
func TestSubAgentNotWokenByProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		model := agentloop.NewScriptedModel(call("spawn_slow"), func(agentloop.Request) agentloop.Response {
			<-time.After(60 * time.Millisecond) // of the bubble's fake time: the first progress is queued at the natural end
			return agentloop.Response{Text: "waiting for it"}
		}, func(req agentloop.Request) agentloop.Response {
			evs := eventMessages(req.Messages)
			if len(evs) == 3 && strings.Contains(evs[0], `"payload":1`) && strings.Contains(evs[1], `"payload":2`) && strings.Contains(evs[2], "task finished") {
				return agentloop.Response{Text: "final summary"}
			}
			return agentloop.Response{Text: fmt.Sprintf("woken with %q", evs)}
		})
		id, err := e.owner.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			p, err := agent.NewPlugin(e.m, tk.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: tk.Inbox()}})
			if err != nil {
				return nil, err
			}
			slow := agentloop.Tool{Name: "spawn_slow", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				ag, err := tk.Agent()
				if err != nil {
					return nil, err
				}
				id, err := ag.Spawn(ctx, func(ctx context.Context, c *bgtask.Task) (any, error) {
					for i := 1; i <= 2; i++ {
						select { // 50 ms of the bubble's fake time
						case <-time.After(50 * time.Millisecond):
						case <-ctx.Done():
							return nil, ctx.Err()
						}
						if err := c.Emit("progress", i); err != nil {
							return nil, err
						}
					}
					return "task finished", nil
				})
				return agentloop.Text(id), err
			}}
			res, err := agentloop.Run(ctx, agentloop.Config{Model: model, Tools: []agentloop.Tool{slow}, Hooks: p, RunID: "run-sub", SubAgent: true},
				[]agentloop.Message{{Role: "user", Content: "research"}})
			if err != nil {
				return nil, err
			}
			return res.Response, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		meta, err := e.owner.Wait(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Status != bgtype.StatusCompleted || string(meta.Result) != `"final summary"` {
			t.Fatalf("sub-agent %s with %s, want completed with the summary", meta.Status, meta.Result)
		}
		if n := len(model.Requests()); n != 3 {
			t.Fatalf("model called %d times, want 3 (tool, natural end, summary)", n)
		}
	})
}

// Events delivered at a natural end (here a sub-agent's wait for its
// task) are reported in the Step of the inference that reads them, as the
// step-start deliveries are, so OnStep shows every event the model got.
func TestStepReportsNaturalEndDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		model := agentloop.NewScriptedModel(call("spawn_slow"), agentloop.Say("waiting for it"), agentloop.Say("done"))
		var delivered []string // per step: the kinds of the events it reports
		id, err := e.owner.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			p, err := agent.NewPlugin(e.m, tk.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: tk.Inbox()}})
			if err != nil {
				return nil, err
			}
			slow := agentloop.Tool{Name: "spawn_slow", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				ag, err := tk.Agent()
				if err != nil {
					return nil, err
				}
				id, err := ag.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
					select { // fake time of the bubble
					case <-time.After(100 * time.Millisecond):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return "finished", nil
				})
				return agentloop.Text(id), err
			}}
			onStep := func(st agentloop.Step) {
				var kinds []string
				for _, pm := range st.Delivered {
					kinds = append(kinds, string(pm.Event.Kind))
				}
				delivered = append(delivered, fmt.Sprintf("step %d: %s", st.Index, strings.Join(kinds, ",")))
			}
			_, err = agentloop.Run(ctx, agentloop.Config{Model: model, Tools: []agentloop.Tool{slow}, Hooks: p, RunID: "run-sub", SubAgent: true, OnStep: onStep},
				[]agentloop.Message{{Role: "user", Content: "research"}})
			return nil, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.owner.Wait(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		want := "step 1: |step 2: |step 3: completed"
		if got := strings.Join(delivered, "|"); got != want {
			t.Fatalf("steps reported %q, want %q", got, want)
		}
	})
}

// foregroundTool is a tool that runs fn for the owner with
// Owner.Foreground, waiting up to d: its result, or the promotion notice.
func (e *env) foregroundTool(name string, d time.Duration, fn func(args json.RawMessage) bgtask.Func) agentloop.Tool {
	return agentloop.Tool{
		Name:   name,
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["target"],"properties":{"target":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			res, err := e.owner.Foreground(ctx, d, fn(args), bgtask.WithDescription(name+" "+string(args)))
			return res.Result, err
		},
	}
}

// A tool of the loop that uses Owner.Foreground: the quick call's result
// is its tool result and is never announced; the slow one is promoted with
// the call's lineage, its notice is the tool result, the run ends waiting
// for it, and the next run gets its completion, once.
func TestForegroundToolInTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		build := e.foregroundTool("build", time.Second, func(args json.RawMessage) bgtask.Func {
			return func(ctx context.Context, _ *bgtask.Task) (any, error) {
				var in struct{ Target string }
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, err
				}
				if in.Target == "all" {
					<-time.After(time.Minute)
				}
				return "built " + in.Target, nil
			}
		})
		model := agentloop.NewScriptedModel(
			agentloop.Call(agentloop.CallSpec{Name: "build", Args: map[string]string{"target": "docs"}},
				agentloop.CallSpec{Name: "build", Args: map[string]string{"target": "all"}}),
			agentloop.Say("building"),
			agentloop.Say("all built"),
		)
		cfg := e.config(model, "run-1")
		cfg.Tools = append(cfg.Tools, build)
		start := time.Now()
		res := runLoop(t, cfg, "build everything")
		if res.Status != agentloop.StatusWaiting || res.Reason != agentloop.ReasonAwaitingTasks || time.Since(start) != time.Second {
			t.Fatalf("run-1 = %s/%s after %v, want waiting/awaiting_tasks after 1s", res.Status, res.Reason, time.Since(start))
		}
		if evs := eventMessages(res.Conversation); len(evs) != 0 {
			t.Errorf("run-1 delivered %q, want nothing: the quick build answered directly", evs)
		}
		var results []string
		for _, msg := range res.Conversation {
			if msg.Role == "tool" {
				results = append(results, msg.ToolCallID+" "+msg.Content)
			}
		}
		if len(results) != 2 || results[0] != `call-1-0 "built docs"` || !strings.HasPrefix(results[1], `call-1-1 {"status":"promoted","task_id":"task_`) {
			t.Fatalf("tool results = %q", results)
		}
		var notice struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(results[1], "call-1-1 ")), &notice); err != nil {
			t.Fatal(err)
		}
		slow, err := e.owner.Get(t.Context(), notice.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if want := (bgtype.Parent{RunID: "run-1", CallID: "call-1-1", AgentID: "agent-1"}); slow.Parent != want || slow.Status != bgtype.StatusRunning {
			t.Errorf("promoted task: %s with lineage %+v, want running with %+v", slow.Status, slow.Parent, want)
		}
		if _, err := e.owner.Wait(t.Context(), notice.TaskID); err != nil {
			t.Fatal(err)
		}
		res = runLoop(t, e.config(model, "run-2"), "done?")
		events := eventMessages(res.Conversation)
		if len(events) != 1 || !strings.Contains(events[0], `kind="completed" task_id="`+notice.TaskID+`"`) || !strings.Contains(events[0], `built all`) {
			t.Errorf("run-2 events = %q, want the promoted build's completion once", events)
		}
		if res.Status != agentloop.StatusDone || res.Response != "all built" {
			t.Errorf("run-2 = %s %q", res.Status, res.Response)
		}
	})
}
