package bga2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

func TestSendCompletesWithArtifact(t *testing.T) {
	t.Parallel()
	b := setup(t, echoAgent)
	c := b.client(t, "alice")

	res, err := c.SendMessage(t.Context(), userText("", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result is %T, want *a2a.Task", res)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state = %q, want completed", task.Status.State)
	}
	if len(task.Artifacts) != 1 || task.Artifacts[0].ID != ResultArtifactID || textOf(task.Artifacts[0].Parts) != "echo: hi" {
		t.Fatalf("artifacts = %+v, want one %q artifact with text %q", task.Artifacts, ResultArtifactID, "echo: hi")
	}
	if task.ContextID != string(task.ID) {
		t.Errorf("contextId = %q, want the task id %q", task.ContextID, task.ID)
	}
	if len(task.History) != 1 || task.History[0].Role != a2a.MessageRoleUser || textOf(task.History[0].Parts) != "hi" {
		t.Errorf("history = %+v, want the user's message", task.History)
	}
	// The task is a bgtask sub-agent of the request's owner.
	rec, err := b.m.Owner("alice").Get(t.Context(), string(task.ID))
	if err != nil || rec.Type != bgtype.TypeSubAgent || rec.Status != bgtype.StatusCompleted {
		t.Errorf("record = %+v, %v; want a completed sub_agent of alice", rec, err)
	}
}

func TestStreamOrderedEvents(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	agent := func(ctx context.Context, tk *bgtask.Task) (any, error) {
		r := &messages{t: tk}
		m, err := r.next(ctx)
		if err != nil {
			return nil, err
		}
		if err := tk.Emit("progress", map[string]any{"step": "reading"}); err != nil {
			return nil, err
		}
		<-release
		return map[string]any{"answer": strings.ToUpper(m.Content)}, nil
	}
	b := setup(t, agent)
	c := b.client(t, "alice")

	var evs []a2a.Event
	for ev, err := range c.SendStreamingMessage(t.Context(), userText("", "question")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && u.Status.State == a2a.TaskStateWorking {
			close(release) // the progress has arrived: let the agent finish
		}
	}
	want := []string{"task:working", "status:working", "artifact:result", "status:completed:final"}
	if got := statesOf(evs); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	progress := evs[1].(*a2a.TaskStatusUpdateEvent).Status.Message
	if dp, ok := progress.Parts[0].(a2a.DataPart); !ok || dp.Data["event_type"] != "progress" ||
		dp.Data["payload"].(map[string]any)["step"] != "reading" {
		t.Errorf("progress message parts = %+v, want a data part with the event", progress.Parts)
	}
	art := evs[2].(*a2a.TaskArtifactUpdateEvent)
	if dp, ok := art.Artifact.Parts[0].(a2a.DataPart); !ok || dp.Data["answer"] != "QUESTION" || !art.LastChunk {
		t.Errorf("artifact = %+v, want the result object as a data part, last chunk", art.Artifact)
	}
}

// streamUntilMessage streams params and returns the first message the
// sub-agent sends, and the task id; it stops reading there.
func streamUntilMessage(t *testing.T, b *bundle, owner string, params *a2a.MessageSendParams) (a2a.TaskID, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var id a2a.TaskID
	for ev, err := range b.client(t, owner).SendStreamingMessage(ctx, params) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			id = ev.ID
		case *a2a.TaskStatusUpdateEvent:
			if ev.Status.Message != nil && ev.Status.Message.Role == a2a.MessageRoleAgent {
				return id, textOf(ev.Status.Message.Parts)
			}
		}
	}
	t.Fatal("stream ended without a message from the agent")
	return "", ""
}

func TestContinueLiveTask(t *testing.T) {
	t.Parallel()
	b := setup(t, chatAgent)
	id, got := streamUntilMessage(t, b, "alice", userText("", "hello"))
	if got != "got: hello" {
		t.Fatalf("first answer = %q, want %q", got, "got: hello")
	}
	// A message naming the live task goes to the sub-agent's inbox.
	id2, got := streamUntilMessage(t, b, "alice", userText(id, "more"))
	if id2 != id || got != "got: more" {
		t.Fatalf("second answer = %q on %s, want %q on %s", got, id2, "got: more", id)
	}
	res, err := b.client(t, "alice").SendMessage(t.Context(), userText(id, "bye"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state = %q, want completed", task.Status.State)
	}
	if dp, ok := task.Artifacts[0].Parts[0].(a2a.DataPart); !ok || dp.Data["messages"] != float64(3) {
		t.Errorf("artifact = %+v, want {messages: 3}", task.Artifacts[0].Parts)
	}
	var hist []string
	for _, m := range task.History {
		hist = append(hist, string(m.Role)+":"+textOf(m.Parts))
	}
	want := []string{"user:hello", "agent:got: hello", "user:more", "agent:got: more", "user:bye"}
	if !slices.Equal(hist, want) {
		t.Errorf("history = %q, want %q", hist, want)
	}
	// The task has ended: a further message is refused as for a terminal task.
	_, err = b.client(t, "alice").SendMessage(t.Context(), userText(id, "again"))
	if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), `is in a terminal state "completed"`) {
		t.Errorf("message to an ended task: %v, want an unsupported operation for a terminal state", err)
	}
}

