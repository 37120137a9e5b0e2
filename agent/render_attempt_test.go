package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// A resumable task shows its attempt, where it resumed from and why, in
// the prompt view and get_task; a closure shows none of it.
func TestAttemptView(t *testing.T) {
	t.Parallel()
	saved := time.Date(2026, 11, 28, 13, 58, 0, 0, time.UTC)
	resumed := time.Date(2026, 11, 28, 14, 2, 0, 0, time.UTC)
	meta := bgtype.TaskMeta{
		ID: "task_1", Owner: "thread-1", Type: "task", Status: bgtype.StatusRunning, Attempt: 3,
		Resume: &bgtype.Resume{Kind: "crawl/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, Checkpoint: json.RawMessage(`{"page":4}`),
			SavedAt: saved, SavedBy: 1, Yields: 1, ResumedAt: resumed, LastError: `the runtime that ran it (instance "a") is gone`},
	}
	var b strings.Builder
	viewLine(&b, &meta, bgtask.LatestEvent{})
	want := `<task id="task_1" type="task" status="running" attempt="2 of 3" resumed="at 2026-11-28T14:02:00Z from a checkpoint of 2026-11-28T13:58:00Z" last_error="the runtime that ran it (instance &quot;a&quot;) is gone"/>` + "\n"
	if b.String() != want {
		t.Fatalf("view line\n%s\nwant\n%s", b.String(), want)
	}
	js, _ := json.Marshal(fullView(meta))
	for _, frag := range []string{`"attempt":2`, `"max_attempts":3`, `"resumed_at":"2026-11-28T14:02:00Z"`, `"checkpoint_at":"2026-11-28T13:58:00Z"`, `"last_error":"the runtime that ran it (instance \"a\") is gone"`} {
		if !strings.Contains(string(js), frag) {
			t.Errorf("get_task %s lacks %s", js, frag)
		}
	}
	if strings.Contains(string(js), "page") {
		t.Errorf("get_task shows the checkpoint itself: %s", js)
	}
	meta.Resume = nil
	b.Reset()
	viewLine(&b, &meta, bgtask.LatestEvent{})
	js, _ = json.Marshal(fullView(meta))
	if strings.Contains(b.String(), "attempt") || strings.Contains(string(js), "attempt") {
		t.Fatalf("a closure shows attempts: %s %s", b.String(), js)
	}
}
