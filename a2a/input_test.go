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

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// historyOfTask is tasks/get's history, as ids, roles and texts.
func historyOfTask(t *testing.T, b *bundle, owner, id string, length int) []string {
	t.Helper()
	task := rpcResult[struct {
		History []struct {
			ID    string `json:"messageId"`
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"history"`
	}](t, rpcOK(t, b, owner, "tasks/get", map[string]any{"id": id, "historyLength": length}))
	var out []string
	for _, m := range task.History {
		text := ""
		if len(m.Parts) > 0 {
			text = m.Parts[0].Text
		}
		out = append(out, m.ID+" "+m.Role+" "+text)
	}
	return out
}

// TestHistoryKeepsClientMessageID: the messages a client sends keep its
// messageId in the task's history, in the first reply and in tasks/get,
// for the message that starts a task and for one that continues it; the
// agent's own messages have ids of their own.
func TestHistoryKeepsClientMessageID(t *testing.T) {
	t.Parallel()
	b := setup(t, chatAgent)
	c := b.client(t, "alice")
	// chat streams a message with the client's id, up to the agent's answer.
	chat := func(taskID a2a.TaskID, messageID, text string) *a2a.Task {
		params := userText(taskID, text)
		params.Message.ID = messageID
		var first *a2a.Task
		for ev, err := range c.SendStreamingMessage(t.Context(), params) {
			if err != nil {
				t.Fatal(err)
			}
			if task, ok := ev.(*a2a.Task); ok {
				first = task
			}
			if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && u.Status.Message != nil {
				break
			}
		}
		return first
	}
	first := chat("", "client-msg-1", "hello")
	if h := first.History; len(h) != 1 || h[0].ID != "client-msg-1" {
		t.Errorf("history of the stream's task = %v, want the client's message client-msg-1", idsOf(h))
	}
	id := string(first.ID)
	// The agent's first answer may be recorded in the history just after
	// the first stream showed it: tasks/get below checks the whole history.
	if h := chat(first.ID, "client-msg-2", "again").History; len(h) < 2 || h[0].ID != "client-msg-1" || h[len(h)-1].ID != "client-msg-2" {
		t.Errorf("history of the second stream's task = %v, want the client's message client-msg-2 last", idsOf(h))
	}
	rpcOK(t, b, "alice", "message/send", textMessage("client-msg-3", id, "bye"))

	got := historyOfTask(t, b, "alice", id, 10)
	if len(got) != 5 {
		t.Fatalf("history = %q, want 5 messages", got)
	}
	want := []string{"client-msg-1 user hello", "agent got: hello", "client-msg-2 user again", "agent got: again", "client-msg-3 user bye"}
	for i := range got {
		if i%2 == 1 { // the agent's: an id of its own
			id, rest, _ := strings.Cut(got[i], " ")
			if !strings.HasPrefix(id, "msg_") {
				t.Errorf("agent message id %q, want a msg_ id", id)
			}
			got[i] = rest
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("history = %q, want %q", got, want)
	}
	if last := historyOfTask(t, b, "alice", id, 1); !slices.Equal(last, []string{"client-msg-3 user bye"}) {
		t.Errorf("historyLength 1 = %q, want the last message", last)
	}
}

// idsOf lists the ids of messages.
func idsOf(ms []*a2a.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestDuplicateMessageIDOtherOwner: another owner's message with the same
// messageId starts that owner's own task, with its own history; neither
// owner sees the other's message, and the reply is what a fresh id gets.
func TestDuplicateMessageIDOtherOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, echoAgent)
	type reply struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []wireArtifact `json:"artifacts"`
	}
	alice := rpcResult[reply](t, rpcOK(t, b, "alice", "message/send", textMessage("same-id", "", "secret of alice")))
	bob := rpcResult[reply](t, rpcOK(t, b, "bob", "message/send", textMessage("same-id", "", "bob here")))
	fresh := rpcResult[reply](t, rpcOK(t, b, "bob", "message/send", textMessage("fresh-id", "", "bob here")))
	if alice.ID == bob.ID || bob.Status.State != "completed" || bob.Artifacts[0].Parts[0].Text != "echo: bob here" ||
		fresh.Artifacts[0].Parts[0].Text != bob.Artifacts[0].Parts[0].Text {
		t.Errorf("bob's reply with alice's messageId = %+v, want his own completed task like %+v", bob, fresh)
	}
	if got := historyOfTask(t, b, "bob", bob.ID, 10); !slices.Equal(got, []string{"same-id user bob here"}) {
		t.Errorf("bob's history = %q", got)
	}
	if got := historyOfTask(t, b, "alice", alice.ID, 10); !slices.Equal(got, []string{"same-id user secret of alice"}) {
		t.Errorf("alice's history = %q", got)
	}
	// bob cannot read alice's task, exactly as an unknown one.
	_, other := rpc(t, b, "bob", "tasks/get", map[string]any{"id": alice.ID})
	_, unknown := rpc(t, b, "bob", "tasks/get", map[string]any{"id": "task_00000000000000000000000000000000"})
	if got, want := strings.ReplaceAll(string(other), alice.ID, "ID"), strings.ReplaceAll(string(unknown), "task_00000000000000000000000000000000", "ID"); got != want {
		t.Errorf("bob getting alice's task: %s, want as an unknown task: %s", got, want)
	}
	// A messageId over the cap is refused, nothing started.
	_, body := rpc(t, b, "bob", "message/send", textMessage(strings.Repeat("m", maxMessageIDBytes+1), "", "hi"))
	if !strings.Contains(string(body), `"code":-32602`) || !strings.Contains(string(body), "messageId is longer than 1024 bytes: invalid params") {
		t.Errorf("long messageId: %s, want an invalid-params error", body)
	}
}

// TestSecuritySchemeInCard: the card declares the schemes of
// WithSecurityScheme and their requirements; a request without the
// credential gets 401; a2a-go's client with it works.
func TestSecuritySchemeInCard(t *testing.T) {
	t.Parallel()
	b := setup(t, echoAgent,
		WithSecurityScheme("owner-header", a2a.APIKeySecurityScheme{In: a2a.APIKeySecuritySchemeInHeader, Name: ownerHeader}),
		WithSecurityScheme("oauth", a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT"}, "tasks"))
	resp, err := http.Get(b.hs.URL + AgentCardPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("card: HTTP %d, %v", resp.StatusCode, err)
	}
	var card struct {
		SecuritySchemes json.RawMessage `json:"securitySchemes"`
		Security        json.RawMessage `json:"security"`
	}
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatal(err)
	}
	wantSchemes := `{"oauth":{"type":"http","bearerFormat":"JWT","scheme":"Bearer"},"owner-header":{"type":"apiKey","in":"header","name":"X-Test-Owner"}}`
	if got := compact(t, card.SecuritySchemes); got != wantSchemes {
		t.Errorf("securitySchemes = %s, want %s", got, wantSchemes)
	}
	if got, want := compact(t, card.Security), `[{"owner-header":[]},{"oauth":["tasks"]}]`; got != want {
		t.Errorf("security = %s, want %s", got, want)
	}
	// The card a client reads decodes into a2a-go's types.
	var parsed a2a.AgentCard
	if err := json.Unmarshal(raw, &parsed); err != nil || len(parsed.SecuritySchemes) != 2 {
		t.Errorf("a2a-go reads the card: %v, %d schemes", err, len(parsed.SecuritySchemes))
	}
	if status, body := rpc(t, b, "", "tasks/get", map[string]any{"id": "task_1"}); status != http.StatusUnauthorized {
		t.Errorf("without the credential: HTTP %d %s, want 401", status, body)
	}
	res, err := b.client(t, "alice").SendMessage(t.Context(), userText("", "hi"))
	if err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Errorf("with the credential: %v, %v; want completed", res, err)
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return buf.String()
}

// TestSecuritySchemeBadOptions: what WithSecurityScheme refuses.
func TestSecuritySchemeBadOptions(t *testing.T) {
	t.Parallel()
	key := a2a.APIKeySecurityScheme{In: a2a.APIKeySecuritySchemeInHeader, Name: "X-Key"}
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"blank name", []Option{WithSecurityScheme(" ", key)}, "bga2a: WithSecurityScheme: blank scheme name"},
		{"nil scheme", []Option{WithSecurityScheme("key", nil)}, `bga2a: WithSecurityScheme("key"): nil scheme`},
		{"twice", []Option{WithSecurityScheme("key", key), WithSecurityScheme("key", key)}, `bga2a: WithSecurityScheme("key"): scheme declared twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t)
			srv, err := New(m, echoAgent, Card{Name: "x"}, append(tt.opts, WithOwner("alice"))...)
			if err == nil || err.Error() != tt.want || srv != nil {
				t.Errorf("New = %v, %v; want error %q", srv, err, tt.want)
			}
		})
	}
}

