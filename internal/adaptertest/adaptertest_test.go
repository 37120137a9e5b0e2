package adaptertest

import (
	"bytes"
	"net/http"
	"testing"

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
	f.CheckCrawlerCancelled(t)

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
