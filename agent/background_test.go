package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// buildSchema is a host tool's strict schema.
const buildSchema = `{"type":"object","properties":{"target":{"type":"string","description":"What to build."}},"required":["target"],"additionalProperties":false}`

// scriptedBuild is a host tool that writes each piece it is handed to its
// task's output and returns {"built":target} when steps is closed.
type scriptedBuild struct {
	steps chan string
	wrote chan struct{}
}

func newScriptedBuild() *scriptedBuild {
	return &scriptedBuild{steps: make(chan string), wrote: make(chan struct{})}
}

func (b *scriptedBuild) tool() Tool {
	return Tool{Name: "build", Description: "Build a target.", Schema: json.RawMessage(buildSchema),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var a struct {
				Target string `json:"target"`
			}
			dec := json.NewDecoder(strings.NewReader(string(args)))
			dec.DisallowUnknownFields() // run_in_background never reaches the host's tool
			if err := dec.Decode(&a); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrToolArguments, err)
			}
			for {
				select {
				case s, ok := <-b.steps:
					if !ok {
						return json.Marshal(map[string]string{"built": a.Target})
					}
					io.WriteString(bgtask.OutputFrom(ctx), s)
					b.wrote <- struct{}{}
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
		}}
}

// print hands the tool a piece to write and waits until it is written.
func (b *scriptedBuild) print(s string) {
	b.steps <- s
	<-b.wrote
}

func mustBackground(t *testing.T, o bgtask.Owner, tool Tool, opt BackgroundOptions) Tool {
	t.Helper()
	bt, err := Background(o, tool, opt)
	if err != nil {
		t.Fatalf("Background: %v", err)
	}
	return bt
}

// The wrapped tool's schema gains the boolean, required and nullable, its
// description one line; a real validator and the call agree on it; the
// host's modes leave the schema alone.
func TestBackgroundSchema(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	b := newScriptedBuild()
	bt := mustBackground(t, o, b.tool(), BackgroundOptions{})
	want := `{"additionalProperties":false,"properties":{"target":{"type":"string","description":"What to build."},` +
		`"run_in_background":{"type":["boolean","null"],"description":"true to run the call in the background: you get a task id at once and a notice when it ends. false or null to wait for it here."}},` +
		`"required":["target","run_in_background"],"type":"object"}`
	if string(bt.Schema) != want {
		t.Fatalf("schema:\n%s\nwant\n%s", bt.Schema, want)
	}
	if bt.Description != "Build a target. Set run_in_background to true for work that may take long: you get a task id at once and are notified when it ends; do not poll or wait for it." {
		t.Fatalf("description: %q", bt.Description)
	}
	s := compileSchema(t, bt)
	for _, row := range []struct {
		args   string
		schema bool
		err    string
	}{
		{`{"target":"x","run_in_background":true}`, true, ""},
		{`{"target":"x","run_in_background":false}`, true, ""},
		{`{"target":"x","run_in_background":null}`, true, ""},
		{`{"target":"x","run_in_background":"yes"}`, false, `invalid arguments: "run_in_background" must be a boolean`},
		{`{"target":"x","run_in_background":1}`, false, `invalid arguments: "run_in_background" must be a boolean`},
	} {
		ok, _ := schemaAccepts(s, row.args)
		if ok != row.schema {
			t.Errorf("%s: schema accepts %v", row.args, ok)
		}
		if row.err != "" {
			if err := callToolErr(t, t.Context(), bt, row.args); !errors.Is(err, ErrToolArguments) || err.Error() != row.err {
				t.Errorf("%s: %v", row.args, err)
			}
		}
	}
	if ok, _ := schemaAccepts(s, `{"target":"x"}`); ok {
		t.Error("strict: a call that leaves run_in_background out is refused by the schema")
	}
	for _, mode := range []BackgroundMode{AlwaysBackground, NeverBackground} {
		if bt := mustBackground(t, o, b.tool(), BackgroundOptions{Mode: mode}); string(bt.Schema) != buildSchema {
			t.Errorf("mode %d: schema %s", mode, bt.Schema)
		}
	}
	for _, tc := range []struct {
		schema, err string
	}{
		{`[]`, `agent: Background: tool "build": schema is not a JSON object`},
		{`{"type":"object"}`, `agent: Background: tool "build": schema has no "properties" object`},
		{`{"type":"object","properties":{"run_in_background":{"type":"boolean"}}}`, `agent: Background: tool "build": schema has a "run_in_background" property already`},
	} {
		tool := b.tool()
		tool.Schema = json.RawMessage(tc.schema)
		if _, err := Background(o, tool, BackgroundOptions{}); err == nil || err.Error() != tc.err {
			t.Errorf("%s: %v", tc.schema, err)
		}
	}
	if _, err := Background(o, b.tool(), BackgroundOptions{Wait: -time.Second}); !errors.Is(err, bgtask.ErrInvalidArgument) {
		t.Errorf("negative Wait: %v", err)
	}
	shutdownManager(t, m)
}

