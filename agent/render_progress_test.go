package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// get_task shows the record's progress and idempotency key, list_tasks the
// progress with its message cut; the task's text is escaped like every
// other (no raw <, > or &).
func TestToolsShowRecordProgress(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	msg := `</background-task-event> "q" & ü ` + strings.Repeat("x", 200)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		return nil, tk.ReportProgress(3, 10, msg)
	}, bgtask.WithIdempotencyKey("build-42"))
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
	full := `"progress":{"done":3,"total":10,"message":` + esc(msg) + `,"at":` + string(at) + `},"idempotency_key":"build-42"}`
	res := callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, nil)
	if !strings.Contains(string(res), full) || strings.ContainsAny(string(res), "<>&") {
		t.Errorf("get_task = %s\nwant it to hold %s", res, full)
	}
	cut := `"progress":{"done":3,"total":10,"message":` + esc(cutText(msg, listDescriptionMax)) + `,"at":` + string(at) + `}}`
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
	p := newTestPlugin(t, Config{})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	long := `"/><x a='1'>` + strings.Repeat("m", 300)
	tasks := []bgtype.TaskMeta{
		{ID: "task_01", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, Progress: &bgtype.Progress{Done: 3, Total: 10, Message: "half & <b>", At: at}},
		{ID: "task_02", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, Progress: &bgtype.Progress{Done: 7, Message: long, At: at}},
		{ID: "task_03", Type: bgtype.TypeTask, Status: bgtype.StatusQueued},
	}
	open := `<background-tasks nonce="` + p.nonce + `">`
	want := open + "\n" +
		`<task id="task_01" type="task" status="running" progress_done="3" progress_total="10" progress_message="half &amp; &lt;b&gt;"/>` + "\n" +
		`<task id="task_02" type="task" status="running" progress_done="7" progress_message="&quot;/&gt;&lt;x a=&#39;1&#39;&gt;` + strings.Repeat("m", viewFieldMax-12) + `…[truncated: 312 bytes total; use get_task]"/>` + "\n" +
		`<task id="task_03" type="task" status="queued"/>` + "\n" +
		"</background-tasks>"
	if got := p.renderView(tasks); got != want {
		t.Fatalf("view\n%s\nwant\n%s", got, want)
	}
}

// A live task reported progress twice within the write interval: its record
// holds the first report, memory the second. The prompt view, get_task and
// list_tasks show one progress, the latest, and not the report's event
// beside it as another value; an event of another type is shown apart.
func TestOneProgressShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr := newPluginRun(t)
		reported, step, release := make(chan error, 1), make(chan error, 1), make(chan struct{})
		id, err := pr.o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			if err := tk.ReportProgress(1, 10, "first"); err != nil {
				return nil, err
			}
			reported <- tk.ReportProgress(2, 10, "second")
			select {
			case <-release:
			case <-ctx.Done(): // the test failed: Shutdown
				return nil, ctx.Err()
			}
			step <- tk.Emit("step", "linking")
			<-ctx.Done()
			return nil, ctx.Err()
		}, bgtask.WithName("build"))
		if err != nil {
			t.Fatal(err)
		}
		if err := <-reported; err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first report is written; the second waits for the interval
		if rec := getTask(t, pr.o, id); rec.Progress == nil || rec.Progress.Done != 1 {
			t.Fatalf("record progress %+v, want the first report (the test needs them apart)", rec.Progress)
		}
		view := func() string {
			t.Helper()
			if err := pr.p.AfterToolCall(t.Context(), bgtask.ToolCall{}); err != nil {
				t.Fatal(err)
			}
			msgs, err := pr.p.BeforeInference(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Role == "user" && m.Ephemeral {
					_, line, _ := strings.Cut(m.Content, "\n")
					line, _, _ = strings.Cut(line, "\n")
					return line
				}
			}
			t.Fatal("no prompt view")
			return ""
		}
		progress := `progress_done="2" progress_total="10" progress_message="second"`
		if got, want := view(), `<task id="`+id+`" type="task" name="build" status="running" `+progress+`/>`; got != want {
			t.Fatalf("view line = %s\nwant        %s", got, want)
		}
		get := string(callTool(t, t.Context(), toolNamed(t, pr.o, "get_task"), `{"task_id":"`+id+`"}`, nil))
		list := string(callTool(t, t.Context(), toolNamed(t, pr.o, "list_tasks"), `{}`, nil))
		for name, out := range map[string]string{"get_task": get, "list_tasks": list} {
			if !strings.Contains(out, `"progress":{"done":2,"total":10,"message":"second",`) || strings.Contains(out, "latest_event") {
				t.Fatalf("%s = %s\nwant the second report as progress, once", name, out)
			}
		}

		close(release)
		if err := <-step; err != nil {
			t.Fatal(err)
		}
		want := `<task id="` + id + `" type="task" name="build" status="running" ` + progress + ` latest_event_type="step" latest_event="&quot;linking&quot;"/>`
		if got := view(); got != want {
			t.Fatalf("view line = %s\nwant        %s", got, want)
		}
		if _, err := pr.o.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		waitTask(t, pr.o, id)
	})
}
