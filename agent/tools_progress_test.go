package agent

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// TestProgressInTools: list_tasks and get_task show a live task's latest
// progress, whatever its wake policy, and not once it has ended.
func TestProgressInTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		emitted, release := make(chan error, 1), make(chan struct{})
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			_ = tk.Emit("progress", map[string]int{"percent": 10})
			emitted <- tk.Emit("progress", map[string]int{"percent": 40})
			<-release
			return "done", nil
		}, bgtask.WithWake(bgtype.WakeSilent), bgtask.WithName("indexer"))
		if err != nil {
			t.Fatal(err)
		}
		if err := <-emitted; err != nil {
			t.Fatal(err)
		}
		progress := `"latest_event":{"event_type":"progress","payload":{"percent":40},"at":"2000-01-01T00:00:00Z","count":2}`
		list := callTool(t, t.Context(), toolNamed(t, o, "list_tasks"), `{}`, nil)
		want := `{"tasks":[{"task_id":"` + id + `","name":"indexer","task_type":"task","status":"running","description":"",` +
			`"created_at":"2000-01-01T00:00:00Z",` + progress + `}],"total":1}`
		if string(list) != want {
			t.Fatalf("list_tasks = %s\nwant %s", list, want)
		}
		get := callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, nil)
		want = `{"task":{"task_id":"` + id + `","name":"indexer","task_type":"task","status":"running","description":"",` +
			`"created_at":"2000-01-01T00:00:00Z","started_at":"2000-01-01T00:00:00Z",` + progress + `},"messages":[]}`
		if string(get) != want {
			t.Fatalf("get_task = %s\nwant %s", get, want)
		}
		close(release)
		waitTask(t, o, id)
		get = callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, nil)
		want = `{"task":{"task_id":"` + id + `","name":"indexer","task_type":"task","status":"completed","description":"",` +
			`"created_at":"2000-01-01T00:00:00Z","started_at":"2000-01-01T00:00:00Z","finished_at":"2000-01-01T00:00:00Z","result":"done"},"messages":[]}`
		if string(get) != want {
			t.Fatalf("get_task after the end = %s\nwant %s", get, want)
		}
	})
}

// TestProgressInPromptView: the prompt view shows a live task's latest
// progress, escaped, under every wake policy, silent included.
func TestProgressInPromptView(t *testing.T) {
	for _, wake := range []bgtype.WakePolicy{bgtype.WakeOnTerminal, bgtype.WakeOnActivity, bgtype.WakeSilent} {
		t.Run(string(wake), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				p, err := NewPlugin(m, "thread-1", Config{})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				emitted, release := make(chan error, 1), make(chan struct{})
				id, err := p.Owner().Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
					_ = tk.Emit("progress", map[string]int{"percent": 10})
					emitted <- tk.Emit("progress", map[string]string{"step": "<b>"})
					<-release
					return nil, nil
				}, bgtask.WithWake(wake), bgtask.WithName("indexer"))
				if err != nil {
					t.Fatal(err)
				}
				defer close(release)
				if err := <-emitted; err != nil {
					t.Fatal(err)
				}
				msgs, err := p.BeforeInference(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				want := `<task id="` + id + `" type="task" name="indexer" status="running" latest_event_type="progress" latest_event="{&quot;step&quot;:&quot;\u003cb\u003e&quot;}"/>`
				var view string
				for _, msg := range msgs {
					if msg.Role == "user" && msg.Ephemeral {
						view = msg.Content
					}
				}
				if !strings.Contains(view, want) {
					t.Fatalf("view = %s\nwant a line %s", view, want)
				}
			})
		})
	}
}
