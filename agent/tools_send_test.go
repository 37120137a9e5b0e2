package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

func sendVia(t testing.TB, ctx context.Context, tool Tool, to map[string]string, msg, replyTo string) sendReceipt {
	t.Helper()
	args := map[string]any{"to": to, "message": msg}
	if replyTo != "" {
		args["in_reply_to"] = replyTo
	}
	var r sendReceipt
	callTool(t, ctx, tool, toJSON(args), &r)
	return r
}

func childTarget(name string) map[string]string {
	return map[string]string{"relation": "child", "name": name}
}

var parentRel = map[string]string{"relation": "parent"}

// TestSendMessageToChild is awaken #111: the child route delivers to the
// sub-agent's inbox, from the calling agent, and get_task shows it.
func TestSendMessageToChild(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	for _, by := range []string{"name", "id"} {
		t.Run(by, func(t *testing.T) {
			id, got, _ := spawnReceiver(t, o, 1, bgtask.WithName("researcher-"+by))
			target := "researcher-" + by
			if by == "id" {
				target = id
			}
			ctx := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1", AgentID: "parent"})
			r := sendVia(t, ctx, toolNamed(t, o, "send_message"), childTarget(target), "hi", "")
			if r.Status != "delivered" || !strings.HasPrefix(r.MessageID, "msg_") || r.Error != "" {
				t.Fatalf("send_message = %+v", r)
			}
			evs := <-got
			msg, ok := evs[0].Message()
			if !ok || msg != (bgtype.Message{From: "parent", Content: "hi"}) || evs[0].TaskID != id {
				t.Fatalf("sub-agent got %+v", evs)
			}
			waitTask(t, o, id)
			var g getResult
			callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &g)
			if len(g.Messages) != 1 || g.Messages[0].ID != r.MessageID || g.Messages[0].Direction != bgtask.MessageIn ||
				g.Messages[0].From != "parent" || g.Messages[0].Content != "hi" || g.Messages[0].At.IsZero() {
				t.Fatalf("messages %+v", g.Messages)
			}
		})
	}
}

// TestSendMessageNotFound is awaken #112 and more: another owner's
// sub-agent, an unknown one and an ended one are not found, and nothing is
// delivered.
func TestSendMessageNotFound(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, _, tk := spawnReceiver(t, o, 1, bgtask.WithName("researcher"))
	ended, err := o.SpawnAgent(t.Context(), func(context.Context, *bgtask.Task) (any, error) { return nil, nil }, bgtask.WithName("gone"))
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, o, ended)
	cases := []struct {
		owner, target string
	}{
		{"thread-WRONG", "researcher"},
		{"thread-WRONG", id},
		{"thread-1", "nobody"},
		{"thread-1", "task_00000000000000000000000000000000"},
		{"thread-1", "gone"},
		{"thread-1", ended},
	}
	for _, tc := range cases {
		r := sendVia(t, t.Context(), toolNamed(t, m.Owner(tc.owner), "send_message"), childTarget(tc.target), "hi", "")
		if r != (sendReceipt{Status: "failed", Error: "recipient_not_found"}) {
			t.Errorf("%s → %s: %+v", tc.owner, tc.target, r)
		}
	}
	if n := tk.Inbox().Len(); n != 0 {
		t.Fatalf("%d events delivered", n)
	}
	if msgs, _ := o.Messages(t.Context(), id); len(msgs) != 0 {
		t.Fatalf("history %+v", msgs)
	}
	if _, err := m.Owner("thread-WRONG").Messages(t.Context(), id); !errors.Is(err, bgtask.ErrNotFound) {
		t.Fatalf("another owner's Messages: %v", err)
	}
}

// TestSendMessagePlainTask: a plain task has no inbox; only an answer to
// its input request reaches it.
func TestSendMessagePlainTask(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	_, p := spawnProbe(t, t.Context(), o, bgtask.WithName("plain"))
	tool := toolNamed(t, o, "send_message")
	if r := sendVia(t, t.Context(), tool, childTarget("plain"), "hi", ""); r != (sendReceipt{Status: "failed", Error: "recipient_unavailable"}) {
		t.Fatalf("message to a plain task: %+v", r)
	}
	if r := sendVia(t, t.Context(), tool, childTarget("plain"), "yes", "input_nope"); r != (sendReceipt{Status: "failed", Error: "no_input_request"}) {
		t.Fatalf("answer without a request: %+v", r)
	}
	if err := p.ctxErr(t); err != nil {
		t.Fatal(err)
	}
}

