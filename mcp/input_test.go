package bgmcp_test

import (
	"context"
	"encoding/json"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// A task that asks its client a question reads as input_required with the
// prompt, and the answer sent with send_message (in_reply_to the request)
// reaches it; a foreground call has no task.
func TestTaskInputRequired(t *testing.T) {
	m := newManager(t)
	s, err := bgmcp.NewServer(m)
	if err != nil {
		t.Fatal(err)
	}
	foreground := make(chan bool, 1)
	err = s.AddTool(bgmcp.Tool{
		Name: "ask", Description: "Asks which branch to build.", InputSchema: echoSchema,
		Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
			task, ok := call.Task()
			if !ok {
				foreground <- true
				return "no task", nil
			}
			answer, err := task.RequestInput(ctx, "which branch?")
			if err != nil {
				return nil, err
			}
			return map[string]string{"branch": answer.Content}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, s)

	var plain payload
	decode(t, c.call("tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"text": "x"}}), &plain)
	if !<-foreground || plain.IsError || plain.Content[0].Text != `"no task"` {
		t.Fatalf("foreground call: %+v", plain)
	}

	tk := c.callTask("ask", map[string]any{"text": "x"}, nil)
	// Poll until the task asks: tasks/get answers at once, the loop ends
	// on the status, not on time.
	got := c.getTask(tk.TaskID)
	for got.Status == "working" {
		got = c.getTask(tk.TaskID)
	}
	if got.Status != "input_required" || got.StatusMessage != "which branch?" {
		t.Fatalf("asking: %+v, want input_required with the prompt", got)
	}

	var get struct {
		Content []struct{ Text string } `json:"content"`
	}
	decode(t, c.call("tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": tk.TaskID}}), &get)
	var view struct {
		Task struct {
			InputRequest struct {
				ID     string `json:"id"`
				Prompt string `json:"prompt"`
			} `json:"input_request"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(get.Content[0].Text), &view); err != nil || view.Task.InputRequest.ID == "" {
		t.Fatalf("get_task: %s (%v), want the open input request", get.Content[0].Text, err)
	}

	var sent struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	decode(t, c.call("tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{
		"to": map[string]any{"relation": "child", "name": tk.TaskID}, "message": "main", "in_reply_to": view.Task.InputRequest.ID,
	}}), &sent)
	if sent.IsError {
		t.Fatalf("send_message: %+v", sent)
	}

	var p payload
	decode(t, c.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if p.IsError || string(p.StructuredContent) != `{"branch":"main"}` {
		t.Errorf("result %+v, want the answer", p)
	}
	if got := c.getTask(tk.TaskID); got.Status != "completed" {
		t.Errorf("after the answer: %+v, want completed", got)
	}
}
