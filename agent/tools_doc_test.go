package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// documentedFields reads Tools' doc in tools.go and returns, per tool,
// the JSON field names its result lines name: the "→" lines under the tool
// and the soft failures listed for it. get_task and wait_task also take the
// fields of list_tasks' task, which their "{…}" stands for.
func documentedFields(t *testing.T) map[string]map[string]bool {
	t.Helper()
	src, err := os.ReadFile("tools.go")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(src), "// # Tools\n")
	doc, _, _ = strings.Cut(doc, "// # Errors\n")
	toolLine := regexp.MustCompile(`^//\t([a-z_]+) +\{`)
	word := regexp.MustCompile(`[a-z_]+`)
	fields := map[string]map[string]bool{}
	var tool string
	inResult := false
	for line := range strings.Lines(doc) {
		if m := toolLine.FindStringSubmatch(line); m != nil {
			tool, inResult = m[1], false
			if fields[tool] == nil {
				fields[tool] = map[string]bool{}
			}
			if !strings.Contains(line, `"status":"failed"`) {
				continue // the arguments, not the result
			}
		}
		body := strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t")
		text := strings.TrimSpace(body)
		indent := len(body) - len(strings.TrimLeft(body, " "))
		switch {
		case strings.HasPrefix(text, "→"):
			inResult = true
		case inResult && indent >= 4: // the result's next line
		case strings.Contains(text, `{"status":"failed"`):
			inResult = false
		default:
			inResult = false
			continue
		}
		if tool == "" {
			continue
		}
		for _, w := range word.FindAllString(text, -1) {
			fields[tool][w] = true
		}
	}
	for _, full := range []string{"get_task", "wait_task"} { // "{…}": list_tasks' task
		for w := range fields["list_tasks"] {
			fields[full][w] = true
		}
	}
	for w := range fields["get_task"] { // "the task as get_task shows it"
		fields["wait_task"][w] = true
	}
	return fields
}

// jsonKeys adds to keys every object key of the JSON value raw, except
// inside a result or a payload (the task's own data).
func jsonKeys(raw json.RawMessage, keys map[string]bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				keys[k] = true
				if k != "result" && k != "payload" {
					walk(e)
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
}

// TestToolDocsListEveryField: the tools' doc (Tools) names every JSON
// field each tool returns. The tools run over tasks that fill every field
// they have: a sub-agent's child with a name, tags, a description, an
// idempotency key, progress, a custom event and an input request answered
// with a long message; failed, cancelled and completed tasks; a name two
// live tasks share (one another instance runs); a wait that times out.
func TestToolDocsListEveryField(t *testing.T) {
	documented := documentedFields(t)
	synctest.Test(t, func(t *testing.T) {
		f := &fakeShared{Store: memstore.New()}
		m := newTestManager(t, bgtask.WithStore(f), bgtask.WithInstance("this-instance"))
		o := m.Owner("thread-1")
		ctx := runCtx(t.Context(), "run-1")
		emitted := map[string]map[string]bool{}
		call := func(tool, args string) json.RawMessage {
			t.Helper()
			out := callTool(t, ctx, toolNamed(t, o, tool), args, nil)
			if emitted[tool] == nil {
				emitted[tool] = map[string]bool{}
			}
			jsonKeys(out, emitted[tool])
			return out
		}

		_, parent := spawnProbe(t, ctx, o, bgtask.WithName("lead"))
		worker, err := o.Spawn(parent.ctx, func(ctx context.Context, tk *bgtask.Task) (any, error) {
			if err := tk.ReportProgress(1, 2, "half"); err != nil {
				return nil, err
			}
			if err := tk.Emit("step", 1); err != nil {
				return nil, err
			}
			if _, err := tk.RequestInput(ctx, "which region?"); err != nil {
				return nil, err
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}, bgtask.WithName("worker"), bgtask.WithTags("blue"), bgtask.WithDescription("builds"), bgtask.WithIdempotencyKey("k-1"))
		if err != nil {
			t.Fatal(err)
		}
		for _, fn := range []bgtask.Func{
			func(context.Context, *bgtask.Task) (any, error) { return "ok", nil },
			func(context.Context, *bgtask.Task) (any, error) { return nil, errors.New("boom") },
		} {
			id, err := o.Spawn(ctx, fn)
			if err != nil {
				t.Fatal(err)
			}
			waitTask(t, o, id)
			call("get_task", `{"task_id":"`+id+`"}`)
		}
		stopped, _ := spawnProbe(t, ctx, o, bgtask.WithName("stopped"))
		call("cancel_task", `{"target":{"relation":"child","name":"stopped"},"reason":"not needed"}`)
		waitTask(t, o, stopped)
		call("get_task", `{"task_id":"`+stopped+`"}`)

		call("wait_task", `{"task_id":"`+worker+`","timeout_seconds":5}`) // returns when it asks for input
		call("list_tasks", `{"limit":1,"status":["awaiting_input"]}`)
		call("list_tasks", `{"limit":1}`)
		var got getResult
		if err := json.Unmarshal(call("get_task", `{"task_id":"`+worker+`"}`), &got); err != nil || got.Task.InputRequest == nil {
			t.Fatalf("get_task worker = %+v, %v; want its input request", got, err)
		}
		call("send_message", fmt.Sprintf(`{"to":{"relation":"child","name":"worker"},"message":%q,"in_reply_to":%q}`,
			strings.Repeat("eu-west ", 1000), got.Task.InputRequest.ID))
		call("get_task", `{"task_id":"`+worker+`"}`)
		call("wait_task", `{"task_id":"`+worker+`","timeout_seconds":1}`) // times out

		// Soft failures: a name two live tasks share, an unknown one.
		if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(bgtype.TaskMeta{ID: "task_0190d5f4c5a87000a000000000000001", Owner: "thread-1",
			Type: bgtype.TypeTask, Name: "worker", Status: bgtype.StatusRunning, Instance: "other-instance", Attempt: 1, CreatedAt: time.Now()})); err != nil {
			t.Fatal(err)
		}
		call("cancel_task", `{"target":{"relation":"child","name":"worker"},"reason":null}`)
		call("cancel_task", `{"target":{"relation":"child","name":"nobody"},"reason":null}`)
		call("send_message", `{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`)

		for _, tool := range Tools(o) {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range emitted[tool.Name] {
					if !yield(k) {
						return
					}
				}
			})
			if len(keys) == 0 {
				t.Errorf("%s: the test emitted nothing", tool.Name)
			}
			for _, k := range keys {
				if !documented[tool.Name][k] {
					t.Errorf("%s returns %q, which its doc in tools.go does not list", tool.Name, k)
				}
			}
		}
		for _, want := range []string{"latest_event", "progress", "input_request", "truncated", "in_reply_to", "idempotency_key",
			"tags", "parent_task_id", "error_kind", "cancel_reason", "next_cursor", "result", "error"} {
			found := false
			for _, keys := range emitted {
				found = found || keys[want]
			}
			if !found {
				t.Errorf("no tool emitted %q: the test does not cover it", want)
			}
		}
		if _, err := o.CancelTree(t.Context(), worker); err != nil {
			t.Fatal(err)
		}
		parent.release <- struct{}{}
	})
}