// TestSendMessageToParent: from inside a task, "parent" is its owner;
// without a current task it is unavailable (awaken #116).
func TestSendMessageToParent(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	// No task in ctx, only a run.
	if r := sendVia(t, runCtx(t.Context(), "run-1"), toolNamed(t, o, "send_message"), parentRel, "hello?", ""); r != (sendReceipt{Status: "failed", Error: "recipient_unavailable"}) {
		t.Fatalf("parent without a task: %+v", r)
	}
	// A silent sub-agent still reaches its owner with a message.
	release := make(chan struct{})
	receipt := make(chan string, 1)
	id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		ag, err := tk.Agent()
		if err != nil {
			return nil, err
		}
		res, err := Tools(ag)[3].Call(ctx, json.RawMessage(`{"to":{"relation":"parent"},"message":"analysis complete"}`))
		receipt <- fmt.Sprint(string(res), err)
		<-release
		return nil, nil
	}, bgtask.WithWake(bgtype.WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	var r sendReceipt
	if res := <-receipt; json.Unmarshal([]byte(strings.TrimSuffix(res, "<nil>")), &r) != nil {
		t.Fatalf("send to parent: %s", res)
	}
	if r.Status != "delivered" || !strings.HasPrefix(r.MessageID, "msg_") {
		t.Fatalf("send to parent: %+v", r)
	}
	evs := ib.Drain()
	if len(evs) != 1 || evs[0].TaskID != id {
		t.Fatalf("owner's inbox %+v", evs)
	}
	if msg, ok := evs[0].Message(); !ok || msg != (bgtype.Message{From: id, Content: "analysis complete"}) {
		t.Fatalf("message %+v", evs[0])
	}
	msgs, err := o.Messages(t.Context(), id)
	if err != nil || len(msgs) != 1 || msgs[0].ID != r.MessageID || msgs[0].Direction != bgtask.MessageOut || msgs[0].From != id || msgs[0].Content != "analysis complete" {
		t.Fatalf("history %+v, %v", msgs, err)
	}
	close(release)
	waitTask(t, o, id)
	if evs := ib.Drain(); len(evs) != 0 {
		t.Fatalf("a silent task delivered %+v", evs)
	}
}

// TestSendMessageAnswersInputRequest: send_message with in_reply_to
// answers the task's input request and the task runs again.
func TestSendMessageAnswersInputRequest(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	answered := make(chan bgtype.Message, 1)
	release := make(chan struct{})
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		msg, err := tk.RequestInput(ctx, "Deploy to production?")
		if err != nil {
			return nil, err
		}
		answered <- msg
		<-release
		return msg.Content, nil
	}, bgtask.WithName("deployer"))
	if err != nil {
		t.Fatal(err)
	}
	var w waitResult
	callTool(t, t.Context(), toolNamed(t, o, "wait_task"), `{"task_id":"`+id+`"}`, &w)
	if w.TimedOut || w.Task.Status != bgtype.StatusAwaitingInput || w.Task.InputRequest == nil || w.Task.InputRequest.Prompt != "Deploy to production?" {
		t.Fatalf("wait_task = %+v", w)
	}
	req := w.Task.InputRequest.ID
	tool := toolNamed(t, o, "send_message")
	if r := sendVia(t, t.Context(), tool, childTarget("deployer"), "yes", "input_wrong"); r != (sendReceipt{Status: "failed", Error: "no_input_request"}) {
		t.Fatalf("wrong in_reply_to: %+v", r)
	}
	ctx := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{AgentID: "ops"})
	r := sendVia(t, ctx, tool, childTarget("deployer"), "yes", req)
	if r.Status != "delivered" {
		t.Fatalf("answer: %+v", r)
	}
	if msg := <-answered; msg != (bgtype.Message{From: "ops", Content: "yes", InReplyTo: req}) {
		t.Fatalf("task got %+v", msg)
	}
	if got := getTask(t, o, id); got.Status != bgtype.StatusRunning || got.Input != nil {
		t.Fatalf("after the answer: %s %+v", got.Status, got.Input)
	}
	if r := sendVia(t, ctx, tool, childTarget("deployer"), "yes again", req); r != (sendReceipt{Status: "failed", Error: "no_input_request"}) {
		t.Fatalf("second answer: %+v", r)
	}
	close(release)
	waitTask(t, o, id)
	var g getResult
	callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &g)
	if len(g.Messages) != 1 || g.Messages[0].ID != r.MessageID || g.Messages[0].InReplyTo != req || g.Task.InputRequest != nil || !jsonEqual(g.Task.Result, `"yes"`) {
		t.Fatalf("get_task %+v", g)
	}
}