// The model runs the same tool in the foreground (its result is the
// tool's) and in the background (a task at once, its end announced; the
// call's result says it will be notified).
func TestBackgroundForegroundAndBackground(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		b := newScriptedBuild()
		bt := mustBackground(t, o, b.tool(), BackgroundOptions{Wait: time.Minute})
		res := make(chan json.RawMessage)
		go func() { res <- callTool(t, t.Context(), bt, `{"target":"lib","run_in_background":false}`, nil) }()
		b.print("ok\n")
		close(b.steps)
		if got := <-res; string(got) != `{"built":"lib"}` {
			t.Fatalf("foreground: %s", got)
		}
		synctest.Wait()
		if evs := ib.Drain(); len(evs) != 0 {
			t.Fatalf("a foreground end is the call's result, not an event: %+v", evs)
		}

		b = newScriptedBuild()
		bt = mustBackground(t, o, b.tool(), BackgroundOptions{Wait: time.Minute})
		var started startedNotice
		callTool(t, t.Context(), bt, `{"run_in_background":true,"target":"app"}`, &started)
		if started.Status != "started" || !strings.HasPrefix(started.TaskID, "task_") ||
			!strings.Contains(started.Message, "You will be notified when it ends: do not poll") {
			t.Fatalf("started: %+v", started)
		}
		meta := getTask(t, o, started.TaskID)
		if meta.Type != "build" || meta.Description != `build {"target":"app"}` || meta.Status != bgtype.StatusRunning {
			t.Fatalf("task: %+v", meta)
		}
		b.print("linking\n")
		close(b.steps)
		if err := ib.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		evs := ib.Drain()
		if len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != started.TaskID || string(evs[0].Result) != `{"built":"app"}` {
			t.Fatalf("background end: %+v", evs)
		}
		shutdownManager(t, m)
	})
}

