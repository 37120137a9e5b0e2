package agent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// A user's stop of the turn does not cancel the work the model put in the
// background, nor a foreground call it found running (promoted, as a
// hang-up is); with CancelOnStop it cancels both.
func TestBackgroundSurvivesStop(t *testing.T) {
	t.Parallel()
	for _, cancelOnStop := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			m := newTestManager(t)
			p, err := NewPlugin(m, "alice", Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-1"}); err != nil {
				t.Fatal(err)
			}
			o := p.Owner()
			bgBuild, fgBuild := newScriptedBuild(), newScriptedBuild()
			opt := BackgroundOptions{Wait: time.Hour, CancelOnStop: cancelOnStop}
			turn, stop := context.WithCancelCause(bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1", CallID: "call-1"}))
			var started startedNotice
			callTool(t, turn, mustBackground(t, o, bgBuild.tool(), opt), `{"target":"app","run_in_background":true}`, &started)
			fg := mustBackground(t, o, fgBuild.tool(), opt)
			fgErr := make(chan error)
			go func() {
				_, err := fg.Call(turn, json.RawMessage(`{"target":"lib","run_in_background":false}`))
				fgErr <- err
			}()
			fgBuild.print("compiling\n")
			stop(bgtask.ErrRunStopped) // the user's stop button
			if err := <-fgErr; !errors.Is(err, bgtask.ErrRunStopped) {
				t.Fatalf("the foreground call: %v", err)
			}
			if err := p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1", Canceled: true}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			want := bgtype.StatusRunning
			if cancelOnStop {
				want = bgtype.StatusCanceled
			}
			var fgID string
			for _, meta := range listTasks(t, o) {
				if meta.Description == `build {"target":"lib"}` {
					fgID = meta.ID
				}
				if meta.Status != want {
					t.Errorf("cancelOnStop %v: %s is %s, want %s", cancelOnStop, meta.Description, meta.Status, want)
				}
			}
			if !cancelOnStop {
				bgBuild.print("still going\n")
				if got, err := o.ReadOutput(t.Context(), fgID, 0, 100); err != nil || got.Text != "compiling\n" {
					t.Errorf("the promoted call's output: %+v, %v", got, err)
				}
				close(bgBuild.steps)
				close(fgBuild.steps)
			}
			if err := p.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			shutdownManager(t, m)
		})
	}
}

// A sub-agent's background work stays its child: cancelling the sub-agent
// cancels it; and when the sub-agent ends first, the work's end reaches
// the sub-agent's owner, once. While the sub-agent waits for its work
// (parked), it is shown running, never completed.
func TestBackgroundInSubAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		build := newScriptedBuild()
		childID := make(chan string)
		park := make(chan struct{})
		sub, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			own, err := tk.Agent()
			if err != nil {
				return nil, err
			}
			bt, err := Background(own, build.tool(), BackgroundOptions{})
			if err != nil {
				return nil, err
			}
			res, err := bt.Call(bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "sub-run", CallID: "c1"}), json.RawMessage(`{"target":"x","run_in_background":true}`))
			if err != nil {
				return nil, err
			}
			var n startedNotice
			if err := json.Unmarshal(res, &n); err != nil {
				return nil, err
			}
			childID <- n.TaskID
			<-park // parked: its work goes on
			return "handed over", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		child := <-childID
		synctest.Wait()
		if meta := getTask(t, o, sub); meta.Status != bgtype.StatusRunning {
			t.Fatalf("the parked sub-agent is %s", meta.Status)
		}
		if meta, err := m.Get(t.Context(), child); err != nil || meta.Owner != sub || meta.Parent.TaskID != sub || meta.Detached {
			t.Fatalf("the sub-agent's background task: %+v, %v", meta, err)
		}
		close(park)
		if _, err := o.Wait(t.Context(), sub); err != nil {
			t.Fatal(err)
		}
		build.print("done\n")
		close(build.steps)
		synctest.Wait()
		var ends []string
		for _, ev := range ib.Drain() {
			if ev.Kind.IsTerminal() {
				ends = append(ends, ev.TaskID)
			}
		}
		if len(ends) != 2 || ends[0] != sub || ends[1] != child {
			t.Fatalf("ends heard by the owner: %v, want the sub-agent's then its work's, once each (%s, %s)", ends, sub, child)
		}
		shutdownManager(t, m)
	})
}

// Cancelling a sub-agent cancels the work it put in the background.
func TestBackgroundSubAgentCancelled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		build := newScriptedBuild()
		childID := make(chan string)
		sub, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			own, _ := tk.Agent()
			bt, _ := Background(own, build.tool(), BackgroundOptions{Mode: AlwaysBackground})
			res, err := bt.Call(ctx, json.RawMessage(`{"target":"x"}`))
			if err != nil {
				return nil, err
			}
			var n startedNotice
			json.Unmarshal(res, &n)
			childID <- n.TaskID
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		child := <-childID
		if _, err := o.CancelTree(t.Context(), sub); err != nil {
			t.Fatal(err)
		}
		if meta, err := m.Wait(t.Context(), child); meta.Status != bgtype.StatusCanceled {
			t.Fatalf("the sub-agent's work: %+v, %v", meta, err)
		}
		shutdownManager(t, m)
	})
}
