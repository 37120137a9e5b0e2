package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// outputBytesVersion is the schema version that added the output_bytes
// column.
const outputBytesVersion = 10

// A database of the version before the output size opens: its rows read
// with OutputBytes 0, and a record that ends with a size keeps it across a
// reopen.
func TestMigrationAddsOutputBytes(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, outputBytesVersion-1)
	now := time.Now().UnixMicro() // age retention keeps it
	execSQL(t, db, `INSERT INTO tasks (id, owner, status, created_at, finished_at, terminal_seq, terminal_at)
		VALUES ('task_old', 'alice', 'completed', ?1, ?1, 1, ?1), ('task_live', 'alice', 'running', ?1, NULL, NULL, NULL)`, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path, sqlitestore.WithoutRecovery())
	for _, id := range []string{"task_old", "task_live"} {
		if got := get(t, s, id); got.OutputBytes != 0 {
			t.Fatalf("%s after the migration: OutputBytes %d, want 0", id, got.OutputBytes)
		}
	}
	live := get(t, s, "task_live")
	live.Status, live.FinishedAt, live.OutputBytes = bgtype.StatusCompleted, time.Now().UTC(), 11
	commit(t, s, "alice", store.UpsertAction(live))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, sqlitestore.WithoutRecovery())
	if got := get(t, s, "task_live"); got.Status != bgtype.StatusCompleted || got.OutputBytes != 11 {
		t.Fatalf("task_live after a reopen: %s with OutputBytes %d, want completed with 11", got.Status, got.OutputBytes)
	}
	var version int
	if err := rawDB(t, path).QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil || version != sqlitestore.SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, sqlitestore.SchemaVersion)
	}
}

// Two Managers (as two processes) on one SQLite file: a task that A ran
// wrote 11 bytes to its output and completed, and A stopped before its
// owner's loop took the end. B, which keeps none of that output, says its
// size as A would: get_task on B shows output_bytes, and the end's notice
// that B's Plugin renders from the record (re-announced once A is gone)
// carries it, with the hint how to read it.
func TestOutputBytesOfATaskOfAnotherProcess(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	sa, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := bgtask.New(bgtask.WithStore(sa), bgtask.WithInstance("inst-a"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Owner("alice").Spawn(t.Context(), func(_ context.Context, tk *bgtask.Task) (any, error) {
		_, err := io.WriteString(tk.Output(), "hello world")
		return "done", err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Owner("alice").Wait(t.Context(), id); err != nil || got.OutputBytes != 11 {
		t.Fatalf("A's Wait = OutputBytes %d, %v; want 11", got.OutputBytes, err)
	}
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}

	b := newManagerOn(t, bgtask.WithStore(openAt(t, path)), "inst-b")
	ob := b.Owner("alice")
	if n := ob.OutputSize(id); n != 0 {
		t.Fatalf("B keeps %d bytes of A's task's output, want none", n)
	}
	for _, tool := range agent.Tools(ob) {
		if tool.Name != "get_task" {
			continue
		}
		raw, err := tool.Call(t.Context(), json.RawMessage(fmt.Sprintf(`{"task_id":%q,"output_since":null,"output_tail":null}`, id)))
		var got struct {
			Task struct {
				Status      string `json:"status"`
				OutputBytes int64  `json:"output_bytes"`
			} `json:"task"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &got)
		}
		if err != nil || got.Task.Status != "completed" || got.Task.OutputBytes != 11 {
			t.Fatalf("get_task on B = %s, %v; want completed with output_bytes 11", raw, err)
		}
	}
	p, err := agent.NewPlugin(b, "alice", agent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.WithoutCancel(t.Context()))
	if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Event == nil || msgs[0].Event.TaskID != id || msgs[0].Event.Kind != bgtype.EventCompleted {
		t.Fatalf("B's run was handed %+v, want the end of %s", msgs, id)
	}
	if ev := msgs[0].Event; ev.OutputBytes != 11 || !strings.Contains(msgs[0].Content, `"output_bytes":11,"output_hint":"read the output with get_task`) {
		t.Fatalf("B's end notice: event output_bytes %d, content %s; want 11 and the hint", ev.OutputBytes, msgs[0].Content)
	}
	if err := p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
}
