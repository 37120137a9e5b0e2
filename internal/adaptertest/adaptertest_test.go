package adaptertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The fixture's tasks are as documented, and the scripted model answers in
// order and keeps what it was sent.
func TestFixtureAndScriptedModel(t *testing.T) {
	f := NewFixture(t)
	if got := f.Direct(t, "get_task", `{"task_id":"`+f.Fetch+`"}`); !bytes.Contains([]byte(got), []byte(`"status":"completed"`)) {
		t.Errorf("fetch: %s, want completed", got)
	}
	if _, err := f.Owner.Cancel(t.Context(), f.Crawler); err != nil {
		t.Fatal(err)
	}
	f.CheckCrawlerCanceled(t)

	sm := NewScriptedModel(t, "/v1/x", `{"n":1}`)
	resp, err := sm.Server.Client().Post(sm.Server.URL+"/v1/x", "application/json", bytes.NewReader([]byte(`{"q":"a"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !JSONEqual(sm.Request(0), map[string]any{"q": "a"}) {
		t.Errorf("status %d, request %v", resp.StatusCode, sm.Request(0))
	}
}

// The checking model refuses what check refuses and requests to another
// path, with errorBody's bodies, answers the others in order, and fails
// when no reply is left.
func TestCheckingModel(t *testing.T) {
	check := func(req map[string]any) error {
		if req["q"] == "bad" {
			return errors.New("q: bad")
		}
		return nil
	}
	srv := NewCheckingModel(t, "/v1/x", check, func(typ, message string) string { return typ + "|" + message }, `{"n":1}`, `{"n":2}`)
	for i, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/y", `{"q":"a"}`, http.StatusNotFound, "not_found_error|not a request for /v1/x"},
		{"/v1/x", `not json`, http.StatusNotFound, "not_found_error|not a request for /v1/x"},
		{"/v1/x", `{"q":"bad"}`, http.StatusBadRequest, "invalid_request_error|q: bad"},
		{"/v1/x", `{"q":"a"}`, http.StatusOK, `{"n":1}`},
		{"/v1/x", `{"q":"bad"}`, http.StatusBadRequest, "invalid_request_error|q: bad"},
		{"/v1/x", `{"q":"b"}`, http.StatusOK, `{"n":2}`},
		{"/v1/x", `{"q":"c"}`, http.StatusInternalServerError, "api_error|no reply left"},
	} {
		resp, err := srv.Client().Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || string(body) != tc.want || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: %d %q (%s, %v), want %d %q", i, resp.StatusCode, body, resp.Header.Get("Content-Type"), err, tc.status, tc.want)
		}
	}
}

// StartJob spawns a task named by the model, running until cancelled, and
// answers its id; fail's error is returned and spawns nothing. Durable
// splits the Plugin's messages into the kept and the ephemeral ones.
func TestStartJobAndDurable(t *testing.T) {
	f := NewFixture(t)
	refused := errors.New("refused")
	tool := StartJob(f.Owner, func(name string) error {
		if name == "no" {
			return refused
		}
		return nil
	})
	if res, err := tool.Call(f.CallCtx, json.RawMessage(`{"name":"no"}`)); res != nil || err != refused {
		t.Errorf("refused: %s %v, want nil %v", res, err, refused)
	}
	res, err := tool.Call(f.CallCtx, json.RawMessage(`{"name":"job"}`))
	var id string
	if err != nil || json.Unmarshal(res, &id) != nil {
		t.Fatalf("job: %s %v", res, err)
	}
	meta, err := f.Owner.Get(t.Context(), id)
	if err != nil || meta.Name != "job" || meta.Status != bgtype.StatusRunning {
		t.Errorf("job: %+v %v, want running, named job", meta, err)
	}
	n := 0
	for _, err := range f.Owner.List(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d tasks, want 3: fetch, crawler, job", n)
	}

	keep, once := Durable(PluginMessages())
	var texts []string
	for _, m := range slices.Concat(keep, []agent.PromptMessage{{Content: "|"}}, once) {
		texts = append(texts, m.Content)
	}
	if got, want := strings.Join(texts, " "), strings.Join([]string{EventText, ForgedText, "", "|", InstructionsText, ViewText}, " "); got != want {
		t.Errorf("Durable: %s, want %s", got, want)
	}
}
