package bgmcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// userKey is the ctx key of the host's authentication middleware.
type userKey struct{}

// bearerAuth is a host's own authentication middleware: a known bearer
// token puts its user on the request's ctx, anything else is 401.
func bearerAuth(users map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// userOwner is the owner function of a host with bearerAuth.
func userOwner(ctx context.Context, _ *mcp.ServerSession) (string, error) {
	user, _ := ctx.Value(userKey{}).(string)
	return user, nil
}

// httpClient is a raw JSON-RPC client over plain net/http: one token, and
// the session id it was given (or stole).
type httpClient struct {
	t       *testing.T
	url     string
	token   string
	session string
	nextID  int
}

// httpReply is one HTTP exchange: its status, the JSON-RPC response in its
// body (JSON or server-sent events), and the body itself.
type httpReply struct {
	status int
	resp   struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body string
}

// do sends one HTTP request to the server.
func (c *httpClient) do(method string, msg any) httpReply {
	c.t.Helper()
	var body io.Reader
	if msg != nil {
		body = bytes.NewReader(mustJSON(c.t, msg))
	}
	req, err := http.NewRequest(method, c.url, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	var r httpReply
	r.status = res.StatusCode
	if method == http.MethodGet { // a stream: only its start matters
		return r
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r.body = string(b)
	data := b
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				data = []byte(d)
			}
		}
	}
	if len(data) > 0 {
		_ = json.Unmarshal(data, &r.resp)
	}
	if c.session == "" {
		c.session = res.Header.Get("Mcp-Session-Id")
	}
	return r
}

// post sends one JSON-RPC request.
func (c *httpClient) post(method string, params any) httpReply {
	c.t.Helper()
	c.nextID++
	return c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
}

// result sends a request and returns its result, failing the test on
// anything else.
func (c *httpClient) result(method string, params any) json.RawMessage {
	c.t.Helper()
	r := c.post(method, params)
	if r.status != http.StatusOK || r.resp.Error != nil || r.resp.Result == nil {
		c.t.Fatalf("%s: %d %s", method, r.status, r.body)
	}
	return r.resp.Result
}

// open opens a session.
func (c *httpClient) open() {
	c.t.Helper()
	c.result("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw-http", "version": "0"},
	})
	if c.session == "" {
		c.t.Fatal("initialize: no Mcp-Session-Id")
	}
	if r := c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %d %s", r.status, r.body)
	}
}

