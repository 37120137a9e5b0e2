package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// waitAfter calls wait_task on id with args and returns its result and
// how long it took on the bubble's clock.
func waitAfter(t *testing.T, ctx context.Context, tool Tool, args string) (waitResult, time.Duration) {
	t.Helper()
	start := time.Now()
	var w waitResult
	callTool(t, ctx, tool, args, &w)
	return w, time.Since(start)
}

func TestWaitTaskTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ToolOption
		args string
		want time.Duration
	}{
		{"given", nil, `{"task_id":"%s","timeout_seconds":5}`, 5 * time.Second},
		{"float", nil, `{"task_id":"%s","timeout_seconds":5.0}`, 5 * time.Second},
		{"default", nil, `{"task_id":"%s"}`, 30 * time.Second},
		{"maximum", nil, `{"task_id":"%s","timeout_seconds":300}`, 300 * time.Second},
		{"limited default", []ToolOption{WithWaitLimit(10 * time.Second)}, `{"task_id":"%s"}`, 10 * time.Second},
		{"limited maximum", []ToolOption{WithWaitLimit(10 * time.Second)}, `{"task_id":"%s","timeout_seconds":10}`, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				o := m.Owner("thread-1")
				id, _ := spawnProbe(t, t.Context(), o)
				w, took := waitAfter(t, t.Context(), toolNamed(t, o, "wait_task", tc.opts...), fmt.Sprintf(tc.args, id))
				secs := int(tc.want / time.Second)
				if took != tc.want || !w.TimedOut || w.Task.TaskID != id || w.Task.Status != bgtype.StatusRunning ||
					w.Message != fmt.Sprintf("task %s still running after %ds", id, secs) {
					t.Fatalf("wait_task after %v: %+v", took, w)
				}
			})
		})
	}
}

func TestWaitTaskReturnsWhenSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		release := make(chan struct{})
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			<-time.After(2 * time.Second) // the bubble's fake time
			msg, err := tk.RequestInput(ctx, "which region?")
			if err != nil {
				return nil, err
			}
			<-release
			<-time.After(3 * time.Second) // the bubble's fake time
			return msg.Content, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tool := toolNamed(t, o, "wait_task")
		args := `{"task_id":"` + id + `","timeout_seconds":60}`
		w, took := waitAfter(t, t.Context(), tool, args)
		if took != 2*time.Second || w.TimedOut || w.Message != "" || w.Task.Status != bgtype.StatusAwaitingInput ||
			w.Task.InputRequest == nil || w.Task.InputRequest.Prompt != "which region?" {
			t.Fatalf("wait_task after %v: %+v", took, w)
		}
		// Still awaiting: returns at once.
		if w2, took := waitAfter(t, t.Context(), tool, args); took != 0 || w2.Task.Status != bgtype.StatusAwaitingInput || w2.Task.InputRequest.ID != w.Task.InputRequest.ID {
			t.Fatalf("second wait_task after %v: %+v", took, w2)
		}
		if _, err := o.Send(t.Context(), id, bgtype.Message{Content: "eu-west", InReplyTo: w.Task.InputRequest.ID}); err != nil {
			t.Fatal(err)
		}
		close(release)
		w, took = waitAfter(t, t.Context(), tool, args)
		if took != 3*time.Second || w.TimedOut || w.Task.Status != bgtype.StatusCompleted || !jsonEqual(w.Task.Result, `"eu-west"`) || w.Task.InputRequest != nil {
			t.Fatalf("wait_task after %v: %+v", took, w)
		}
		// Terminal: returns at once, after the task is gone too.
		if w, took := waitAfter(t, t.Context(), tool, args); took != 0 || w.Task.Status != bgtype.StatusCompleted || w.TimedOut {
			t.Fatalf("wait_task on a completed task after %v: %+v", took, w)
		}
	})
}

// TestWaitTaskAnsweredUnseen: a request answered before the waiter saw it
// does not end the wait.
func TestWaitTaskAnsweredUnseen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			<-time.After(time.Second) // the bubble's fake time
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if _, err := tk.RequestInput(rctx, "anyone?"); !errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
			<-time.After(10 * time.Second) // the bubble's fake time
			return "alone", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The request is open from 1 s to 2 s; the wait starts after that.
		<-time.After(2500 * time.Millisecond) // the bubble's fake time
		if got := getTask(t, o, id); got.Status != bgtype.StatusRunning {
			t.Fatalf("status %s", got.Status)
		}
		w, took := waitAfter(t, t.Context(), toolNamed(t, o, "wait_task"), `{"task_id":"`+id+`"}`)
		if w.TimedOut || w.Task.Status != bgtype.StatusCompleted || took != 9500*time.Millisecond {
			t.Fatalf("wait_task after %v: %+v", took, w)
		}
	})
}

func TestWaitTaskErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		theirs, _ := spawnProbe(t, t.Context(), m.Owner("thread-2"))
		tool := toolNamed(t, o, "wait_task")
		for _, id := range []string{"task_nope", theirs} {
			err := callToolErr(t, t.Context(), tool, `{"task_id":"`+id+`"}`)
			if err.Error() != "task not found: "+id || !errors.Is(err, bgtask.ErrNotFound) {
				t.Errorf("wait_task(%s): %v", id, err)
			}
		}
		// The call's ctx ends first: its error, not a timeout.
		mine, _ := spawnProbe(t, t.Context(), o)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := callToolErr(t, ctx, tool, `{"task_id":"`+mine+`","timeout_seconds":10}`)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("wait_task with a short ctx: %v after %v", err, time.Since(start))
		}
	})
}

