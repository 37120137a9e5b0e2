package bganthropic_test

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

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/bgtask/bgtask"
	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// message decodes a reply making uses.
func message(t *testing.T, uses ...toolUse) *anthropic.Message {
	t.Helper()
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(messageReply(uses, "")), &msg); err != nil {
		t.Fatal(err)
	}
	return &msg
}

// results returns each tool_result's tool_use id, text and is_error.
func results(blocks []anthropic.ContentBlockParamUnion) (ids, texts []string, isError []bool) {
	for _, b := range blocks {
		r := b.OfToolResult
		ids, texts, isError = append(ids, r.ToolUseID), append(texts, r.Content[0].OfText.Text), append(isError, r.IsError.Value)
	}
	return ids, texts, isError
}

// Each call runs with its own lineage: a task it spawns records the
// tool_use id, and the run (and agent) the host gave as an option or on
// ctx.
func TestAnswerLineage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ctxCall  *bgtask.ToolCall
		newOpts  []bganthropic.Option
		callOpts []bganthropic.Option
		want     bgtype.Parent // CallID aside
	}{
		{name: "ctx", ctxCall: &bgtask.ToolCall{RunID: "run-1", AgentID: "lead"}, want: bgtype.Parent{RunID: "run-1", AgentID: "lead"}},
		{name: "toolset option", newOpts: []bganthropic.Option{bganthropic.WithRunID("run-2")}, want: bgtype.Parent{RunID: "run-2"}},
		{name: "call option over ctx", ctxCall: &bgtask.ToolCall{RunID: "run-1", AgentID: "lead"},
			callOpts: []bganthropic.Option{bganthropic.WithRunID("run-3"), bganthropic.WithAgentID("helper")}, want: bgtype.Parent{RunID: "run-3", AgentID: "helper"}},
		{name: "call option over toolset option", newOpts: []bganthropic.Option{bganthropic.WithRunID("run-2")},
			callOpts: []bganthropic.Option{bganthropic.WithRunID("run-3")}, want: bgtype.Parent{RunID: "run-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := adaptertest.NewFixture(t)
			ts, err := bganthropic.New([]agent.Tool{adaptertest.StartJob(f.Owner, nil)}, append(tc.newOpts, bganthropic.WithParallel(2))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.ctxCall != nil {
				ctx = bgtask.WithToolCall(ctx, *tc.ctxCall)
			}
			uses := []toolUse{{"toolu_a", "start_job", `{"name":"one"}`}, {"toolu_b", "start_job", `{"name":"two"}`}}
			blocks, err := ts.AnswerMessage(ctx, message(t, uses...), tc.callOpts...)
			if err != nil {
				t.Fatal(err)
			}
			_, texts, _ := results(blocks)
			if len(texts) != len(uses) {
				t.Fatalf("%d results, want %d", len(texts), len(uses))
			}
			for i, text := range texts {
				var id string
				if err := json.Unmarshal([]byte(text), &id); err != nil {
					t.Fatalf("result %d: %s", i, text)
				}
				meta, err := f.Owner.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				want.CallID = uses[i].id
				if meta.Parent != want {
					t.Errorf("task of %s: Parent %+v, want %+v", uses[i].id, meta.Parent, want)
				}
			}
		})
	}
}

// mistake is a host's error type that says it is the model's mistake.
type mistake string

func (e mistake) Error() string      { return string(e) }
func (e mistake) ModelMistake() bool { return true }

