package bgopenai_test

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// chatMessage decodes the assistant message of a reply making calls.
func chatMessage(t *testing.T, calls ...scriptedCall) openai.ChatCompletionMessage {
	t.Helper()
	var resp openai.ChatCompletion
	if err := json.Unmarshal([]byte(chatReply(calls, "")), &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message
}

// responseOf decodes a Responses reply making calls.
func responseOf(t *testing.T, calls ...scriptedCall) *responses.Response {
	t.Helper()
	var resp responses.Response
	if err := json.Unmarshal([]byte(responsesReply("resp_1", calls, "")), &resp); err != nil {
		t.Fatal(err)
	}
	return &resp
}

// chatAnswers returns each answer's call id and text.
func chatAnswers(answers []openai.ChatCompletionMessageParamUnion) (ids, texts []string) {
	for _, a := range answers {
		ids = append(ids, a.OfTool.ToolCallID)
		texts = append(texts, a.OfTool.Content.OfString.Value)
	}
	return ids, texts
}

// Each call runs with its own lineage: a task it spawns records the call's
// id, and the run (and agent) the host gave as an option or on ctx.
func TestAnswerLineage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ctxCall   *bgtask.ToolCall // on the Answer method's ctx
		newOpts   []bgopenai.Option
		callOpts  []bgopenai.Option
		responses bool
		want      bgtype.Parent // CallID aside
	}{
		{name: "ctx", ctxCall: &bgtask.ToolCall{RunID: "run-1", AgentID: "lead"}, want: bgtype.Parent{RunID: "run-1", AgentID: "lead"}},
		{name: "toolset option", newOpts: []bgopenai.Option{bgopenai.WithRunID("run-2")}, want: bgtype.Parent{RunID: "run-2"}},
		{name: "call option over ctx", ctxCall: &bgtask.ToolCall{RunID: "run-1", AgentID: "lead"},
			callOpts: []bgopenai.Option{bgopenai.WithRunID("run-3"), bgopenai.WithAgentID("helper")}, want: bgtype.Parent{RunID: "run-3", AgentID: "helper"}},
		{name: "call option over toolset option", newOpts: []bgopenai.Option{bgopenai.WithRunID("run-2")},
			callOpts: []bgopenai.Option{bgopenai.WithRunID("run-3")}, want: bgtype.Parent{RunID: "run-3"}},
		{name: "responses", callOpts: []bgopenai.Option{bgopenai.WithRunID("run-4")}, responses: true, want: bgtype.Parent{RunID: "run-4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := adaptertest.NewFixture(t)
			ts, err := bgopenai.New([]agent.Tool{adaptertest.StartJob(f.Owner, nil)}, append(tc.newOpts, bgopenai.WithParallel(2))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.ctxCall != nil {
				ctx = bgtask.WithToolCall(ctx, *tc.ctxCall)
			}
			calls := []scriptedCall{{"call_a", "start_job", `{"name":"one"}`}, {"call_b", "start_job", `{"name":"two"}`}}
			var texts []string
			if tc.responses {
				items, err := ts.AnswerResponse(ctx, responseOf(t, calls...), tc.callOpts...)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					texts = append(texts, it.OfFunctionCallOutput.Output.OfString.Value)
				}
			} else {
				answers, err := ts.AnswerChat(ctx, chatMessage(t, calls...), tc.callOpts...)
				if err != nil {
					t.Fatal(err)
				}
				_, texts = chatAnswers(answers)
			}
			if len(texts) != len(calls) {
				t.Fatalf("%d answers, want %d", len(texts), len(calls))
			}
			for i, text := range texts {
				var id string
				if err := json.Unmarshal([]byte(text), &id); err != nil {
					t.Fatalf("answer %d: %s", i, text)
				}
				meta, err := f.Owner.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				want.CallID = calls[i].id
				if meta.Parent != want {
					t.Errorf("task of %s: Parent %+v, want %+v", calls[i].id, meta.Parent, want)
				}
			}
		})
	}
}