// TestWaitTaskNotLive: a non-terminal record that this process does not run
// is returned at once.
func TestWaitTaskNotLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		rec := bgtype.TaskMeta{ID: testTaskID(time.Now(), 1), Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: time.Now().UTC(), Instance: "inst_gone"}
		if err := st.Commit(t.Context(), "thread-1", store.UpsertAction(rec)); err != nil {
			t.Fatal(err)
		}
		m := newTestManager(t, bgtask.WithStore(st))
		for _, args := range []string{`{"task_id":"` + rec.ID + `"}`, `{"task_id":"` + rec.ID + `","output_since":0}`} {
			w, took := waitAfter(t, t.Context(), toolNamed(t, m.Owner("thread-1"), "wait_task"), args)
			if took != 0 || w.TimedOut || w.Task.Status != bgtype.StatusRunning ||
				w.Message != "task "+rec.ID+" is running but not run by this process: wait_task cannot wait for it" {
				t.Fatalf("wait_task(%s) after %v: %+v", args, took, w)
			}
		}
	})
}

// TestWaitTaskDeliversTheEndOnce: the end wait_task returns is not
// delivered again, through a Plugin: the next BeforeInference does not
// show it, and the record is marked announced in a durable st, so the
// next process does not announce it either. It holds whether the task
// ended before the call or during it, and whatever its end: a failed or
// cancelled task's record is the tool's result, as a completed one's is,
// not a tool error.
func TestWaitTaskDeliversTheEndOnce(t *testing.T) {
	for _, end := range []struct {
		name   string
		status bgtype.Status
		result string // the completed task's result
		error  string // the failed or cancelled task's error
	}{
		{"completed", bgtype.StatusCompleted, `"done"`, ""},
		{"failed", bgtype.StatusFailed, "", "disk full"},
		{"cancelled", bgtype.StatusCanceled, "", "bgtask: task cancelled"},
	} {
		for _, during := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s during the call %v", end.name, during), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ds := &durableMem{Store: memstore.New()}
					pr := newPluginRun(t, bgtask.WithStore(ds))
					ctx := runCtx(t.Context(), "run-1")
					release := make(chan struct{})
					other, err := pr.o.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "other", nil })
					if err != nil {
						t.Fatal(err)
					}
					id, err := pr.o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
						switch end.status {
						case bgtype.StatusFailed:
							<-release
							return nil, errors.New(end.error)
						case bgtype.StatusCanceled:
							<-ctx.Done()
							return nil, ctx.Err()
						}
						<-release
						return "done", nil
					}, bgtask.WithName("slow"))
					if err != nil {
						t.Fatal(err)
					}
					finish := func() {
						if end.status == bgtype.StatusCanceled {
							if _, err := pr.o.Cancel(t.Context(), id); err != nil {
								t.Fatal(err)
							}
							return
						}
						close(release)
					}
					waitTask(t, pr.o, other)
					if !during {
						finish()
						waitTask(t, pr.o, id)
					}
					tool := toolNamed(t, pr.o, "wait_task")
					args := `{"task_id":"` + id + `","timeout_seconds":60}`
					called := make(chan error, 1)
					var res json.RawMessage
					go func() {
						var err error
						res, err = tool.Call(ctx, json.RawMessage(args))
						called <- err
					}()
					if during {
						synctest.Wait() // the call waits
						finish()
					}
					if err := <-called; err != nil {
						t.Fatalf("wait_task: %v, want the task's record", err)
					}
					var w waitResult
					if err := json.Unmarshal(res, &w); err != nil {
						t.Fatalf("wait_task = %s: %v", res, err)
					}
					if w.TimedOut || w.Message != "" || w.Task.TaskID != id || w.Task.Status != end.status ||
						string(w.Task.Result) != end.result || w.Task.Error != end.error {
						t.Fatalf("wait_task = %+v", w)
					}
					msgs, err := pr.p.BeforeInference(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if got := eventIDs(msgs); len(got) != 1 || got[0] != other {
						t.Fatalf("the next step delivered the ends of %q, want only %s (not %s again)", got, other, id)
					}
					// The model call after this step reads the call's result: the
					// run's end, with the model's answer, proves it (decision 804).
					if m, _ := ds.Get(t.Context(), id); m.Announced {
						t.Fatal("the end wait_task returned is marked announced before a model call read it")
					}
					if err := pr.p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1"}); err != nil {
						t.Fatal(err)
					}
					if m, _ := ds.Get(t.Context(), id); !m.Announced {
						t.Fatal("the end wait_task returned is not marked announced once the run ended with the model's answer")
					}
					// The next process does not announce it again (nor the other
					// end, heard once the run ended with the model's answer).
					shutdownManager(t, pr.m)
					next := newPluginRun(t, bgtask.WithStore(ds))
					if msgs, err := next.p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
						t.Fatalf("after a restart: %v, %v; want nothing", messageKinds(msgs), err)
					}
				})
			})
		}
	}
}
