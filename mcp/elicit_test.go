package bgmcp_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// askTool asks "which branch?" in a task and returns the answer; between
// its steps it waits on the gates it is given (nil: no wait).
type askTool struct {
	started chan struct{} // closed when Run began
	ask     chan struct{} // Run asks once this is closed
	finish  chan struct{} // Run returns once this is closed
}

func newAskTool(gated bool) *askTool {
	a := &askTool{started: make(chan struct{})}
	if gated {
		a.ask, a.finish = make(chan struct{}), make(chan struct{})
	}
	return a
}

func (a *askTool) tool() bgmcp.Tool {
	return bgmcp.Tool{
		Name: "ask", Description: "Asks which branch to build.", InputSchema: echoSchema, TaskSupport: bgmcp.TaskRequired,
		Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
			close(a.started)
			task, _ := call.Task()
			if a.ask != nil {
				<-a.ask
			}
			answer, err := task.RequestInput(ctx, "which branch?")
			if err != nil {
				return nil, err
			}
			if a.finish != nil {
				<-a.finish
			}
			return map[string]string{"branch": answer.Content}, nil
		},
	}
}

const wantSchema = `{"properties":{"answer":{"description":"Your answer to the task's question.","title":"Answer","type":"string"}},"required":["answer"],"type":"object"}`

// A client that declared elicitation and waits in tasks/result is sent the
// task's question there, as an elicitation/create naming the task; what it
// answers decides the task's end. An error answer leaves the question to
// send_message.
func TestTaskElicitation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   any
		rpcErr  *jsonrpc.Error
		status  string // the task's end, in tasks/get
		isError bool
		text    string // the text of tasks/result
	}{
		{"accept", map[string]any{"action": "accept", "content": map[string]any{"answer": "main"}}, nil, "completed", false, `{"branch":"main"}`},
		// The SDK checks the content against the schema: an answer without
		// "answer" is an error, and the question stays open.
		{"accept without answer", map[string]any{"action": "accept", "content": map[string]any{"pick": "dev"}}, nil, "completed", false, `{"branch":"by tool"}`},
		{"decline", map[string]any{"action": "decline"}, nil, "cancelled", true, "bgtask: task cancelled: bgmcp: the client declined the task's input request"},
		{"cancel", map[string]any{"action": "cancel"}, nil, "cancelled", true, "bgtask: task cancelled: bgmcp: the client cancelled the task's input request"},
		{"error", nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no forms here"}, "completed", false, `{"branch":"by tool"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAskTool(false)
			s := newServer(t, newManager(t), nil)
			if err := s.AddTool(a.tool()); err != nil {
				t.Fatal(err)
			}
			c := dialRawCaps(t, s, map[string]any{"elicitation": map[string]any{}})
			tk := c.callTask("ask", map[string]any{"text": "x"}, nil)
			pending := c.send("tasks/result", map[string]any{"taskId": tk.TaskID})
			req := <-c.calls
			var params map[string]json.RawMessage
			decode(t, req.Params, &params)
			want := map[string]string{
				"_meta":           `{"io.modelcontextprotocol/related-task":{"taskId":"` + tk.TaskID + `"}}`,
				"message":         `"which branch?"`,
				"mode":            `"form"`,
				"requestedSchema": wantSchema,
			}
			if req.Method != "elicitation/create" || len(params) != len(want) {
				t.Fatalf("request %s %s, want elicitation/create with %v", req.Method, req.Params, want)
			}
			for k, v := range want {
				if string(params[k]) != v {
					t.Errorf("elicitation %s = %s, want %s", k, params[k], v)
				}
			}
			if got := c.getTask(tk.TaskID); got.Status != "input_required" || got.StatusMessage != "which branch?" {
				t.Errorf("while asked: %+v, want input_required with the prompt", got)
			}
			c.reply(req, tc.reply, tc.rpcErr)
			if tc.text == `{"branch":"by tool"}` {
				var sent struct {
					Content []struct{ Text string } `json:"content"`
				}
				// The question is still open: answer it with the tool.
				var view struct {
					Task struct {
						InputRequest struct{ ID string } `json:"input_request"`
					} `json:"task"`
				}
				var get struct {
					Content []struct{ Text string } `json:"content"`
				}
				decode(t, c.call("tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": tk.TaskID}}), &get)
				decode(t, json.RawMessage(get.Content[0].Text), &view)
				decode(t, c.call("tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{
					"to": map[string]any{"relation": "child", "name": tk.TaskID}, "message": "by tool", "in_reply_to": view.Task.InputRequest.ID,
				}}), &sent)
				if !strings.Contains(sent.Content[0].Text, `"delivered"`) {
					t.Fatalf("send_message: %s", sent.Content[0].Text)
				}
			}
			res, rerr := response(<-pending)
			if rerr != nil {
				t.Fatalf("tasks/result: %v", rerr)
			}
			var p payload
			decode(t, res, &p)
			if p.IsError != tc.isError || len(p.Content) != 1 || p.Content[0].Text != tc.text || p.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
				t.Errorf("tasks/result %s, want isError %v and text %s", res, tc.isError, tc.text)
			}
			got := c.getTask(tk.TaskID)
			if got.Status != tc.status {
				t.Errorf("tasks/get %+v, want %s", got, tc.status)
			}
			if tc.status == "cancelled" && got.StatusMessage != tc.text {
				t.Errorf("tasks/get statusMessage %q, want %q", got.StatusMessage, tc.text)
			}
			select {
			case req := <-c.calls:
				t.Errorf("another request from the server: %s %s", req.Method, req.Params)
			default:
			}
		})
	}
}

