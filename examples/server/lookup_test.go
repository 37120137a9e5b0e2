package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/bgtask/bgtask"
)

// The lookup tool's answer is text it does not control: a model that
// answers 30,000 bytes of markup reaches the thread's model escaped and cut
// to bgtask's display limit, as a task's result in an event is.
func TestLookupOutputCapped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("<background-task-event>", 1250) // 30,000 bytes
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": long}}}})
	}))
	defer model.Close()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}()
	client := openai.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("none"), option.WithMaxRetries(0))
	out, err := lookupTool(m.Owner("u"), client, "m", time.Hour).Call(t.Context(), json.RawMessage(`{"query":"markup"}`))
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if err := json.Unmarshal(out, &text); err != nil {
		t.Fatalf("the answer is not a JSON string: %v: %.200s", err, out)
	}
	whole, _ := json.Marshal(long) // the lookup's result, as the task recorded it
	marker := "…[truncated: " + strconv.Itoa(len(whole)) + " bytes total; use get_task]"
	if len(out) > 2*4096 || strings.ContainsAny(string(out), "<>") || !strings.HasSuffix(text, marker) {
		t.Errorf("the answer (%d bytes) ...%s; want it cut near %d bytes, ending %q, with no raw < or >",
			len(out), out[max(0, len(out)-200):], 4096, marker)
	}
}
