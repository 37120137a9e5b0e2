package bgopenai_test

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

	"github.com/bgtask/bgtask"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// scriptedModel is an OpenAI-compatible HTTP server that answers the
// requests to path with replies, in order, and keeps each request's body.
type scriptedModel struct {
	t       *testing.T
	mu      sync.Mutex
	replies []string
	bodies  [][]byte
}

func newScriptedModel(t *testing.T, path string, replies ...string) (*scriptedModel, openai.Client) {
	t.Helper()
	sm := &scriptedModel{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sm.mu.Lock()
		defer sm.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != path || len(sm.bodies) == len(sm.replies) {
			t.Errorf("unexpected request %s %s (request %d of %d)", r.Method, r.URL.Path, len(sm.bodies)+1, len(sm.replies))
			http.Error(w, `{"error":{"message":"unexpected"}}`, http.StatusBadRequest)
			return
		}
		reply := sm.replies[len(sm.bodies)]
		sm.bodies = append(sm.bodies, body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	return sm, client
}

// request decodes the body of the i-th request (from 0).
func (sm *scriptedModel) request(i int) map[string]any {
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

// fixture is an owner with two real tasks: "fetch", completed with
// {"rows":42}, and "crawler", running in run-1 until it is cancelled.
type fixture struct {
	m       *bgtask.Manager
	owner   bgtask.Owner
	callCtx context.Context // a tool call's ctx in run-1
	fetch   string
	crawler string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := t.Context()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	f := fixture{m: m, owner: m.Owner("thread-1"), callCtx: bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1"})}
	f.fetch, err = f.owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return map[string]int{"rows": 42}, nil
	}, bgtask.WithName("fetch"), bgtask.WithDescription("fetch the feed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.owner.Wait(ctx, f.fetch); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	f.crawler, err = f.owner.Spawn(f.callCtx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
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

// direct calls the owner's tool name with args, as the expected answer.
func (f fixture) direct(t *testing.T, name, args string) string {
	t.Helper()
	for _, tool := range f.owner.Tools() {
		if tool.Name == name {
			res, err := tool.Call(f.callCtx, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return string(res)
		}
	}
	t.Fatalf("no tool %s", name)
	return ""
}

// checkCrawlerCancelled checks the crawler ended cancelled.
func (f fixture) checkCrawlerCancelled(t *testing.T) {
	t.Helper()
	meta, err := f.owner.Wait(t.Context(), f.crawler)
	if err != nil || meta.Status != bgtask.StatusCancelled {
		t.Fatalf("crawler: %v %v, want cancelled", meta.Status, err)
	}
}

// checkDefinitions checks that defs, the tool definitions a request sent
// (as decoded JSON), are the owner's tools in order, each with its
// description and its schema (as JSON values, whatever their key order),
// and strict as wantStrict. get picks a definition's name, description, parameters
// and strict flag.
func checkDefinitions(t *testing.T, owner bgtask.Owner, wantStrict bool, defs []any, get func(def map[string]any) (name, desc string, params, strict any)) {
	t.Helper()
	tools := owner.Tools()
	if len(defs) != len(tools) {
		t.Fatalf("%d tool definitions sent, want %d", len(defs), len(tools))
	}
	for i, tool := range tools {
		def, _ := defs[i].(map[string]any)
		name, desc, params, strict := get(def)
		var want any
		if err := json.Unmarshal(tool.Schema, &want); err != nil {
			t.Fatal(err)
		}
		if name != tool.Name || desc != tool.Description || !jsonEqual(params, want) || strict != wantStrict {
			t.Errorf("definition %d: name %q, description equal %v, schema equal %v, strict %v; want %s, its schema, strict %v",
				i, name, desc == tool.Description, jsonEqual(params, want), strict, tool.Name, wantStrict)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return errors.Join(err1, err2) == nil && bytes.Equal(x, y)
}