// A client that did not declare elicitation is never sent one: its
// tasks/result waits until send_message answers and the task ends.
func TestTaskNoElicitation(t *testing.T) {
	a := newAskTool(false)
	s := newServer(t, newManager(t), nil, bgmcp.WithOwnerFunc(alice))
	if err := s.AddTool(a.tool()); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, s)
	tk := c.callTask("ask", map[string]any{"text": "x"}, nil)
	pending := c.send("tasks/result", map[string]any{"taskId": tk.TaskID})
	got := c.getTask(tk.TaskID)
	for got.Status == "working" { // ends on the status, not on time
		got = c.getTask(tk.TaskID)
	}
	if got.Status != "input_required" {
		t.Fatalf("tasks/get %+v, want input_required", got)
	}
	select {
	case <-pending:
		t.Fatal("tasks/result returned while the task waits for input")
	default:
	}
	var get struct {
		Content []struct{ Text string } `json:"content"`
	}
	decode(t, c.call("tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": tk.TaskID}}), &get)
	var view struct {
		Task struct {
			InputRequest struct{ ID string } `json:"input_request"`
		} `json:"task"`
	}
	decode(t, json.RawMessage(get.Content[0].Text), &view)
	c.call("tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{
		"to": map[string]any{"relation": "child", "name": tk.TaskID}, "message": "main", "in_reply_to": view.Task.InputRequest.ID,
	}})
	res, rerr := response(<-pending)
	var p payload
	if rerr != nil {
		t.Fatal(rerr)
	}
	decode(t, res, &p)
	if p.IsError || string(p.StructuredContent) != `{"branch":"main"}` {
		t.Errorf("tasks/result %s", res)
	}
	select {
	case req := <-c.calls:
		t.Errorf("a request from the server: %s %s", req.Method, req.Params)
	default:
	}
}

