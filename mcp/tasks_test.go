package bgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// payload is a tasks/result answer.
type payload struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              map[string]struct {
		TaskID string `json:"taskId"`
	} `json:"_meta"`
}

func TestTaskPolledToCompletion(t *testing.T) {
	tools := newTestTools()
	c := dialRaw(t, newServer(t, newManager(t), tools))
	tk := c.callTask("slow", map[string]any{"text": "a"}, nil)
	if tk.Status != "working" || tk.TTL != nil || tk.PollInterval != 1000 || tk.CreatedAt == "" || tk.LastUpdatedAt == "" {
		t.Errorf("handle %+v, want working, ttl null, pollInterval 1000, dates", tk)
	}
	if got := <-tools.started; got != "a" {
		t.Fatalf("slow ran with %q", got)
	}
	if got := c.getTask(tk.TaskID); got.Status != "working" || got.TaskID != tk.TaskID {
		t.Errorf("running: %+v, want working", got)
	}
	result := c.send("tasks/result", map[string]any{"taskId": tk.TaskID}) // blocks until terminal
	close(tools.release)
	res, rerr := response(<-result)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var p payload
	decode(t, res, &p)
	if p.IsError || len(p.Content) != 1 || p.Content[0].Type != "text" || p.Content[0].Text != `{"done":"a"}` || string(p.StructuredContent) != `{"done":"a"}` {
		t.Errorf("result %s", res)
	}
	if got := p.Meta["io.modelcontextprotocol/related-task"].TaskID; got != tk.TaskID {
		t.Errorf("related task %q, want %q", got, tk.TaskID)
	}
	if got := c.getTask(tk.TaskID); got.Status != "completed" || got.PollInterval != 0 || got.StatusMessage != "" {
		t.Errorf("after: %+v, want completed", got)
	}
}

func TestTaskFailed(t *testing.T) {
	c := dialRaw(t, newServer(t, newManager(t), newTestTools()))
	tk := c.callTask("fails", map[string]any{"text": "a"}, nil)
	var p payload
	decode(t, c.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if !p.IsError || len(p.Content) != 1 || p.Content[0].Text != "fails: no luck" {
		t.Errorf("result %+v, want isError with the tool's error", p)
	}
	if got := c.getTask(tk.TaskID); got.Status != "failed" || got.StatusMessage != "fails: no luck" {
		t.Errorf("task %+v, want failed with the error", got)
	}
}

func TestTaskSupportEnforced(t *testing.T) {
	c := dialRaw(t, newServer(t, newManager(t), newTestTools()))
	for _, tc := range []struct {
		method string
		params map[string]any
		code   int64
		msg    string
	}{
		{"tools/call", map[string]any{"name": "must_task", "arguments": map[string]any{"text": "x"}}, -32601, `method not found: "tools/call"`},
		{"tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": "x"}, "task": map[string]any{}}, -32601, `method not found: "tools/call"`},
		{"tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}, "task": map[string]any{}}, -32602, `unknown tool "nope"`},
		{"tasks/get", map[string]any{"taskId": "nope"}, -32602, "Task not found: nope"},
		{"tasks/get", map[string]any{}, -32602, "missing taskId"},
		{"tasks/list", map[string]any{"cursor": "bad"}, -32602, "Invalid cursor: bad"},
	} {
		_, err := c.try(tc.method, tc.params)
		if err == nil || err.Code != tc.code || err.Message != tc.msg {
			t.Errorf("%s %v: error %v, want %d %q", tc.method, tc.params, err, tc.code, tc.msg)
		}
	}
	tk := c.callTask("must_task", map[string]any{"text": "x"}, nil)
	var p payload
	decode(t, c.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if p.IsError || p.Content[0].Text != `"ok"` {
		t.Errorf("must_task result %+v", p)
	}
}

func TestCancelTask(t *testing.T) {
	tools := newTestTools()
	c := dialRaw(t, newServer(t, newManager(t), tools))
	tk := c.callTask("slow", map[string]any{"text": "c"}, nil)
	<-tools.started
	var got struct {
		task
		Meta json.RawMessage `json:"_meta"`
	}
	decode(t, c.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}), &got)
	if got.Status != "cancelled" || got.TaskID != tk.TaskID || got.StatusMessage != "bgtask: task cancelled" {
		t.Errorf("cancel answered %+v, want cancelled", got.task)
	}
	if err := <-tools.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the task's ctx ended with %v, want context.Canceled", err)
	}
	if got := c.getTask(tk.TaskID); got.Status != "cancelled" {
		t.Errorf("after cancel: %+v", got)
	}
	_, err := c.try("tasks/cancel", map[string]any{"taskId": tk.TaskID})
	if err == nil || err.Code != -32602 || err.Message != "Cannot cancel task in terminal status: cancelled" {
		t.Errorf("second cancel: %v", err)
	}
	var p payload
	decode(t, c.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if !p.IsError || p.Content[0].Text != "bgtask: task cancelled" {
		t.Errorf("result of a cancelled task %+v", p)
	}
}