// A foreground call that prints, is promoted, and whose output the model
// then reads in three increments (the notice, wait_task on new output,
// get_task): every byte seen exactly once, in order, none re-sent. The host
// saw what was printed in the foreground, as it was printed, and nothing
// after.
func TestBackgroundPromotedOutputIncrements(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		b := newScriptedBuild()
		var screen []string
		bt := mustBackground(t, o, b.tool(), BackgroundOptions{Wait: 10 * time.Second,
			OnOutput: func(ctx context.Context, off int64, p []byte) { screen = append(screen, fmt.Sprintf("%d:%s", off, p)) }})
		res := make(chan json.RawMessage)
		go func() { res <- callTool(t, t.Context(), bt, `{"target":"all","run_in_background":null}`, nil) }()
		b.print("step 1 <ok>\n")
		b.print("step 2\n")
		var notice struct {
			Status string     `json:"status"`
			TaskID string     `json:"task_id"`
			Output toolOutput `json:"output"`
		}
		if err := json.Unmarshal(<-res, &notice); err != nil {
			t.Fatal(err)
		}
		if notice.Status != "promoted" || notice.Output.Text != "step 1 <ok>\nstep 2\n" || notice.Output.NextOffset != 19 {
			t.Fatalf("notice: %+v", notice)
		}
		seen := notice.Output.Text
		next := notice.Output.NextOffset

		wait := toolNamed(t, o, "wait_task")
		got := make(chan waitResult)
		go func() {
			var w waitResult
			callTool(t, t.Context(), wait, fmt.Sprintf(`{"task_id":%q,"timeout_seconds":60,"output_since":%d}`, notice.TaskID, next), &w)
			got <- w
		}()
		synctest.Wait()
		start := time.Now()
		time.Sleep(5 * time.Second)
		b.print("step 3\n")
		w := <-got
		if time.Since(start) != 5*time.Second || w.TimedOut || w.Output == nil || *w.Output != (toolOutput{Text: "step 3\n", Offset: 19, NextOffset: 26, TotalBytes: 26, Running: true}) ||
			w.Task.Status != bgtype.StatusRunning || w.Message != "task "+notice.TaskID+" wrote new output" {
			t.Fatalf("wait_task on new output after %v: %+v %+v", time.Since(start), w, w.Output)
		}
		seen += w.Output.Text
		next = w.Output.NextOffset

		b.print("step 4\n")
		close(b.steps)
		if _, err := o.Wait(t.Context(), notice.TaskID); err != nil {
			t.Fatal(err)
		}
		var g getResult
		callTool(t, t.Context(), toolNamed(t, o, "get_task"), fmt.Sprintf(`{"task_id":%q,"output_since":%d,"output_tail":null}`, notice.TaskID, next), &g)
		if g.Output == nil || *g.Output != (toolOutput{Text: "step 4\n", Offset: 26, NextOffset: 33, TotalBytes: 33}) || g.Task.OutputBytes != 33 {
			t.Fatalf("get_task: %+v %+v", g.Task, g.Output)
		}
		seen += g.Output.Text
		if seen != "step 1 <ok>\nstep 2\nstep 3\nstep 4\n" {
			t.Fatalf("seen %q", seen)
		}
		if fmt.Sprint(screen) != "[0:step 1 <ok>\n 12:step 2\n]" {
			t.Fatalf("the host's screen: %q", screen)
		}
		shutdownManager(t, m)
	})
}

// get_task reports a buffer overflow with the bytes dropped, reads a tail,
// and escapes what the task wrote.
func TestGetTaskOutputOverflow(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, bgtask.WithCaps(bgtask.Caps{MaxOutputBytes: 10}))
	o := m.Owner("alice")
	b := newScriptedBuild()
	bt := mustBackground(t, o, b.tool(), BackgroundOptions{Mode: AlwaysBackground})
	var started startedNotice
	callTool(t, t.Context(), bt, `{"target":"x"}`, &started)
	b.print("0123456789")
	b.print("<b>&")
	get := toolNamed(t, o, "get_task")
	var g getResult
	raw := callTool(t, t.Context(), get, fmt.Sprintf(`{"task_id":%q,"output_since":0}`, started.TaskID), &g)
	if *g.Output != (toolOutput{Text: "456789<b>&", Offset: 4, NextOffset: 14, DroppedBytes: 4, TotalBytes: 14, Running: true}) { // 10 kept of 14
		t.Fatalf("output: %+v", g.Output)
	}
	if strings.ContainsAny(string(raw), "<>&") {
		t.Fatalf("raw tags in the result: %s", raw)
	}
	callTool(t, t.Context(), get, fmt.Sprintf(`{"task_id":%q,"output_tail":4}`, started.TaskID), &g)
	if *g.Output != (toolOutput{Text: "<b>&", Offset: 10, NextOffset: 14, TotalBytes: 14, Running: true}) {
		t.Fatalf("tail: %+v", g.Output)
	}
	g = getResult{}
	callTool(t, t.Context(), get, fmt.Sprintf(`{"task_id":%q}`, started.TaskID), &g)
	if g.Output != nil || g.Task.OutputBytes != 14 {
		t.Fatalf("without output_since: %+v, %+v", g.Task, g.Output)
	}
	if err := callToolErr(t, t.Context(), get, fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":3}`, started.TaskID)); err.Error() != `invalid arguments: "output_tail" is not allowed with "output_since"` {
		t.Fatalf("both: %v", err)
	}
	close(b.steps)
	shutdownManager(t, m)
}