// postRaw posts body as alice and returns the JSON-RPC error code and
// detail of the response (0 and "" for a result).
func postRaw(t *testing.T, b *bundle, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.hs.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ownerHeader, "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d %.300s, %v", resp.StatusCode, out, err)
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
			Data struct {
				Error string `json:"error"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("response %.300s: %v", out, err)
	}
	if r.Error == nil {
		return 0, ""
	}
	return r.Error.Code, r.Error.Data.Error
}

// TestBadInputKeepsServing: malformed JSON, JSON nested 100,000 deep and a
// body over the cap each get a JSON-RPC error, and the server then answers
// a valid call. A body of exactly the cap is read, one byte more refused,
// whatever the byte.
func TestBadInputKeepsServing(t *testing.T) {
	t.Parallel()
	const limit = 4096
	b := setup(t, echoAgent, WithMaxRequestBytes(limit))
	get := func(pad int) []byte { // a tasks/get of an unknown task, padded with spaces to a size
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task_00000000000000000000000000000000"}}`)
		return append(body, bytes.Repeat([]byte(" "), pad-len(body))...)
	}
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	tests := []struct {
		name   string
		body   []byte
		code   int
		detail string
	}{
		{"malformed", []byte(`{"jsonrpc":"2.0","id":1,"method":`), -32700, "parse error: unexpected EOF"},
		{"not an object", []byte(`[1,2]`), -32700, "parse error: json: cannot unmarshal array into Go value of type a2asrv.jsonrpcRequest"},
		{"deep", []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":` + deep + `}`), -32600,
			"the request body is longer than 4096 bytes: invalid request"},
		{"at the cap", get(limit), -32001, "task task_00000000000000000000000000000000: task not found"},
		{"a space over the cap", get(limit + 1), -32600, "the request body is longer than 4096 bytes: invalid request"},
		{"much over the cap", get(10 * limit), -32600, "the request body is longer than 4096 bytes: invalid request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, detail := postRaw(t, b, tt.body); code != tt.code || detail != tt.detail {
				t.Errorf("error %d %q, want %d %q", code, detail, tt.code, tt.detail)
			}
			res, err := b.client(t, "alice").SendMessage(t.Context(), userText("", "still here"))
			if err != nil || textOf(res.(*a2a.Task).Artifacts[0].Parts) != "echo: still here" {
				t.Errorf("a valid call after it: %v, %v", res, err)
			}
		})
	}
	// Nested 100,000 deep within the cap: a parse error.
	big := setup(t, echoAgent, WithMaxRequestBytes(1<<20))
	if code, detail := postRaw(t, big, []byte(deep)); code != -32700 || detail != "parse error: invalid character '[' exceeded max depth" {
		t.Errorf("deep JSON within the cap: %d %q, want a parse error", code, detail)
	}
	if res, err := big.client(t, "alice").SendMessage(t.Context(), userText("", "still here")); err != nil || errors.Is(err, a2a.ErrServerError) {
		t.Errorf("a valid call after deep JSON: %v, %v", res, err)
	}
}