// Every tool_use block gets a tool_result, in the message's order: an
// error the model caused (a name taken, an error the tool marks with
// ModelError, or by a method ModelMistake) is answered with its text and is_error and
// is no error of the host's; a host's error is answered with a fixed text,
// the calls after it are not run and say so, and the error is returned.
func TestAnswerErrors(t *testing.T) {
	t.Parallel()
	const (
		failed = "tool call failed: the host could not run it"
		notRun = "tool call not run: another call of this step failed"
	)
	for _, tc := range []struct {
		name    string
		names   [3]string
		fail    func(name string) error
		want    [3]string // "" for a task id
		wantErr string
		any     bool // the outcome does not depend on the calls' order: run them in parallel too
	}{
		{name: "duplicate name third", names: [3]string{"a", "b", "a"},
			want: [3]string{"", "", `bgtask: a non-terminal task with this name already exists: "a"`}},
		{name: "invalid argument third", names: [3]string{"a", "b", "self"},
			want: [3]string{"", "", `bgtask: invalid argument: task name "self" is reserved`}},
		{name: "marked model error third", names: [3]string{"a", "b", "nowhere"},
			fail: func(n string) error {
				if n == "nowhere" {
					return fmt.Errorf("start_job: %w", bganthropic.ModelError(errors.New("no such place: nowhere")))
				}
				return nil
			},
			want: [3]string{"", "", "start_job: no such place: nowhere"}, any: true},
		{name: "own marker third", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "c" {
					return mistake("c is not a job")
				}
				return nil
			},
			want: [3]string{"", "", "c is not a job"}, any: true},
		{name: "host error third", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "c" {
					return errors.New("database down")
				}
				return nil
			},
			want: [3]string{"", "", failed}, wantErr: "bganthropic: start_job (tool_use toolu_3): database down", any: true},
		{name: "host error first", names: [3]string{"a", "b", "c"},
			fail: func(n string) error {
				if n == "a" {
					return fmt.Errorf("store: %w", context.DeadlineExceeded)
				}
				return nil
			},
			want: [3]string{failed, notRun, notRun}, wantErr: "bganthropic: start_job (tool_use toolu_1): store: context deadline exceeded"},
	} {
		for _, parallel := range []int{1, 3} {
			if parallel > 1 && !tc.any {
				continue
			}
			t.Run(fmt.Sprintf("%s/parallel %d", tc.name, parallel), func(t *testing.T) {
				t.Parallel()
				f := adaptertest.NewFixture(t)
				ts, err := bganthropic.New([]agent.Tool{adaptertest.StartJob(f.Owner, tc.fail)}, bganthropic.WithParallel(parallel))
				if err != nil {
					t.Fatal(err)
				}
				msg := message(t, toolUse{"toolu_1", "start_job", `{"name":"` + tc.names[0] + `"}`},
					toolUse{"toolu_2", "start_job", `{"name":"` + tc.names[1] + `"}`},
					toolUse{"toolu_3", "start_job", `{"name":"` + tc.names[2] + `"}`})
				blocks, err := ts.AnswerMessage(f.CallCtx, msg)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				ids, texts, isError := results(blocks)
				if strings.Join(ids, " ") != "toolu_1 toolu_2 toolu_3" {
					t.Fatalf("results for %q, want toolu_1 toolu_2 toolu_3", ids)
				}
				for i, text := range texts {
					if tc.want[i] == "" {
						if !strings.HasPrefix(text, `"task_`) || isError[i] {
							t.Errorf("result %d: %q (is_error %v), want a task id", i, text, isError[i])
						}
					} else if text != tc.want[i] || !isError[i] {
						t.Errorf("result %d: %q (is_error %v), want %q with is_error", i, text, isError[i], tc.want[i])
					}
				}
			})
		}
	}
}