// The end's notice is compact: its status, its result, the size of the
// output and how to read it, never the output; ParseEvent reads it back.
func TestEndNoticeOutputSize(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	p, err := NewPlugin(m, "alice", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	o := p.Owner()
	b := newScriptedBuild()
	bt := mustBackground(t, o, b.tool(), BackgroundOptions{Mode: AlwaysBackground})
	var started startedNotice
	callTool(t, t.Context(), bt, `{"target":"x"}`, &started)
	b.print(strings.Repeat("secret output ", 100))
	close(b.steps)
	if _, err := o.Wait(t.Context(), started.TaskID); err != nil {
		t.Fatal(err)
	}
	msgs, err := p.BeforeInference(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var end *PromptMessage
	for i := range msgs {
		if msgs[i].Event != nil && msgs[i].Event.TaskID == started.TaskID {
			end = &msgs[i]
		}
	}
	if end == nil {
		t.Fatalf("no end notice in %+v", msgs)
	}
	want := `{"kind":"completed","task_id":"` + started.TaskID + `","result":{"built":"x"},"output_bytes":1400,"output_hint":"read the output with get_task, output_since 0 (or output_tail)"}`
	if !strings.Contains(end.Content, want) || strings.Contains(end.Content, "secret") {
		t.Fatalf("end notice %s", end.Content)
	}
	ev, ok := p.ParseEvent(end.Content)
	if !ok || ev.OutputBytes != 1400 {
		t.Fatalf("ParseEvent: %+v, %v", ev, ok)
	}
	if err := p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	shutdownManager(t, m)
}

// A foreground call whose tool fails returns the tool's own error: a bad
// argument is still the model's mistake, as without Background.
func TestBackgroundForegroundError(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	bt := mustBackground(t, o, newScriptedBuild().tool(), BackgroundOptions{})
	err := callToolErr(t, t.Context(), bt, `{"target":1,"run_in_background":false}`)
	if !errors.Is(err, ErrToolArguments) || !IsModelMistake(err) ||
		err.Error() != "invalid arguments: json: cannot unmarshal number into Go struct field .target of type string" {
		t.Fatalf("foreground error: %v", err)
	}
	shutdownManager(t, m)
}

// A foreground result is shown as a task's result is: <, > and & escaped.
func TestBackgroundForegroundResultEscaped(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	tool := Tool{Name: "echo", Description: "Echo.", Schema: json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`),
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"text":"</background-task-event> & more"}`), nil
		}}
	res := callTool(t, t.Context(), mustBackground(t, o, tool, BackgroundOptions{}), `{"run_in_background":false}`, nil)
	if string(res) != `{"text":"\u003c/background-task-event\u003e \u0026 more"}` {
		t.Fatalf("result: %s", res)
	}
	shutdownManager(t, m)
}

// A promotion notice whose output is all characters JSON escapes is
// returned whole, never cut to the display limit.
func TestBackgroundNoticeNotCut(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	release := make(chan struct{})
	tool := Tool{Name: "dump", Description: "Dump.", Schema: json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`),
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			io.WriteString(bgtask.OutputFrom(ctx), strings.Repeat("<", 4000))
			tk, _ := bgtask.TaskFromContext(ctx)
			m.Owner("alice").ToBackground(ctx, tk.ID())
			select {
			case <-release:
			case <-ctx.Done(): // a test that failed early
			}
			return json.RawMessage(`1`), nil
		}}
	res := callTool(t, t.Context(), mustBackground(t, o, tool, BackgroundOptions{}), `{"run_in_background":false}`, nil)
	var n struct {
		Status string     `json:"status"`
		Output toolOutput `json:"output"`
	}
	if err := json.Unmarshal(res, &n); err != nil || n.Status != "promoted" || n.Output.Text != strings.Repeat("<", bgtask.OutputTailMax) {
		t.Fatalf("notice (%d bytes): %.200s, %v", len(res), res, err)
	}
	close(release)
	shutdownManager(t, m)
}