// Every call of a reply gets an answer, in the reply's order: an error
// the model caused (a name taken, an error the tool marks with
// ModelError) is answered with its text and is no error of the host's; a
// host's error is answered with a fixed text, the calls after it are not
// run and say so, and the error is returned.
func TestAnswerErrors(t *testing.T) {
	t.Parallel()
	const dup = `bgtask: a non-terminal task with this name already exists: "a"`
	for _, tc := range []struct {
		name    string
		names   [3]string
		fail    func(name string) error
		want    [3]string // "" for a task id
		wantErr string
		started int
		any     bool // the outcome does not depend on the calls' order: run them in parallel too
	}{
		{name: "duplicate name third", names: [3]string{"a", "b", "a"}, want: [3]string{"", "", dup}, started: 2},
		{name: "marked model error third", names: [3]string{"a", "b", "nowhere"},
			fail: func(n string) error {
				if n == "nowhere" {
					return fmt.Errorf("start_job: %w", bgopenai.ModelError(errors.New("no such place: nowhere")))
				}
				return nil
			},
			want: [3]string{"", "", "start_job: no such place: nowhere"}, started: 2, any: true},
		{name: "limit third", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "c" {
					return fmt.Errorf("start_job: %w", bgtask.ErrLimit)
				}
				return nil
			},
			want: [3]string{"", "", "start_job: bgtask: concurrency limit reached"}, started: 2, any: true},
		{name: "host error third", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "c" {
					return errors.New("database down")
				}
				return nil
			},
			want:    [3]string{"", "", "tool call failed: the host could not run it"},
			wantErr: "bgopenai: start_job (call call_3): database down", started: 2, any: true},
		{name: "host error second", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "b" {
					return fmt.Errorf("store: %w", bgtask.ErrClosed)
				}
				return nil
			},
			want:    [3]string{"", "tool call failed: the host could not run it", "tool call not run: another call of this step failed"},
			wantErr: "bgopenai: start_job (call call_2): store: bgtask: manager closed", started: 1},
	} {
		for _, parallel := range []int{1, 3} {
			if parallel > 1 && !tc.any {
				continue
			}
			t.Run(fmt.Sprintf("%s/parallel %d", tc.name, parallel), func(t *testing.T) {
				t.Parallel()
				f := adaptertest.NewFixture(t)
				ts, err := bgopenai.New([]agent.Tool{adaptertest.StartJob(f.Owner, tc.fail)}, bgopenai.WithParallel(parallel))
				if err != nil {
					t.Fatal(err)
				}
				msg := chatMessage(t, scriptedCall{"call_1", "start_job", `{"name":"` + tc.names[0] + `"}`},
					scriptedCall{"call_2", "start_job", `{"name":"` + tc.names[1] + `"}`},
					scriptedCall{"call_3", "start_job", `{"name":"` + tc.names[2] + `"}`})
				answers, err := ts.AnswerChat(f.CallCtx, msg)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				ids, texts := chatAnswers(answers)
				if strings.Join(ids, " ") != "call_1 call_2 call_3" {
					t.Fatalf("answers to %q, want call_1 call_2 call_3", ids)
				}
				started := 0
				for i, text := range texts {
					if tc.want[i] == "" {
						if !strings.HasPrefix(text, `"task_`) {
							t.Errorf("answer %d: %q, want a task id", i, text)
						}
						started++
					} else if text != tc.want[i] {
						t.Errorf("answer %d: %q, want %q", i, text, tc.want[i])
					}
				}
				live := 0
				for _, err := range f.Owner.List(t.Context(), bgtype.StatusRunning) {
					if err != nil {
						t.Fatal(err)
					}
					live++
				}
				if live != tc.started+1 { // the fixture's crawler too
					t.Errorf("%d tasks running, want %d", live, tc.started+1)
				}
			})
		}
	}
}

