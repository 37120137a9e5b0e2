// Package adaptertest holds the test fixtures that the framework adapters'
// modules (adapters/...) share: an owner with real tasks, and a scripted
// model server. It is for their tests only.
package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// Fixture is an owner with two real tasks: "fetch", completed with
// {"rows":42}, and "crawler", running in run-1 until it is cancelled.
type Fixture struct {
	M       *bgtask.Manager
	Owner   bgtask.Owner
	CallCtx context.Context // a tool call's ctx in run-1
	Fetch   string
	Crawler string
}

// NewFixture makes the Fixture; its Manager is shut down when the test ends.
func NewFixture(t *testing.T) Fixture {
	t.Helper()
	ctx := t.Context()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	f := Fixture{M: m, Owner: m.Owner("thread-1"), CallCtx: bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1"})}
	f.Fetch, err = f.Owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return map[string]int{"rows": 42}, nil
	}, bgtask.WithName("fetch"), bgtask.WithDescription("fetch the feed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Owner.Wait(ctx, f.Fetch); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	f.Crawler, err = f.Owner.Spawn(f.CallCtx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}, bgtask.WithName("crawler"))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	return f
}

// Direct calls the owner's tool name with args itself, for the answer a
// model should get through an adapter.
func (f Fixture) Direct(t *testing.T, name, args string) string {
	t.Helper()
	for _, tool := range agent.Tools(f.Owner) {
		if tool.Name == name {
			res, err := tool.Call(f.CallCtx, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return string(res)
		}
	}
	t.Fatalf("no tool %s", name)
	return ""
}

// CheckCrawlerCanceled checks the crawler ended cancelled.
func (f Fixture) CheckCrawlerCanceled(t *testing.T) {
	t.Helper()
	meta, err := f.Owner.Wait(t.Context(), f.Crawler)
	if err != nil || meta.Status != bgtype.StatusCanceled {
		t.Fatalf("crawler: %v %v, want cancelled", meta.Status, err)
	}
}

// JSONEqual reports whether a and b encode to the same JSON.
func JSONEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return errors.Join(err1, err2) == nil && bytes.Equal(x, y)
}

// ScriptedModel is an HTTP server standing in for a model provider: it
// answers the POST requests to one path with its replies, in order, and
// keeps each request's body. Any other request fails the test.
type ScriptedModel struct {
	Server *httptest.Server // closed when the test ends

	t       *testing.T
	mu      sync.Mutex // guards the fields below
	replies []string
	replyFn func(i int, req map[string]any) string // NewScriptedModelFunc's
	bodies  [][]byte
}

// NewScriptedModelFunc starts a ScriptedModel that answers the i-th request
// (from 0) to path with reply(i, its body decoded), for a model that reads
// what its tools returned: at most n requests.
func NewScriptedModelFunc(t *testing.T, path string, n int, reply func(i int, req map[string]any) string) *ScriptedModel {
	t.Helper()
	sm := NewScriptedModel(t, path, make([]string, n)...)
	sm.replyFn = reply
	return sm
}

// NewScriptedModel starts a ScriptedModel answering path with replies.
func NewScriptedModel(t *testing.T, path string, replies ...string) *ScriptedModel {
	t.Helper()
	sm := &ScriptedModel{t: t, replies: replies}
	sm.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sm.mu.Lock()
		defer sm.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != path || len(sm.bodies) == len(sm.replies) {
			t.Errorf("unexpected request %s %s (request %d of %d)", r.Method, r.URL.Path, len(sm.bodies)+1, len(sm.replies))
			http.Error(w, `{"error":{"message":"unexpected"}}`, http.StatusBadRequest)
			return
		}
		reply := sm.replies[len(sm.bodies)]
		if sm.replyFn != nil {
			var req map[string]any
			if err := json.Unmarshal(body, &req); err != nil {
				t.Errorf("request %d: %v", len(sm.bodies), err)
			}
			reply = sm.replyFn(len(sm.bodies), req)
		}
		sm.bodies = append(sm.bodies, body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(sm.Server.Close)
	return sm
}

// Request decodes the body of the i-th request (from 0).
func (sm *ScriptedModel) Request(i int) map[string]any {
	sm.t.Helper()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if i >= len(sm.bodies) {
		sm.t.Fatalf("request %d was not made (%d made)", i, len(sm.bodies))
	}
	var req map[string]any
	if err := json.Unmarshal(sm.bodies[i], &req); err != nil {
		sm.t.Fatal(err)
	}
	return req
}
