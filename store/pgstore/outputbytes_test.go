package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// outputBytesVersion is the schema version that added output_bytes.
const outputBytesVersion = 16

// A database of the version before the output size moves forward: its
// rows read OutputBytes 0, and records that end with a size keep it,
// written one at a time and several in one commit (each of the insert
// and update statements).
func TestMigrationAddsOutputBytes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, outputBytesVersion-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, finished_at, terminal_at)
		VALUES ('task_old', 'alice', 'completed', now(), now(), now())`)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_live', 'alice', 'running', now())`)

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	for _, id := range []string{"task_old", "task_live"} {
		if got, err := s.Get(ctx, id); err != nil || got.OutputBytes != 0 {
			t.Fatalf("%s after the migration = OutputBytes %d, %v; want 0", id, got.OutputBytes, err)
		}
	}
	ended := func(m bgtype.TaskMeta, n int64) bgtype.TaskMeta {
		m.Status, m.FinishedAt, m.OutputBytes = bgtype.StatusCompleted, m.StartedAt.Add(1e9), n
		return m
	}
	live, err := s.Get(ctx, "task_live")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "alice", store.UpsertAction(ended(live, 11))); err != nil { // one row updated
		t.Fatal(err)
	}
	a, b := rec("task_a", "alice", bgtype.StatusRunning), rec("task_b", "alice", bgtype.StatusRunning)
	if err := s.Commit(ctx, "alice", store.UpsertAction(a), store.UpsertAction(b)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "alice", store.UpsertAction(ended(a, 1<<40)), store.UpsertAction(ended(b, 7))); err != nil { // rows updated together
		t.Fatal(err)
	}
	c, d := rec("task_c", "alice", bgtype.StatusRunning), rec("task_d", "alice", bgtype.StatusRunning)
	if err := s.Commit(ctx, "alice", store.UpsertAction(ended(c, 3)), store.UpsertAction(ended(d, 4))); err != nil { // rows inserted terminal
		t.Fatal(err)
	}
	want := map[string]int64{"task_old": 0, "task_live": 11, "task_a": 1 << 40, "task_b": 7, "task_c": 3, "task_d": 4}
	for id, n := range want {
		if got, err := s.Get(ctx, id); err != nil || got.Status != bgtype.StatusCompleted || got.OutputBytes != n {
			t.Errorf("%s = %s with OutputBytes %d, %v; want completed with %d", id, got.Status, got.OutputBytes, err, n)
		}
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_live' AND output_bytes = 11`); n != 1 {
		t.Errorf("%d rows of task_live with output_bytes 11, want 1", n)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_schema_migrations SET version = version`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("%d migration rows, want %d", n, pgstore.SchemaVersion)
	}
}

// A thread whose turn is on B hears of the end of its task on A with the
// size of the task's output, as A would say it, though B keeps none of
// it: the event B's idle Receiver is woken with, the notice B's Plugin
// renders (with the hint how to read it) and get_task on B all say 11
// bytes; and B reads the bytes from A as the hint says.
func TestEndNoticeOnAnotherInstanceSaysOutputBytes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	_, mb, _ := instanceStore(t, dsn, "inst_b")
	woken := newWakeLog()
	pb, err := agent.NewPlugin(mb, "alice", agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: woken.add}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, err := ma.Owner("alice").Spawn(ctx, func(_ context.Context, tk *bgtask.Task) (any, error) {
		_, err := io.WriteString(tk.Output(), "hello world")
		return "done", err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken.got:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	woken.mu.Lock()
	heard := woken.evs[0]
	woken.mu.Unlock()
	if heard.TaskID != id || heard.Kind != bgtype.EventCompleted || heard.OutputBytes != 11 {
		t.Fatalf("B's OnWake heard %+v, want the end of %s with output_bytes 11", heard, id)
	}
	ob := pb.Owner()
	if n := ob.OutputSize(id); n != 0 {
		t.Fatalf("B keeps %d bytes of the task's output, want none (A keeps it)", n)
	}
	if err := pb.RunStart(ctx, bgtask.RunInfo{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := pb.Deliver(ctx)
	if err != nil || len(msgs) != 1 || msgs[0].Event == nil || msgs[0].Event.TaskID != id || msgs[0].Event.Kind != bgtype.EventCompleted {
		t.Fatalf("B's first step = %+v, %v; want the end of %s", msgs, err, id)
	}
	if ev := msgs[0].Event; ev.OutputBytes != 11 || !strings.Contains(msgs[0].Content, `"output_bytes":11,"output_hint":"read the output with get_task`) {
		t.Fatalf("B's end notice: event output_bytes %d, content %s; want 11 and the hint", ev.OutputBytes, msgs[0].Content)
	}
	tools := map[string]agent.Tool{}
	for _, tool := range agent.Tools(ob) {
		tools[tool.Name] = tool
	}
	type result struct {
		Task struct {
			Status      string `json:"status"`
			OutputBytes int64  `json:"output_bytes"`
		} `json:"task"`
		Output *struct {
			Text string `json:"text"`
		} `json:"output"`
	}
	getTask := func(args string) result {
		t.Helper()
		var res result
		raw, err := tools["get_task"].Call(guard(t), json.RawMessage(args))
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			t.Fatalf("get_task %s on B: %s, %v", args, raw, err)
		}
		return res
	}
	if got := getTask(fmt.Sprintf(`{"task_id":%q,"output_since":null,"output_tail":null}`, id)); got.Task.Status != "completed" || got.Task.OutputBytes != 11 || got.Output != nil {
		t.Fatalf("get_task on B = %+v, want completed with output_bytes 11 and no output", got)
	}
	if got := getTask(fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":null}`, id)); got.Task.OutputBytes != 11 || got.Output == nil || got.Output.Text != "hello world" {
		t.Fatalf("get_task on B with output_since 0 = %+v, want the 11 bytes read from A", got)
	}
	if err := pb.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
}
