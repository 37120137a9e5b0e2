package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// runCtx is the context of a tool call in run run of agent "agent-1".
func runCtx(ctx context.Context, run string) context.Context {
	return bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: run, CallID: "call-1", AgentID: "agent-1"})
}

func TestToolsOrderAndSchemas(t *testing.T) {
	m := newTestManager(t)
	var names []string
	for _, tool := range Tools(m.Owner("thread-1")) {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.Call == nil {
			t.Errorf("%s: no description or call", tool.Name)
		}
		var schema any
		if err := json.Unmarshal(tool.Schema, &schema); err != nil {
			t.Fatalf("%s: schema: %v", tool.Name, err)
		}
		var objects int
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if _, ok := v["properties"]; ok {
					objects++
					if v["type"] != "object" || v["additionalProperties"] != false {
						t.Errorf("%s: object at %s: type %v, additionalProperties %v", tool.Name, path, v["type"], v["additionalProperties"])
					}
				}
				for k, e := range v {
					walk(path+"/"+k, e)
				}
			case []any:
				for _, e := range v {
					walk(path+"/[]", e)
				}
			}
		}
		walk("", schema)
		if objects == 0 {
			t.Errorf("%s: schema has no object", tool.Name)
		}
	}
	if got := strings.Join(names, ","); got != "list_tasks,get_task,cancel_task,send_message,wait_task" {
		t.Fatalf("tools %s", got)
	}
}

func TestWaitLimitInSchema(t *testing.T) {
	m := newTestManager(t)
	for _, tc := range []struct {
		opts []ToolOption
		want string
	}{
		{nil, `"description":"How long to wait at most, in seconds, from 1 to 300; null for the default, 30."`},
		{[]ToolOption{WithWaitLimit(0)}, `"description":"How long to wait at most, in seconds, from 1 to 1; null for the default, 1."`},
		{[]ToolOption{WithWaitLimit(10_500_000_000)}, `"description":"How long to wait at most, in seconds, from 1 to 10; null for the default, 10."`},
		{[]ToolOption{WithWaitLimit(1 << 62)}, `from 1 to 300;`},
	} {
		if s := string(toolNamed(t, m.Owner("o"), "wait_task", tc.opts...).Schema); !strings.Contains(s, tc.want) {
			t.Errorf("schema %s, want %s", s, tc.want)
		}
	}
}

// ---- list_tasks and get_task (Appendix A)

func TestListTasksEmpty(t *testing.T) {
	m := newTestManager(t)
	res := callTool(t, t.Context(), toolNamed(t, m.Owner("thread-1"), "list_tasks"), `{}`, nil)
	if string(res) != `{"tasks":[],"total":0}` {
		t.Fatalf("list_tasks = %s", res)
	}
}