// lastUpdatedAt moves on every status change: started, asked, answered,
// ended; ttl is null while the task runs, then the time from its creation
// to its end plus the store's retention.
func TestLastUpdatedAtAndTTL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []bgmcp.Option
		retain time.Duration
	}{
		{"default", nil, 24 * time.Hour},
		{"retain for an hour", []bgmcp.Option{bgmcp.WithRetainFor(time.Hour)}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t)
			o := m.Owner("alice")
			a := newAskTool(true)
			s := newServer(t, m, nil, append(tc.opts, bgmcp.WithOwnerFunc(alice))...)
			if err := s.AddTool(a.tool()); err != nil {
				t.Fatal(err)
			}
			c := dialRaw(t, s)
			tk := c.callTask("ask", map[string]any{"text": "x"}, nil)
			<-a.started
			rec, err := o.Get(t.Context(), tk.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			stamp := func(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }
			check := func(what string, got task, status, want string) {
				t.Helper()
				if got.Status != status || got.LastUpdatedAt != want || got.TTL != nil {
					t.Errorf("%s: %+v, want %s, lastUpdatedAt %s, ttl null", what, got, status, want)
				}
			}
			working := c.getTask(tk.TaskID)
			check("started", working, "working", stamp(rec.StartedAt))

			close(a.ask)
			asked := c.getTask(tk.TaskID)
			for asked.Status == "working" { // ends on the status, not on time
				asked = c.getTask(tk.TaskID)
			}
			rec, err = o.Get(t.Context(), tk.TaskID)
			if err != nil || rec.Input == nil {
				t.Fatalf("record %+v, %v", rec, err)
			}
			askedAt := inputStamp(t, rec.Input.ID)
			if !askedAt.After(rec.StartedAt) {
				askedAt = rec.StartedAt.Add(time.Microsecond)
			}
			check("asked", asked, "input_required", stamp(askedAt))

			if _, err := o.Send(t.Context(), tk.TaskID, bgtype.Message{Content: "main", InReplyTo: rec.Input.ID}); err != nil {
				t.Fatal(err)
			}
			answered := c.getTask(tk.TaskID)
			for answered.Status == "input_required" { // ends on the status, not on time
				answered = c.getTask(tk.TaskID)
			}
			msgs, err := o.Messages(t.Context(), tk.TaskID)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("messages %+v, %v", msgs, err)
			}
			check("answered", answered, "working", stamp(msgs[0].At))
			at := func(s string) time.Time {
				v, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			if !(at(working.LastUpdatedAt).Before(at(asked.LastUpdatedAt)) && at(asked.LastUpdatedAt).Before(at(answered.LastUpdatedAt))) {
				t.Errorf("lastUpdatedAt %s, %s, %s: not increasing", working.LastUpdatedAt, asked.LastUpdatedAt, answered.LastUpdatedAt)
			}

			close(a.finish)
			c.call("tasks/result", map[string]any{"taskId": tk.TaskID})
			ended := c.getTask(tk.TaskID)
			rec, err = o.Get(t.Context(), tk.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			ttl := (rec.FinishedAt.Sub(rec.CreatedAt) + tc.retain).Milliseconds()
			if ended.Status != "completed" || ended.LastUpdatedAt != stamp(rec.FinishedAt) || ended.TTL == nil || *ended.TTL != ttl {
				t.Errorf("ended: %+v (ttl %v), want completed at %s, ttl %d", ended, ended.TTL, stamp(rec.FinishedAt), ttl)
			}
			var list struct {
				Tasks []task `json:"tasks"`
			}
			decode(t, c.call("tasks/list", map[string]any{}), &list)
			if len(list.Tasks) != 1 || list.Tasks[0].TTL == nil || *list.Tasks[0].TTL != ttl || list.Tasks[0].LastUpdatedAt != ended.LastUpdatedAt || list.Tasks[0].Status != ended.Status {
				t.Errorf("tasks/list %+v, want %+v", list.Tasks, ended)
			}
		})
	}
}

// inputStamp is the time in an input request id: the Unix milliseconds of
// its UUIDv7.
func inputStamp(t *testing.T, id string) time.Time {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(id, "input_")[:12])
	if err != nil {
		t.Fatal(err)
	}
	var ms int64
	for _, x := range b {
		ms = ms<<8 | int64(x)
	}
	return time.UnixMilli(ms)
}
