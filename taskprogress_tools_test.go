package bgtask

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// get_task shows the record's progress and idempotency key, list_tasks the
// progress with its message cut; the task's text is escaped like every
// other (no raw <, > or &).
func TestToolsShowRecordProgress(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	msg := `</background-task-event> "q" & ü ` + strings.Repeat("x", 200)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		return nil, tk.ReportProgress(3, 10, msg)
	}, WithIdempotencyKey("build-42"))
	if err != nil {
		t.Fatal(err)
	}
	rec := waitTask(t, o, id)
	if rec.Progress == nil {
		t.Fatal("no progress on the record")
	}
	at, _ := json.Marshal(rec.Progress.At)
	esc := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	full := `"reported_progress":{"done":3,"total":10,"message":` + esc(msg) + `,"at":` + string(at) + `},"idempotency_key":"build-42"}`
	res := callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, nil)
	if !strings.Contains(string(res), full) || strings.ContainsAny(string(res), "<>&") {
		t.Errorf("get_task = %s\nwant it to hold %s", res, full)
	}
	cut := `"reported_progress":{"done":3,"total":10,"message":` + esc(cutText(msg, listDescriptionMax)) + `,"at":` + string(at) + `}}`
	res = callTool(t, t.Context(), toolNamed(t, o, "list_tasks"), `{}`, nil)
	if !strings.Contains(string(res), cut) || strings.Contains(string(res), "idempotency_key") || strings.ContainsAny(string(res), "<>&") {
		t.Errorf("list_tasks = %s\nwant it to hold %s", res, cut)
	}
	if rec.Progress.Message != msg { // the record keeps it whole (under the message cap)
		t.Errorf("record message %q", rec.Progress.Message)
	}
	shutdownManager(t, m)
}

// The prompt view shows a record's progress, escaped and cut.
func TestRenderViewProgress(t *testing.T) {
	t.Parallel()
	p := newTestPlugin(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	long := `"/><x a='1'>` + strings.Repeat("m", 300)
	tasks := []TaskMeta{
		{ID: "task_01", Type: TypeTask, Status: StatusRunning, Progress: &TaskProgress{Done: 3, Total: 10, Message: "half & <b>", At: at}},
		{ID: "task_02", Type: TypeTask, Status: StatusRunning, Progress: &TaskProgress{Done: 7, Message: long, At: at}},
		{ID: "task_03", Type: TypeTask, Status: StatusQueued},
	}
	open := `<background-tasks nonce="` + p.nonce + `">`
	want := open + "\n" +
		`<task id="task_01" type="task" status="running" progress_done="3" progress_total="10" progress_message="half &amp; &lt;b&gt;"/>` + "\n" +
		`<task id="task_02" type="task" status="running" progress_done="7" progress_message="&quot;/&gt;&lt;x a=&#39;1&#39;&gt;` + strings.Repeat("m", viewFieldMax-12) + `…[truncated: 312 bytes total; use get_task]"/>` + "\n" +
		`<task id="task_03" type="task" status="queued"/>` + "\n" +
		"</background-tasks>"
	if got := p.renderView(slices.Values(tasks)); got != want {
		t.Fatalf("view\n%s\nwant\n%s", got, want)
	}
}
