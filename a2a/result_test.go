package bga2a

import (
	"context"
	"encoding/json"
	"github.com/bgtask/bgtask/internal/memstore"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// bigResult is a 200 KiB result, three times the record's default cap,
// with characters JSON escapes (quotes, HTML, newlines) and non-ASCII
// ones, so that any re-encoding on the way shows.
var bigResult = strings.Repeat("abc<&>\"é\n", 200<<10/10)

// resultAgent returns result once it has read its first message.
func resultAgent(result any) bgtask.Func {
	return func(ctx context.Context, t *bgtask.Task) (any, error) {
		if _, err := (&messages{t: t}).next(ctx); err != nil {
			return nil, err
		}
		return result, nil
	}
}

// wireArtifact is a result artifact as the wire carries it.
type wireArtifact struct {
	ID       string         `json:"artifactId"`
	Metadata map[string]any `json:"metadata"`
	Parts    []struct {
		Kind string         `json:"kind"`
		Text string         `json:"text"`
		Data map[string]any `json:"data"`
	} `json:"parts"`
}

// rpcResult decodes the result of a JSON-RPC response, failing on an error.
func rpcResult[T any](t *testing.T, body []byte) T {
	t.Helper()
	var resp struct {
		Result T               `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Error != nil {
		t.Fatalf("response %.300s: %v", body, err)
	}
	return resp.Result
}

// sseArtifacts returns the artifacts of the events of a server-sent event
// stream of JSON-RPC responses (artifact updates and tasks).
func sseArtifacts(t *testing.T, body []byte) []wireArtifact {
	t.Helper()
	var out []wireArtifact
	for line := range strings.Lines(string(body)) {
		d, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		ev := rpcResult[struct {
			Kind      string         `json:"kind"`
			Artifact  *wireArtifact  `json:"artifact"`
			Artifacts []wireArtifact `json:"artifacts"`
		}](t, []byte(d))
		if ev.Artifact != nil {
			out = append(out, *ev.Artifact)
		}
		out = append(out, ev.Artifacts...)
	}
	return out
}

// textMessage is the params of a message/send or message/stream of one
// text part, with the client's messageId.
func textMessage(messageID, taskID, text string) map[string]any {
	m := map[string]any{"kind": "message", "messageId": messageID, "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text}}}
	if taskID != "" {
		m["taskId"] = taskID
	}
	return map[string]any{"message": m}
}

// TestLargeResultIsWhole reads a 200 KiB result, over the record's cap,
// through each way a plain-HTTP JSON-RPC client gets an artifact: it is
// the function's string byte for byte, with no truncation mark.
func TestLargeResultIsWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, resultAgent(bigResult))
	sent := rpcResult[struct {
		ID        string         `json:"id"`
		Artifacts []wireArtifact `json:"artifacts"`
	}](t, rpcOK(t, b, "alice", "message/send", textMessage("m1", "", "go")))
	id := sent.ID
	rec, err := b.m.Owner("alice").Get(t.Context(), id)
	if err != nil || !strings.HasPrefix(string(rec.Result), `{"truncated":true`) {
		t.Fatalf("record result %.80s, %v: want the record's cut copy (the test needs a result over its cap)", rec.Result, err)
	}

	get := func() []wireArtifact {
		return rpcResult[struct {
			Artifacts []wireArtifact `json:"artifacts"`
		}](t, rpcOK(t, b, "alice", "tasks/get", map[string]any{"id": id})).Artifacts
	}
	tests := []struct {
		name      string
		artifacts func() []wireArtifact
	}{
		{"message/send", func() []wireArtifact { return sent.Artifacts }},
		{"tasks/get", get},
		{"message/stream", func() []wireArtifact {
			return sseArtifacts(t, rpcOK(t, b, "alice", "message/stream", textMessage("m2", "", "go")))
		}},
		{"tasks/resubscribe", func() []wireArtifact {
			return sseArtifacts(t, rpcOK(t, b, "alice", "tasks/resubscribe", map[string]any{"id": id}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arts := tt.artifacts()
			if len(arts) != 1 || arts[0].ID != string(ResultArtifactID) || len(arts[0].Parts) != 1 || arts[0].Parts[0].Kind != "text" {
				t.Fatalf("artifacts = %.300v, want one result artifact of one text part", arts)
			}
			if got := arts[0].Parts[0].Text; got != bigResult {
				t.Errorf("artifact text: %d bytes, want the result's %d bytes (equal: false)", len(got), len(bigResult))
			}
			if arts[0].Metadata != nil {
				t.Errorf("metadata = %v, want none on a whole result", arts[0].Metadata)
			}
		})
	}
}

// TestLargeObjectResultIsWhole: an object result over the record's cap is
// the whole object, as a data part, through a2a-go's client.
func TestLargeObjectResultIsWhole(t *testing.T) {
	t.Parallel()
	want := map[string]any{"report": bigResult, "pages": float64(12)}
	b := setup(t, resultAgent(want))
	res, err := b.client(t, "alice").SendMessage(t.Context(), userText("", "go"))
	if err != nil {
		t.Fatal(err)
	}
	arts := res.(*a2a.Task).Artifacts
	if len(arts) != 1 || len(arts[0].Parts) != 1 {
		t.Fatalf("artifacts = %+v, want one of one part", arts)
	}
	data, ok := arts[0].Parts[0].(a2a.DataPart)
	if !ok || data.Data["report"] != bigResult || data.Data["pages"] != float64(12) || len(data.Data) != 2 {
		t.Errorf("part %T with %d keys, want the whole object as a data part", arts[0].Parts[0], len(data.Data))
	}
}

// TestCutResultIsMarked: where the whole result is not at hand, the
// artifact says it is cut (metadata, description, the marker at the end of
// its text) and gives the original size of the result's JSON.
func TestCutResultIsMarked(t *testing.T) {
	t.Parallel()
	size := jsonSize(t, bigResult)
	longObject := map[string]any{"a": strings.Repeat("x", 200<<10)}
	tests := []struct {
		name   string
		result any
		opts   []Option
		size   int    // original_bytes
		start  string // the start of the artifact's text
		max    int    // the artifact's text is at most this long
	}{
		{"over the artifact cap", bigResult, []Option{WithMaxArtifactBytes(100 << 10)}, size, "abc<&>\"é\n", 100 << 10},
		{"object over the artifact cap", longObject, []Option{WithMaxArtifactBytes(1000)}, jsonSize(t, longObject), `{"a":"xxx`, 1000},
		{"over the kept cap", bigResult, []Option{WithMaxKeptResultBytes(1 << 10)}, size, `"abc\u003c\u0026\u003e\"é\n`, 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, resultAgent(tt.result), tt.opts...)
			sent := rpcResult[struct {
				ID        string         `json:"id"`
				Artifacts []wireArtifact `json:"artifacts"`
			}](t, rpcOK(t, b, "alice", "message/send", textMessage("m1", "", "go")))
			got := rpcResult[struct {
				Artifacts []wireArtifact `json:"artifacts"`
			}](t, rpcOK(t, b, "alice", "tasks/get", map[string]any{"id": sent.ID}))
			for _, arts := range [][]wireArtifact{sent.Artifacts, got.Artifacts} {
				checkCut(t, arts, tt.size, tt.start, tt.max)
			}
		})
	}
}

// checkCut checks a cut result artifact.
func checkCut(t *testing.T, arts []wireArtifact, size int, start string, maxLen int) {
	t.Helper()
	if len(arts) != 1 || len(arts[0].Parts) != 1 || arts[0].Parts[0].Kind != "text" {
		t.Fatalf("artifacts = %.300v, want one of one text part", arts)
	}
	a := arts[0]
	if a.Metadata[MetaTruncated] != true || a.Metadata[MetaOriginalBytes] != float64(size) || len(a.Metadata) != 2 {
		t.Errorf("metadata = %v, want truncated true and original_bytes %d", a.Metadata, size)
	}
	text := a.Parts[0].Text
	marker := "…[truncated: "
	if !strings.HasPrefix(text, start) || !strings.Contains(text, marker) || !strings.HasSuffix(text, " bytes total]") || len(text) > maxLen {
		t.Errorf("text (%d bytes) = %.40q…%q, want the start %q, the marker, at most %d bytes",
			len(text), text, text[max(0, len(text)-40):], start, maxLen)
	}
}

// TestCutResultAfterRestart: a new Manager and server on the same store
// (a restart) have only the record's cut copy: the artifact says so.
func TestCutResultAfterRestart(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	owner := WithOwner("alice")
	serve := func() (*bgtask.Manager, *Server, *httptest.Server) {
		m, err := bgtask.New(bgtask.WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(m, resultAgent(bigResult), Card{Name: "test agent"}, owner)
		if err != nil {
			t.Fatal(err)
		}
		return m, srv, httptest.NewServer(srv.Handler())
	}
	stop := func(m *bgtask.Manager, srv *Server, hs *httptest.Server) {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
		hs.Close()
	}
	m1, srv1, hs1 := serve()
	b1 := &bundle{m: m1, srv: srv1, hs: hs1}
	sent := rpcResult[struct {
		ID        string         `json:"id"`
		Artifacts []wireArtifact `json:"artifacts"`
	}](t, rpcOK(t, b1, "", "message/send", textMessage("m1", "", "go")))
	if len(sent.Artifacts) != 1 || sent.Artifacts[0].Parts[0].Text != bigResult {
		t.Fatalf("before the restart: want the whole result")
	}
	stop(m1, srv1, hs1)

	m2, srv2, hs2 := serve()
	defer stop(m2, srv2, hs2)
	got := rpcResult[struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []wireArtifact `json:"artifacts"`
	}](t, rpcOK(t, &bundle{m: m2, srv: srv2, hs: hs2}, "", "tasks/get", map[string]any{"id": sent.ID}))
	if got.Status.State != "completed" {
		t.Fatalf("state after the restart = %q, want completed", got.Status.State)
	}
	checkCut(t, got.Artifacts, jsonSize(t, bigResult), `"abc\u003c\u0026\u003e\"é\n`, 64<<10)
}

// rpcOK posts one JSON-RPC request as owner and returns the body of its
// HTTP 200 response.
func rpcOK(t *testing.T, b *bundle, owner, method string, params any) []byte {
	t.Helper()
	status, body := rpc(t, b, owner, method, params)
	if status != http.StatusOK {
		t.Fatalf("%s: HTTP %d %.300s", method, status, body)
	}
	return body
}

// jsonSize is the size of v as JSON, as bgtask encodes a result.
func jsonSize(t *testing.T, v any) int {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}

// TestKeptResultsOldestForgotten: past WithMaxKeptResultBytes the oldest
// whole result is forgotten first; its task then shows the record's cut
// copy, marked, and the newer one stays whole.
func TestKeptResultsOldestForgotten(t *testing.T) {
	t.Parallel()
	size := jsonSize(t, bigResult)
	b := setup(t, resultAgent(bigResult), WithMaxKeptResultBytes(size+size/2))
	send := func() string {
		return rpcResult[struct {
			ID string `json:"id"`
		}](t, rpcOK(t, b, "alice", "message/send", textMessage("m", "", "go"))).ID
	}
	older, newer := send(), send()
	get := func(id string) []wireArtifact {
		return rpcResult[struct {
			Artifacts []wireArtifact `json:"artifacts"`
		}](t, rpcOK(t, b, "alice", "tasks/get", map[string]any{"id": id})).Artifacts
	}
	checkCut(t, get(older), size, `"abc\u003c\u0026\u003e\"é\n`, 64<<10)
	if arts := get(newer); len(arts) != 1 || arts[0].Parts[0].Text != bigResult || arts[0].Metadata != nil {
		t.Errorf("the newer task's artifact is not the whole result")
	}
}

// TestKeptSettle: a kept result is dropped once the task's end shows the
// record holds it whole, or that the task did not complete; it stays while
// the record holds only its cut copy.
func TestKeptSettle(t *testing.T) {
	t.Parallel()
	cutCopy := json.RawMessage(`{"truncated":true,"original_bytes":9,"preview":"\"abc"}`)
	tests := []struct {
		name      string
		completed bool
		recorded  json.RawMessage
		kept      bool
	}{
		{"record holds it whole", true, json.RawMessage(`"abcdefg"`), false},
		{"record holds a cut copy", true, cutCopy, true},
		{"not completed", false, cutCopy, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKept(1 << 10)
			k.put("task_a", keptResult{raw: json.RawMessage(`"abcdefg"`)})
			k.settle("task_a", tt.completed, tt.recorded)
			if _, ok := k.get("task_a"); ok != tt.kept {
				t.Errorf("kept = %v, want %v", ok, tt.kept)
			}
			if _, bytes := k.c.Len(); bytes != map[bool]int64{true: 9, false: 0}[tt.kept] {
				t.Errorf("bytes = %d, want %d", bytes, map[bool]int64{true: 9, false: 0}[tt.kept])
			}
		})
	}
}