// TestSendMessageConcurrentSubAgents: two sub-agents messaged at once each
// get their own messages, in order.
func TestSendMessageConcurrentSubAgents(t *testing.T) {
	const n = 50
	m := newTestManager(t)
	o := m.Owner("thread-1")
	tool := toolNamed(t, o, "send_message")
	names := []string{"alpha", "beta"}
	gots := make([]<-chan []bgtype.Event, len(names))
	ids := make([]string, len(names))
	for i, name := range names {
		ids[i], gots[i], _ = spawnReceiver(t, o, n, bgtask.WithName(name))
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			for i := range n {
				args := toJSON(map[string]any{"to": childTarget(name), "message": fmt.Sprintf("%s %d", name, i)})
				if res, err := tool.Call(t.Context(), json.RawMessage(args)); err != nil || !strings.Contains(string(res), `"status":"delivered"`) {
					t.Errorf("%s %d: %s, %v", name, i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for k, name := range names {
		evs := <-gots[k]
		if len(evs) != n {
			t.Fatalf("%s got %d events", name, len(evs))
		}
		for i, ev := range evs {
			if msg, ok := ev.Message(); !ok || msg.Content != fmt.Sprintf("%s %d", name, i) || ev.TaskID != ids[k] {
				t.Fatalf("%s event %d: %+v", name, i, ev)
			}
		}
		waitTask(t, o, ids[k])
		msgs, err := o.Messages(t.Context(), ids[k])
		if err != nil || len(msgs) != messagesPerTask || msgs[0].Content != fmt.Sprintf("%s %d", name, n-messagesPerTask) || msgs[messagesPerTask-1].Content != fmt.Sprintf("%s %d", name, n-1) {
			t.Fatalf("%s history: %d messages, %v", name, len(msgs), err)
		}
	}
}

func TestSendMessageAfterShutdown(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	shutdownManager(t, m)
	err := callToolErr(t, t.Context(), toolNamed(t, o, "send_message"), `{"to":{"relation":"child","name":"x"},"message":"hi"}`)
	if !errors.Is(err, bgtask.ErrClosed) {
		t.Fatalf("send_message after Shutdown: %v", err)
	}
}

// TestSendMessageToEndedParent: a task whose owner is a sub-agent that has
// ended cannot reach it.
func TestSendMessageToEndedParent(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	gate := make(chan struct{})
	res := make(chan string, 1)
	childID := make(chan string, 1)
	agent, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		ag, err := tk.Agent()
		if err != nil {
			return nil, err
		}
		id, err := ag.Spawn(ctx, func(ctx context.Context, c *bgtask.Task) (any, error) {
			<-gate
			out, err := Tools(m.Owner(c.Owner()))[3].Call(ctx, json.RawMessage(`{"to":{"relation":"parent"},"message":"late"}`))
			res <- fmt.Sprint(string(out), err)
			return nil, nil
		})
		childID <- id
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	id := <-childID
	waitTask(t, o, agent)
	close(gate)
	if got := <-res; got != `{"status":"failed","error":"recipient_unavailable"}<nil>` {
		t.Fatalf("send to an ended parent: %s", got)
	}
	waitTask(t, m.Owner(agent), id)
	if msgs, _ := m.Owner(agent).Messages(t.Context(), id); len(msgs) != 0 {
		t.Fatalf("history %+v", msgs)
	}
}