func TestOtherSessionCannotSeeTask(t *testing.T) {
	tools := newTestTools()
	defer close(tools.release)
	s := newServer(t, newManager(t), tools)
	a, b := dialRaw(t, s), dialRaw(t, s)
	tk := a.callTask("slow", map[string]any{"text": "mine"}, nil)
	<-tools.started
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, id := range []string{tk.TaskID, "unknown-id"} {
			_, err := b.try(method, map[string]any{"taskId": id})
			if want := "Task not found: " + id; err == nil || err.Code != -32602 || err.Message != want {
				t.Errorf("%s %s from another session: %v, want -32602 %q", method, id, err, want)
			}
		}
	}
	var list struct {
		Tasks []task `json:"tasks"`
	}
	decode(t, b.call("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 0 {
		t.Errorf("another session lists %d tasks", len(list.Tasks))
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	decode(t, b.call("tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": tk.TaskID}}), &res)
	if !res.IsError || res.Content[0].Text != "task not found: "+tk.TaskID {
		t.Errorf("get_task from another session: %+v", res)
	}
	res.IsError = false
	decode(t, b.call("tools/call", map[string]any{"name": "cancel_task", "arguments": map[string]any{"target": map[string]any{"relation": "child", "name": tk.TaskID}}}), &res)
	if want := `{"status":"failed","root_task_id":"` + tk.TaskID + `","cancelled_count":0,"error":"task_not_found"}`; res.IsError || res.Content[0].Text != want {
		t.Errorf("cancel_task from another session: %+v", res)
	}
	if got := a.getTask(tk.TaskID); got.Status != "working" {
		t.Errorf("the owner's task is %q after the other session's attempts", got.Status)
	}
}

func TestTasksListPaged(t *testing.T) {
	defer bgmcp.SetListPageSize(2)()
	c := dialRaw(t, newServer(t, newManager(t), newTestTools()))
	var ids []string
	for i := range 5 {
		tk := c.callTask("echo", map[string]any{"text": fmt.Sprint(i)}, nil)
		c.call("tasks/result", map[string]any{"taskId": tk.TaskID})
		ids = append(ids, tk.TaskID)
	}
	var got []string
	var pages int
	params := map[string]any{}
	for {
		var page struct {
			Tasks      []task `json:"tasks"`
			NextCursor string `json:"nextCursor"`
		}
		decode(t, c.call("tasks/list", params), &page)
		pages++
		for _, tk := range page.Tasks {
			if tk.Status != "completed" {
				t.Errorf("%s: %s", tk.TaskID, tk.Status)
			}
			got = append(got, tk.TaskID)
		}
		if page.NextCursor == "" {
			break
		}
		params = map[string]any{"cursor": page.NextCursor}
	}
	if pages != 3 || !slices.Equal(got, ids) {
		t.Errorf("%d pages, ids %v, want 3 pages, %v", pages, got, ids)
	}
}

func TestProgressTask(t *testing.T) {
	tools := newTestTools()
	close(tools.release)
	c := dialRaw(t, newServer(t, newManager(t), tools))
	tk := c.callTask("slow", map[string]any{"text": "p"}, map[string]any{"progressToken": "tok-1"})
	c.call("tasks/result", map[string]any{"taskId": tk.TaskID})
	for i := 1; i <= 3; i++ {
		n := <-c.notes
		var p struct {
			ProgressToken string  `json:"progressToken"`
			Progress      float64 `json:"progress"`
			Total         float64 `json:"total"`
			Message       string  `json:"message"`
			Meta          map[string]struct {
				TaskID string `json:"taskId"`
			} `json:"_meta"`
		}
		decode(t, n.Params, &p)
		related, ok := p.Meta["io.modelcontextprotocol/related-task"]
		if n.Method != "notifications/progress" || p.ProgressToken != "tok-1" || p.Progress != float64(i) || p.Total != 3 || p.Message != fmt.Sprintf("step %d", i) ||
			!ok || related.TaskID != tk.TaskID || len(p.Meta) != 1 {
			t.Errorf("notification %d: %s %s", i, n.Method, n.Params)
		}
	}
}

func TestCancelTaskTool(t *testing.T) {
	tools := newTestTools()
	c := dialRaw(t, newServer(t, newManager(t), tools))
	tk := c.callTask("slow", map[string]any{"text": "c"}, nil)
	<-tools.started
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	decode(t, c.call("tools/call", map[string]any{"name": "cancel_task", "arguments": map[string]any{"target": map[string]any{"relation": "child", "name": tk.TaskID}}}), &res)
	if want := `{"status":"accepted","root_task_id":"` + tk.TaskID + `","cancelled_count":1}`; res.IsError || res.Content[0].Text != want {
		t.Errorf("cancel_task: %+v, want %s", res, want)
	}
	if err := <-tools.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the task's ctx ended with %v", err)
	}
}

// Only "task" makes a call a task: a client's own entry under the private
// _meta key the server uses for it is dropped, over both transports.
func TestPrivateTaskKeyIgnored(t *testing.T) {
	s := newServer(t, newManager(t), newTestTools())
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	params := map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "_meta": map[string]any{"io.github.bgtask/task-request": map[string]any{}}}
	for name, c := range map[string]*rawClient{"in-memory": dialRaw(t, s), "http": dialHTTP(t, srv.URL)} {
		var res struct {
			Content []struct{ Text string } `json:"content"`
			Task    *task                   `json:"task"`
		}
		decode(t, c.call("tools/call", params), &res)
		if res.Task != nil || len(res.Content) != 1 || res.Content[0].Text != `{"echo":"x"}` {
			t.Errorf("%s: %+v, want a plain result", name, res)
		}
	}
}