// Two users, two tokens, one stolen session id: every request of the thief
// on the victim's session is refused with 403 and a text that names no
// one, whatever it asks; the victim's session and tasks are untouched.
func TestStolenSession(t *testing.T) {
	tools := newTestTools()
	s := newServer(t, newManager(t), tools, bgmcp.WithOwnerFunc(userOwner))
	srv := httptest.NewServer(bearerAuth(map[string]string{"tok-alice": "alice", "tok-bob": "bob"}, s.Handler()))
	t.Cleanup(srv.Close)

	alice := &httpClient{t: t, url: srv.URL, token: "tok-alice"}
	alice.open()
	t.Cleanup(func() { alice.do(http.MethodDelete, nil) })
	var slow, echo struct{ Task task }
	decode(t, alice.result("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"text": "a"}, "task": map[string]any{}}), &slow)
	<-tools.started
	decode(t, alice.result("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "secret"}, "task": map[string]any{}}), &echo)
	alice.result("tasks/result", map[string]any{"taskId": echo.Task.TaskID}) // echo has ended

	bob := &httpClient{t: t, url: srv.URL, token: "tok-bob"}
	bob.open() // bob is a user too, with a session of his own
	t.Cleanup(func() { bob.do(http.MethodDelete, nil) })
	thief := &httpClient{t: t, url: srv.URL, token: "tok-bob", session: alice.session}
	for _, tc := range []struct {
		method string
		params any
	}{
		{"tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}},
		{"tools/call", map[string]any{"name": "list_tasks", "arguments": map[string]any{}}},
		{"tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{}}},
		{"tasks/get", map[string]any{"taskId": slow.Task.TaskID}},
		{"tasks/list", map[string]any{}},
		{"tasks/cancel", map[string]any{"taskId": slow.Task.TaskID}},
		{"tasks/result", map[string]any{"taskId": echo.Task.TaskID}},
	} {
		r := thief.post(tc.method, tc.params)
		if r.status != http.StatusForbidden || r.resp.Error == nil || r.resp.Error.Code != -32600 || r.resp.Error.Message != "bgmcp: this session belongs to another caller" {
			t.Errorf("thief %s: %d %s", tc.method, r.status, r.body)
		}
		if strings.Contains(r.body, "alice") || strings.Contains(r.body, slow.Task.TaskID) || strings.Contains(r.body, "secret") {
			t.Errorf("thief %s: the answer tells of alice: %s", tc.method, r.body)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if r := thief.do(method, nil); r.status != http.StatusForbidden {
			t.Errorf("thief %s: %d %s", method, r.status, r.body)
		}
	}

	// Alice still has her session and her tasks, the slow one running.
	var got task
	decode(t, alice.result("tasks/get", map[string]any{"taskId": slow.Task.TaskID}), &got)
	if got.Status != "working" {
		t.Errorf("alice's slow task: %+v", got)
	}
	var list struct{ Tasks []task }
	decode(t, alice.result("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 2 {
		t.Errorf("alice lists %d tasks, want 2", len(list.Tasks))
	}
	close(tools.release)
	var p payload
	decode(t, alice.result("tasks/result", map[string]any{"taskId": slow.Task.TaskID}), &p)
	if p.IsError || p.Content[0].Text != `{"done":"a"}` {
		t.Errorf("alice's result: %+v", p)
	}
	// Bob's own session sees none of alice's tasks.
	decode(t, bob.result("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 0 {
		t.Errorf("bob lists %d tasks, want 0", len(list.Tasks))
	}
}

// A session whose owner could not be found when it opened (the owner
// function failed once) becomes its next caller's: a thief who takes it
// acts as himself, never as the user who opened it, and that user is
// then refused.
func TestSessionOwnerUnknownAtOpen(t *testing.T) {
	var failOnce atomic.Bool
	owner := func(ctx context.Context, ss *mcp.ServerSession) (string, error) {
		if failOnce.CompareAndSwap(true, false) {
			return "", errors.New("user directory unavailable")
		}
		return userOwner(ctx, ss)
	}
	tools := newTestTools()
	close(tools.release)
	s := newServer(t, newManager(t), tools, bgmcp.WithOwnerFunc(owner))
	srv := httptest.NewServer(bearerAuth(map[string]string{"tok-alice": "alice", "tok-bob": "bob"}, s.Handler()))
	t.Cleanup(srv.Close)

	alice := &httpClient{t: t, url: srv.URL, token: "tok-alice"}
	alice.open()
	t.Cleanup(func() { alice.do(http.MethodDelete, nil) })
	alice.result("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "secret"}, "task": map[string]any{}})

	failOnce.Store(true)
	second := &httpClient{t: t, url: srv.URL, token: "tok-alice"}
	second.result("initialize", map[string]any{ // its owner is not known
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw-http", "version": "0"},
	})
	// The thief is the session's next caller.
	thief := &httpClient{t: t, url: srv.URL, token: "tok-bob", session: second.session}
	if r := thief.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", r.status, r.body)
	}
	var list struct{ Tasks []task }
	decode(t, thief.result("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 0 {
		t.Errorf("the thief lists %d tasks, want his own: 0", len(list.Tasks))
	}
	if r := second.post("tasks/list", map[string]any{}); r.status != http.StatusForbidden || r.resp.Error == nil || r.resp.Error.Message != "bgmcp: this session belongs to another caller" {
		t.Errorf("alice on the taken session: %d %s", r.status, r.body)
	}
	thief.do(http.MethodDelete, nil)
}