func TestCancelCascadesToChildren(t *testing.T) {
	t.Parallel()
	started := make(chan string, 1)
	childErr := make(chan error, 1)
	agent := func(ctx context.Context, tk *bgtask.Task) (any, error) {
		self, err := tk.Agent()
		if err != nil {
			return nil, err
		}
		child, err := self.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done()
			childErr <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		if err != nil {
			return nil, err
		}
		started <- child
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b := setup(t, agent)
	c := b.client(t, "alice")

	params := userText("", "work")
	params.Config = &a2a.MessageSendConfig{Blocking: new(false)}
	res, err := c.SendMessage(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("non-blocking send: state %q, want working", task.Status.State)
	}
	child := <-started

	got, err := c.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("after cancel: state %q, want canceled", got.Status.State)
	}
	if cause := <-childErr; !errors.Is(cause, bgtask.ErrCanceled) {
		t.Errorf("child's cancel cause = %v, want ErrCanceled (parent)", cause)
	}
	rec, err := b.m.Wait(t.Context(), child)
	if err != nil || rec.Status != bgtype.StatusCanceled {
		t.Errorf("child record = %s, %v; want cancelled", rec.Status, err)
	}
	// Cancelling again returns the cancelled task.
	again, err := c.CancelTask(t.Context(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || again.Status.State != a2a.TaskStateCanceled {
		t.Errorf("second cancel: %v, %v; want the canceled task", again, err)
	}
}

func TestOtherOwnersTaskIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, chatAgent)
	id, _ := streamUntilMessage(t, b, "alice", userText("", "secret"))
	bob := b.client(t, "bob")
	const unknown = "task_00000000000000000000000000000000"

	ops := map[string]func(id a2a.TaskID) error{
		"tasks/get": func(id a2a.TaskID) error {
			_, err := bob.GetTask(t.Context(), &a2a.TaskQueryParams{ID: id})
			return err
		},
		"tasks/cancel": func(id a2a.TaskID) error {
			_, err := bob.CancelTask(t.Context(), &a2a.TaskIDParams{ID: id})
			return err
		},
		"message/send": func(id a2a.TaskID) error {
			_, err := bob.SendMessage(t.Context(), userText(id, "let me in"))
			return err
		},
	}
	for name, op := range ops {
		errOther, errUnknown := op(id), op(unknown)
		if !errors.Is(errOther, a2a.ErrTaskNotFound) {
			t.Errorf("%s of another owner's task: %v, want task not found", name, errOther)
			continue
		}
		// Exactly as for an unknown id: only the id given differs.
		if strings.ReplaceAll(errOther.Error(), string(id), unknown) != errUnknown.Error() {
			t.Errorf("%s: other owner's %q, unknown %q: want the same error", name, errOther, errUnknown)
		}
	}
	// Alice's task was untouched and still answers her.
	_, got := streamUntilMessage(t, b, "alice", userText(id, "still there"))
	if got != "got: still there" {
		t.Errorf("alice's task answered %q after bob's calls", got)
	}
}