// With WithParallel(n), n tool_use blocks that each promote a slow
// function to the background after d (bgtask.Owner.Foreground) take d,
// not n*d; the tool_result blocks keep the calls' order.
func TestAnswerParallelForeground(t *testing.T) {
	t.Parallel()
	const d = 5 * time.Second
	for _, tc := range []struct {
		parallel int
		took     time.Duration
	}{{1, 3 * d}, {2, 2 * d}, {3, d}} {
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
				research := agent.Tool{
					Name:        "research",
					Description: "Research a topic.",
					Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["topic"],"properties":{"topic":{"type":"string"}}}`),
					Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
						res, err := owner.Foreground(ctx, d, func(ctx context.Context, _ *bgtask.Task) (any, error) {
							<-ctx.Done() // slow: runs until the Manager shuts down
							return nil, context.Cause(ctx)
						})
						return res.Result, err
					},
				}
				ts, err := bganthropic.New([]agent.Tool{research})
				if err != nil {
					t.Fatal(err)
				}
				uses := []toolUse{{"toolu_1", "research", `{"topic":"a"}`}, {"toolu_2", "research", `{"topic":"b"}`}, {"toolu_3", "research", `{"topic":"c"}`}}
				start := time.Now()
				blocks, err := ts.AnswerMessage(t.Context(), message(t, uses...), bganthropic.WithParallel(tc.parallel), bganthropic.WithRunID("run-1"))
				if took := time.Since(start); err != nil || took != tc.took {
					t.Fatalf("AnswerMessage took %v (%v), want %v", took, err, tc.took)
				}
				ids, texts, _ := results(blocks)
				if strings.Join(ids, " ") != "toolu_1 toolu_2 toolu_3" {
					t.Fatalf("results for %q", ids)
				}
				for i, text := range texts {
					var notice struct {
						Status string
						TaskID string `json:"task_id"`
					}
					if err := json.Unmarshal([]byte(text), &notice); err != nil || notice.Status != "promoted" {
						t.Fatalf("result %d: %s, want a promotion notice", i, text)
					}
					meta, err := owner.Get(t.Context(), notice.TaskID)
					if err != nil || meta.Parent.CallID != uses[i].id || meta.Parent.RunID != "run-1" {
						t.Errorf("result %d: task of call %q in %q (%v), want call %s in run-1", i, meta.Parent.CallID, meta.Parent.RunID, err, uses[i].id)
					}
				}
			})
		})
	}
}

// A bad option is refused, by New and by AnswerMessage, with an error that
// names it; AnswerMessage then runs no call. WithStrict sets the
// definitions' strict flag, which is not sent by default.
func TestOptions(t *testing.T) {
	t.Parallel()
	f := adaptertest.NewFixture(t)
	var ran atomic.Int32
	tool := adaptertest.StartJob(f.Owner, func(string) error { ran.Add(1); return nil })
	msg := message(t, toolUse{"toolu_1", "start_job", `{"name":"x"}`})
	for _, tc := range []struct {
		opt  bganthropic.Option
		want string
	}{
		{bganthropic.WithParallel(0), "bganthropic: WithParallel(0): at least one call at a time: bgtask: invalid argument"},
		{bganthropic.WithRunID("\t"), "bganthropic: WithRunID: blank run id: bgtask: invalid argument"},
		{bganthropic.WithAgentID(" "), "bganthropic: WithAgentID: blank agent id: bgtask: invalid argument"},
	} {
		if ts, err := bganthropic.New([]agent.Tool{tool}, tc.opt); ts != nil || err == nil || err.Error() != tc.want || !errors.Is(err, bgtask.ErrInvalidArgument) {
			t.Errorf("New: %v, %v; want %s", ts, err, tc.want)
		}
		ts, err := bganthropic.New([]agent.Tool{tool})
		if err != nil {
			t.Fatal(err)
		}
		if blocks, err := ts.AnswerMessage(f.CallCtx, msg, tc.opt); blocks != nil || err == nil || err.Error() != tc.want {
			t.Errorf("AnswerMessage: %d blocks, %v; want none, %s", len(blocks), err, tc.want)
		}
	}
	if ran.Load() != 0 {
		t.Errorf("%d calls ran, want none", ran.Load())
	}

	for _, tc := range []struct {
		opts []bganthropic.Option
		want string
	}{{nil, "null"}, {[]bganthropic.Option{bganthropic.WithStrict(true)}, "true"}, {[]bganthropic.Option{bganthropic.WithStrict(false)}, "false"}} {
		ts, err := bganthropic.New([]agent.Tool{tool}, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(ts.MessageTools()[0])
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		if err := json.Unmarshal(b, &def); err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(def["strict"]); string(got) != tc.want {
			t.Errorf("strict %s, want %s", got, tc.want)
		}
	}
}