func TestListTasksRunningAndCompleted(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	running, _ := spawnProbe(t, t.Context(), o, bgtask.WithName("watcher"), bgtask.WithDescription("watch the build"))
	done, err := o.Spawn(t.Context(), func(context.Context, *bgtask.Task) (any, error) { return 7, nil }, bgtask.WithType("report"), bgtask.WithParent(bgtype.Parent{TaskID: running}))
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, o, done)
	other, _ := spawnProbe(t, t.Context(), m.Owner("thread-2"))
	list := toolNamed(t, o, "list_tasks")

	var all listResult
	callTool(t, t.Context(), list, `{}`, &all)
	if all.Total != 2 || len(all.Tasks) != 2 || all.NextCursor != "" {
		t.Fatalf("list_tasks: %+v", all)
	}
	w, r := all.Tasks[0], all.Tasks[1]
	if w.TaskID != running || w.Name != "watcher" || w.TaskType != bgtype.TypeTask || w.Status != bgtype.StatusRunning ||
		w.Description != "watch the build" || w.ParentTaskID != "" || w.CreatedAt.IsZero() || !w.FinishedAt.IsZero() ||
		w.StartedAt != nil || w.Result != nil || w.Error != "" {
		t.Errorf("running task %+v", w)
	}
	if r.TaskID != done || r.TaskType != "report" || r.Status != bgtype.StatusCompleted || r.ParentTaskID != running ||
		r.FinishedAt.IsZero() || r.Result != nil {
		t.Errorf("completed task %+v", r)
	}
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"status":["running"]}`, []string{running}},
		{`{"status":["completed"]}`, []string{done}},
		{`{"status":["completed","running"]}`, []string{running, done}},
		{`{"status":["failed"]}`, nil},
		{`{"type":"report"}`, []string{done}},
		{`{"type":" report "}`, []string{done}},
		{`{"type":"task","status":["running"]}`, []string{running}},
		{`{"type":"task","status":["completed"]}`, nil},
		{`{"status":null,"type":null,"limit":null,"cursor":null}`, []string{running, done}},
		{`{"status":["failed"],"status":["completed"]}`, []string{done}},
	} {
		var got listResult
		callTool(t, t.Context(), list, tc.args, &got)
		var ids []string
		for _, tk := range got.Tasks {
			ids = append(ids, tk.TaskID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") || got.Total != len(tc.want) || got.NextCursor != "" {
			t.Errorf("list_tasks(%s) = %v (total %d, next %q), want %v", tc.args, ids, got.Total, got.NextCursor, tc.want)
		}
	}
	var theirs listResult
	callTool(t, t.Context(), toolNamed(t, m.Owner("thread-2"), "list_tasks"), `{}`, &theirs)
	if theirs.Total != 1 || theirs.Tasks[0].TaskID != other {
		t.Errorf("thread-2 sees %+v", theirs)
	}
}

func TestGetTaskCompletedResult(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *bgtask.Task) (any, error) {
		return map[string]any{"summary": "a < b & c"}, nil
	}, bgtask.WithName("research"), bgtask.WithDescription("compare <a> & <b>"))
	if err != nil {
		t.Fatal(err)
	}
	meta := waitTask(t, o, id)
	var got getResult
	res := callTool(t, t.Context(), toolNamed(t, o, "get_task"), toJSON(map[string]string{"task_id": " " + id + "\n"}), &got)
	if got.Task.TaskID != id || got.Task.Status != bgtype.StatusCompleted || !jsonEqual(got.Task.Result, `{"summary":"a < b & c"}`) ||
		got.Task.Name != "research" || got.Task.StartedAt == nil || !got.Task.StartedAt.Equal(meta.StartedAt) ||
		!got.Task.FinishedAt.Equal(meta.FinishedAt) || got.Task.Error != "" || got.Task.InputRequest != nil || len(got.Messages) != 0 {
		t.Fatalf("get_task = %s", res)
	}
	// Task text is escaped as in the plugin's envelopes: no raw tag a model
	// could take for the plugin's own.
	if !strings.Contains(string(res), `"messages":[]`) || !strings.Contains(string(res), `"description":"compare \u003ca\u003e \u0026 \u003cb\u003e"`) ||
		strings.ContainsAny(string(res), "<>&") {
		t.Fatalf("get_task = %s: want an empty messages array and escaped text", res)
	}
}

func TestGetTaskFailedHidesStack(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), panickingTask)
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, o, id)
	var got getResult
	res := callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &got)
	if got.Task.Status != bgtype.StatusFailed || got.Task.Error != "panic: boom" || got.Task.Result != nil || strings.Contains(string(res), "goroutine") {
		t.Fatalf("get_task = %s", res)
	}
}

func TestGetTaskNotFound(t *testing.T) {
	m := newTestManager(t)
	mine, _ := spawnProbe(t, t.Context(), m.Owner("thread-1"))
	get := toolNamed(t, m.Owner("thread-2"), "get_task")
	for _, id := range []string{"task_nope", mine} {
		err := callToolErr(t, t.Context(), get, `{"task_id":"`+id+`"}`)
		if err.Error() != "task not found: "+id || !errors.Is(err, bgtask.ErrNotFound) || errors.Is(err, ErrToolArguments) {
			t.Errorf("get_task(%s): %v", id, err)
		}
	}
}

// TestToolCallLineageFlowsIntoSpawn: a host's own tool spawns with the
// call's ctx; the task carries the call's run, call and agent ids, and
// cancel_task finds it as a child of the run.
func TestToolCallLineageFlowsIntoSpawn(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	startExport := Tool{Name: "start_export", Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		p := newProbe()
		id, err := o.Spawn(ctx, p.fn, bgtask.WithName("export"))
		if err != nil {
			return nil, err
		}
		<-p.started
		return toolJSON(map[string]string{"task_id": id})
	}}
	ctx := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-7", CallID: "call-3", AgentID: "planner"})
	var started struct {
		TaskID string `json:"task_id"`
	}
	callTool(t, ctx, startExport, `{}`, &started)
	meta := getTask(t, o, started.TaskID)
	if meta.Parent != (bgtype.Parent{RunID: "run-7", CallID: "call-3", AgentID: "planner"}) {
		t.Fatalf("lineage %+v", meta.Parent)
	}
	var r cancelReceipt
	callTool(t, bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-7"}), toolNamed(t, o, "cancel_task"), `{"target":{"relation":"child","name":"export"}}`, &r)
	if r != (cancelReceipt{Status: "accepted", RootTaskID: started.TaskID, CanceledCount: 1}) {
		t.Fatalf("cancel_task = %+v", r)
	}
	if got := waitTask(t, o, started.TaskID); got.Status != bgtype.StatusCanceled {
		t.Fatalf("export %s", got.Status)
	}
}