func TestInputRequiredRoundTrip(t *testing.T) {
	t.Parallel()
	agent := func(ctx context.Context, tk *bgtask.Task) (any, error) {
		if _, err := (&messages{t: tk}).next(ctx); err != nil {
			return nil, err
		}
		answer, err := tk.RequestInput(ctx, "What is your name?")
		if err != nil {
			return nil, err
		}
		return "hello " + answer.Content, nil
	}
	b := setup(t, agent)
	c := b.client(t, "alice")

	res, err := c.SendMessage(t.Context(), userText("", "greet me"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateInputRequired || textOf(task.Status.Message.Parts) != "What is your name?" {
		t.Fatalf("status = %+v, want input-required with the prompt", task.Status)
	}
	res, err = c.SendMessage(t.Context(), userText(task.ID, "Ada"))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted || textOf(task.Artifacts[0].Parts) != "hello Ada" {
		t.Fatalf("after the answer: %q, artifacts %+v; want completed with %q", task.Status.State, task.Artifacts, "hello Ada")
	}
}

// rpc posts one JSON-RPC request as owner and returns the response body.
func rpc(t *testing.T, b *bundle, owner, method string, params any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.hs.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if owner != "" {
		req.Header.Set(ownerHeader, owner)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestBadRequestErrorCodes(t *testing.T) {
	t.Parallel()
	b := setup(t, echoAgent, WithMaxParts(2), WithMaxMessageBytes(10), WithMaxRequestBytes(1024))
	res, err := b.client(t, "alice").SendMessage(t.Context(), userText("", "done"))
	if err != nil {
		t.Fatal(err)
	}
	done := string(res.(*a2a.Task).ID)
	const unknown = "task_00000000000000000000000000000000"
	msg := func(taskID string, parts ...map[string]any) map[string]any {
		m := map[string]any{"kind": "message", "messageId": "m1", "role": "user", "parts": parts}
		if taskID != "" {
			m["taskId"] = taskID
		}
		return map[string]any{"message": m}
	}
	text := func(s string) map[string]any { return map[string]any{"kind": "text", "text": s} }

	tests := []struct {
		name   string
		method string
		params any
		code   int
		data   string
	}{
		{"no parts", "message/send", msg(""), -32602, "message has no parts: invalid params"},
		{"too many parts", "message/send", msg("", text("a"), text("b"), text("c")), -32602, "message has 3 parts, more than 2: invalid params"},
		{"text too long", "message/send", msg("", text("0123456789a")), -32602, "message text is longer than 10 bytes: invalid params"},
		{"not text", "message/send", msg("", map[string]any{"kind": "data", "data": map[string]any{"a": 1}}), -32005,
			"part 0 is not text: only text parts are accepted: incompatible content types"},
		{"unknown task", "message/send", msg(unknown, text("hi")), -32001, "task " + unknown + ": task not found"},
		{"ended task", "message/send", msg(done, text("hi")), -32004,
			"task " + done + ` is in a terminal state "completed" and takes no more messages: this operation is not supported`},
		{"get unknown", "tasks/get", map[string]any{"id": unknown}, -32001, "task " + unknown + ": task not found"},
		{"get no id", "tasks/get", map[string]any{}, -32602, "task id is required: invalid params"},
		{"cancel ended", "tasks/cancel", map[string]any{"id": done}, -32002, "task " + done + " is completed: task cannot be canceled"},
		{"stream no parts", "message/stream", msg(""), -32602, "message has no parts: invalid params"},
		{"request too large", "message/send", msg("", text(strings.Repeat("x", 1024))), -32600,
			"the request body is longer than 1024 bytes: invalid request"},
		{"push config", "tasks/pushNotificationConfig/get", map[string]any{"id": done}, -32003, "push notification not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rpc(t, b, "alice", tt.method, tt.params)
			if tt.method == "message/stream" { // one SSE event: "id: …", "data: {…}"
				for line := range strings.Lines(string(body)) {
					if d, ok := strings.CutPrefix(line, "data:"); ok {
						body = []byte(d)
					}
				}
			}
			var resp struct {
				Error *struct {
					Code int            `json:"code"`
					Data map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &resp); err != nil || resp.Error == nil {
				t.Fatalf("HTTP %d, body %s: want a JSON-RPC error", status, body)
			}
			if resp.Error.Code != tt.code || resp.Error.Data["error"] != tt.data {
				t.Errorf("error %d %q, want %d %q", resp.Error.Code, resp.Error.Data["error"], tt.code, tt.data)
			}
		})
	}
	// No owner: refused before any JSON-RPC handling.
	if status, _ := rpc(t, b, "", "tasks/get", map[string]any{"id": done}); status != http.StatusUnauthorized {
		t.Errorf("no owner: HTTP %d, want 401", status)
	}
}

func TestInputRequiredOverStreams(t *testing.T) {
	t.Parallel()
	agent := func(ctx context.Context, tk *bgtask.Task) (any, error) {
		if _, err := (&messages{t: tk}).next(ctx); err != nil {
			return nil, err
		}
		answer, err := tk.RequestInput(ctx, "Which file?")
		if err != nil {
			return nil, err
		}
		return "read " + answer.Content, nil
	}
	b := setup(t, agent)
	c := b.client(t, "alice")
	stream := func(params *a2a.MessageSendParams) []a2a.Event {
		var evs []a2a.Event
		for ev, err := range c.SendStreamingMessage(t.Context(), params) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}
	asked := stream(userText("", "read a file"))
	if want := []string{"task:working", "status:input-required:final"}; !slices.Equal(statesOf(asked), want) {
		t.Fatalf("first stream = %v, want %v", statesOf(asked), want)
	}
	if got := textOf(asked[1].(*a2a.TaskStatusUpdateEvent).Status.Message.Parts); got != "Which file?" {
		t.Errorf("prompt = %q, want %q", got, "Which file?")
	}
	answered := stream(userText(asked[0].(*a2a.Task).ID, "notes.txt"))
	if want := []string{"task:working", "artifact:result", "status:completed:final"}; !slices.Equal(statesOf(answered), want) {
		t.Fatalf("second stream = %v, want %v", statesOf(answered), want)
	}
	if got := textOf(answered[1].(*a2a.TaskArtifactUpdateEvent).Artifact.Parts); got != "read notes.txt" {
		t.Errorf("result = %q, want %q", got, "read notes.txt")
	}
}