// newManager is a Manager shut down at the end of the test.
func newManager(t *testing.T) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// TestAnswerKeepsClientMessageID: the client's answer to an input request
// keeps its messageId in the history too.
func TestAnswerKeepsClientMessageID(t *testing.T) {
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
	asked := rpcResult[struct {
		ID string `json:"id"`
	}](t, rpcOK(t, b, "alice", "message/send", textMessage("ask-1", "", "read a file")))
	answered := rpcResult[struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}](t, rpcOK(t, b, "alice", "message/send", textMessage("answer-1", asked.ID, "notes.txt")))
	if answered.Status.State != "completed" {
		t.Fatalf("state after the answer = %q, want completed", answered.Status.State)
	}
	if got, want := historyOfTask(t, b, "alice", asked.ID, 10), []string{"ask-1 user read a file", "answer-1 user notes.txt"}; !slices.Equal(got, want) {
		t.Errorf("history = %q, want %q", got, want)
	}
}

// A 401 carries WWW-Authenticate (RFC 9110 §11.6.1): a challenge per
// declared scheme, in order, with the card's name as realm and a token
// scheme's scopes; a Bearer challenge when none is declared.
func TestUnauthorizedChallenge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"no scheme", nil, []string{`Bearer realm="test agent"`}},
		{"bearer with scopes", []Option{WithSecurityScheme("jwt", a2a.HTTPAuthSecurityScheme{Scheme: "bearer", BearerFormat: "JWT"}, "tasks", "read")},
			[]string{`Bearer realm="test agent", scope="tasks read"`}},
		{"api key then oauth2", []Option{
			WithSecurityScheme("key", a2a.APIKeySecurityScheme{In: a2a.APIKeySecuritySchemeInHeader, Name: ownerHeader}),
			WithSecurityScheme("oauth", &a2a.OAuth2SecurityScheme{}, "tasks"),
		}, []string{`APIKey realm="test agent", in="header", name="X-Test-Owner"`, `Bearer realm="test agent", scope="tasks"`}},
		{"basic and mutual TLS", []Option{
			WithSecurityScheme("tls", a2a.MutualTLSSecurityScheme{}),
			WithSecurityScheme("basic", a2a.HTTPAuthSecurityScheme{Scheme: "Basic"}),
		}, []string{`Basic realm="test agent"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, echoAgent, tc.opts...)
			resp, err := http.Post(b.hs.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task_1"}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !slices.Equal(got, tc.want) {
				t.Errorf("HTTP %d, WWW-Authenticate %q, want 401 with %q", resp.StatusCode, got, tc.want)
			}
		})
	}
}