// With WithParallel(n), n tool calls that each promote a slow function to
// the background after d (bgtask.Owner.Foreground) take d, not n*d; the
// answers keep the calls' order.
func TestAnswerParallelForeground(t *testing.T) {
	t.Parallel()
	const d = 5 * time.Second
	for _, tc := range []struct {
		parallel int
		took     time.Duration
	}{{1, 3 * d}, {2, 2 * d}, {3, d}, {8, d}} {
		t.Run(fmt.Sprintf("parallel %d", tc.parallel), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m, err := bgtask.New()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := m.Shutdown(context.Background()); err != nil {
						t.Error(err)
					}
				})
				owner := m.Owner("thread-1")
				var inFlight, most atomic.Int32
				research := agent.Tool{
					Name:        "research",
					Description: "Research a topic.",
					Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["topic"],"properties":{"topic":{"type":"string"}}}`),
					Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
						n := inFlight.Add(1)
						defer inFlight.Add(-1)
						for cur := most.Load(); n > cur && !most.CompareAndSwap(cur, n); cur = most.Load() {
						}
						res, err := owner.Foreground(ctx, d, func(ctx context.Context, _ *bgtask.Task) (any, error) {
							<-ctx.Done() // slow: runs until the Manager shuts down
							return nil, context.Cause(ctx)
						})
						return res.Result, err
					},
				}
				ts, err := bgopenai.New([]agent.Tool{research}, bgopenai.WithParallel(tc.parallel))
				if err != nil {
					t.Fatal(err)
				}
				var resp openai.ChatCompletion
				calls := []scriptedCall{{"call_1", "research", `{"topic":"a"}`}, {"call_2", "research", `{"topic":"b"}`}, {"call_3", "research", `{"topic":"c"}`}}
				if err := json.Unmarshal([]byte(chatReply(calls, "")), &resp); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				answers, err := ts.AnswerChat(bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1"}), resp.Choices[0].Message)
				if took := time.Since(start); err != nil || took != tc.took {
					t.Fatalf("AnswerChat took %v (%v), want %v", took, err, tc.took)
				}
				if want := int32(min(tc.parallel, len(calls))); most.Load() != want {
					t.Errorf("%d calls at once, want %d", most.Load(), want)
				}
				ids, texts := chatAnswers(answers)
				if strings.Join(ids, " ") != "call_1 call_2 call_3" {
					t.Fatalf("answers to %q", ids)
				}
				for i, text := range texts {
					var notice struct {
						Status string
						TaskID string `json:"task_id"`
					}
					if err := json.Unmarshal([]byte(text), &notice); err != nil || notice.Status != "promoted" {
						t.Fatalf("answer %d: %s, want a promotion notice", i, text)
					}
					meta, err := owner.Get(t.Context(), notice.TaskID)
					if err != nil || meta.Parent.CallID != calls[i].id || meta.Status != bgtype.StatusRunning {
						t.Errorf("answer %d: task of call %q (%s, %v), want call %s, running", i, meta.Parent.CallID, meta.Status, err, calls[i].id)
					}
				}
			})
		})
	}
}

// A bad option is refused, by New and by an Answer method, with an error
// that names it; the Answer method then runs no call.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	f := adaptertest.NewFixture(t)
	var ran atomic.Int32
	tool := adaptertest.StartJob(f.Owner, func(string) error { ran.Add(1); return nil })
	msg := chatMessage(t, scriptedCall{"call_1", "start_job", `{"name":"x"}`})
	for _, tc := range []struct {
		opt  bgopenai.Option
		want string
	}{
		{bgopenai.WithParallel(0), "bgopenai: WithParallel(0): at least one call at a time: bgtask: invalid argument"},
		{bgopenai.WithParallel(-3), "bgopenai: WithParallel(-3): at least one call at a time: bgtask: invalid argument"},
		{bgopenai.WithRunID(" "), "bgopenai: WithRunID: blank run id: bgtask: invalid argument"},
		{bgopenai.WithAgentID(""), "bgopenai: WithAgentID: blank agent id: bgtask: invalid argument"},
	} {
		if ts, err := bgopenai.New([]agent.Tool{tool}, tc.opt); ts != nil || err == nil || err.Error() != tc.want || !errors.Is(err, bgtask.ErrInvalidArgument) {
			t.Errorf("New: %v, %v; want %s", ts, err, tc.want)
		}
		ts, err := bgopenai.New([]agent.Tool{tool}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if answers, err := ts.AnswerChat(f.CallCtx, msg, tc.opt); answers != nil || err == nil || err.Error() != tc.want {
			t.Errorf("AnswerChat: %d answers, %v; want none, %s", len(answers), err, tc.want)
		}
		if items, err := ts.AnswerResponse(f.CallCtx, responseOf(t, scriptedCall{"call_1", "start_job", `{"name":"x"}`}), tc.opt); items != nil || err == nil || err.Error() != tc.want {
			t.Errorf("AnswerResponse: %d items, %v; want none, %s", len(items), err, tc.want)
		}
	}
	if ran.Load() != 0 {
		t.Errorf("%d calls ran, want none", ran.Load())
	}
}

// A panic in a parallel call reaches the caller of the Answer method, in
// its goroutine, once the other calls have returned, as a panic in a call
// one after the other does.
func TestAnswerPanic(t *testing.T) {
	t.Parallel()
	for _, parallel := range []int{1, 3} {
		t.Run(fmt.Sprintf("parallel %d", parallel), func(t *testing.T) {
			t.Parallel()
			started, release := make(chan struct{}, 2), make(chan struct{})
			var ended atomic.Int32
			tool := agent.Tool{
				Name:        "step",
				Description: "A step.",
				Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["n"],"properties":{"n":{"type":"integer"}}}`),
				Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
					defer ended.Add(1)
					if string(args) == `{"n":1}` {
						if parallel > 1 { // the others are running
							<-started
							<-started
						}
						close(release)
						panic("step 1 broke")
					}
					if parallel > 1 {
						started <- struct{}{}
						<-release // runs while the panic happens
					}
					return json.RawMessage(`"ok"`), nil
				},
			}
			ts, err := bgopenai.New([]agent.Tool{tool}, bgopenai.WithParallel(parallel))
			if err != nil {
				t.Fatal(err)
			}
			msg := chatMessage(t, scriptedCall{"call_0", "step", `{"n":0}`}, scriptedCall{"call_1", "step", `{"n":1}`}, scriptedCall{"call_2", "step", `{"n":2}`})
			defer func() {
				want := int32(3) // every call started: the panic is in the second, and ends the third's wait
				if parallel == 1 {
					want = 2 // the third never starts
				}
				if r := recover(); r != "step 1 broke" || ended.Load() != want {
					t.Errorf("recovered %v with %d calls ended, want the panic after %d", r, ended.Load(), want)
				}
			}()
			ts.AnswerChat(t.Context(), msg)
			t.Error("AnswerChat returned")
		})
	}
}
