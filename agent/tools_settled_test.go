package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"
)

// A result cut by the record cap says so to the model in get_task and
// wait_task: truncated, its original size, and its start.
func TestGetTaskShowsTruncatedResult(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	big := strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB of text
	id, err := o.Spawn(t.Context(), func(context.Context, *bgtask.Task) (any, error) { return big, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Wait(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	var g getResult
	callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &g)
	var w waitResult
	callTool(t, t.Context(), toolNamed(t, o, "wait_task"), `{"task_id":"`+id+`","timeout_seconds":1}`, &w)
	for name, res := range map[string]json.RawMessage{"get_task": g.Task.Result, "wait_task": w.Task.Result} {
		var cut struct {
			Truncated     bool   `json:"truncated"`
			OriginalBytes int    `json:"original_bytes"`
			Preview       string `json:"preview"`
		}
		if err := json.Unmarshal(res, &cut); err != nil {
			t.Fatalf("%s result %.100s: %v", name, res, err)
		}
		if !cut.Truncated || cut.OriginalBytes != len(big)+2 || !strings.HasPrefix(`"`+big+`"`, cut.Preview) ||
			len(cut.Preview) < m.MaxResultBytes()-100 || len(res) > m.MaxResultBytes() {
			t.Errorf("%s result: truncated %v, original_bytes %d (want %d), preview of %d bytes, %d bytes in all",
				name, cut.Truncated, cut.OriginalBytes, len(big)+2, len(cut.Preview), len(res))
		}
	}
}
