package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/store/pgstore"
)

// writer is a task that writes each string it is sent to its output, says
// so on wrote, and returns "done" once sent is closed.
func writer(sent <-chan string, wrote chan<- struct{}) bgtask.Func {
	return func(ctx context.Context, task *bgtask.Task) (any, error) {
		for {
			select {
			case s, ok := <-sent:
				if !ok {
					return "done", nil
				}
				if _, err := io.WriteString(task.Output(), s); err != nil {
					return nil, err
				}
				wrote <- struct{}{}
			case <-ctx.Done(): // a failed test's Shutdown
				return nil, ctx.Err()
			}
		}
	}
}

// carriedReads counts the output reads (carried messages) that A has
// claimed and not yet answered: B waiting there for new output.
func carriedReads(t *testing.T, dsn string) int64 {
	return sqlExec(t, dsn, `SELECT 1 FROM bgtask_messages WHERE message ? 'bgtask_output_read' AND claimed_at IS NOT NULL AND handled_at IS NULL`)
}

// A task on A writes its output in three increments; B reads every byte
// once, in order, with the offsets, sizes and drops A reports; B's
// WaitOutput returns on new output written on A and on the end; tails and
// refusals are A's.
func TestOutputAcrossInstances(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	oa, ob := f.ma.Owner("alice"), f.mb.Owner("alice")
	sent, wrote := make(chan string), make(chan struct{})
	id, err := oa.Spawn(t.Context(), writer(sent, wrote))
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) { sent <- s; <-wrote }
	same := func(what string, from int64, limit int) bgtask.Output {
		t.Helper()
		a, errA := oa.ReadOutput(t.Context(), id, from, limit)
		b, errB := ob.ReadOutput(guard(t), id, from, limit)
		if errA != nil || errB != nil || a != b {
			t.Fatalf("%s: A reads %+v, %v; B reads %+v, %v", what, a, errA, b, errB)
		}
		return b
	}
	// Nothing written yet.
	if got := same("empty", 0, 100); got != (bgtask.Output{}) {
		t.Fatalf("empty read = %+v", got)
	}
	// B waits on A for the first write.
	waited := make(chan error, 1)
	go func() { waited <- ob.WaitOutput(guard(t), id, 0) }()
	waitFor(t, "B's wait held on A", func() bool { return carriedReads(t, f.dsn) == 1 })
	write("alpha ")
	if err := <-waited; err != nil {
		t.Fatalf("B's WaitOutput on the first write = %v", err)
	}
	var text strings.Builder
	next := int64(0)
	got := same("first", next, 100)
	if want := (bgtask.Output{Text: "alpha ", NextOffset: 6, Size: 6}); got != want {
		t.Fatalf("first read = %+v, want %+v", got, want)
	}
	text.WriteString(got.Text)
	next = got.NextOffset

	go func() { waited <- ob.WaitOutput(guard(t), id, next) }()
	waitFor(t, "B's second wait held on A", func() bool { return carriedReads(t, f.dsn) == 1 })
	write("beta ")
	if err := <-waited; err != nil {
		t.Fatalf("B's WaitOutput on the second write = %v", err)
	}
	write("gamma")
	// Two pieces of at most 4 bytes, then the rest.
	for _, want := range []bgtask.Output{
		{Text: "beta", Offset: 6, NextOffset: 10, Size: 16},
		{Text: " gam", Offset: 10, NextOffset: 14, Size: 16},
		{Text: "ma", Offset: 14, NextOffset: 16, Size: 16},
	} {
		got := same("piece", next, 4)
		if got != want {
			t.Fatalf("read from %d = %+v, want %+v", next, got, want)
		}
		text.WriteString(got.Text)
		next = got.NextOffset
	}
	if text.String() != "alpha beta gamma" {
		t.Fatalf("B read %q", text.String())
	}
	ta, errA := oa.TailOutput(t.Context(), id, 5)
	tb, errB := ob.TailOutput(guard(t), id, 5)
	if errA != nil || errB != nil || ta != tb || tb.Text != "gamma" || tb.Offset != 11 {
		t.Fatalf("tails: A %+v, %v; B %+v, %v", ta, errA, tb, errB)
	}

	// Another owner is refused as on A, and learns nothing.
	for _, who := range []string{"mallory"} {
		_, errA := f.ma.Owner(who).ReadOutput(t.Context(), id, 0, 100)
		_, errB := f.mb.Owner(who).ReadOutput(guard(t), id, 0, 100)
		if !errors.Is(errB, bgtask.ErrNotFound) || errA == nil || errB.Error() != errA.Error() {
			t.Fatalf("%s reads: A %v; B %v", who, errA, errB)
		}
		_, errB = f.mb.Owner(who).TailOutput(guard(t), id, 100)
		if errB == nil || errB.Error() != errA.Error() {
			t.Fatalf("%s tails on B: %v, want %v", who, errB, errA)
		}
		errB = f.mb.Owner(who).WaitOutput(guard(t), id, 0)
		if errWA := f.ma.Owner(who).WaitOutput(t.Context(), id, 0); errB == nil || errB.Error() != errWA.Error() {
			t.Fatalf("%s waits: A %v; B %v", who, errWA, errB)
		}
	}
	if _, err := ob.ReadOutput(guard(t), id, -1, 100); !errors.Is(err, bgtask.ErrInvalidArgument) {
		t.Fatalf("a negative offset on B: %v", err)
	}

	// B waits past the end: the task's end returns it.
	go func() { waited <- ob.WaitOutput(guard(t), id, next) }()
	waitFor(t, "B's last wait held on A", func() bool { return carriedReads(t, f.dsn) == 1 })
	close(sent)
	if err := <-waited; err != nil {
		t.Fatalf("B's WaitOutput at the end = %v", err)
	}
	if _, err := ob.Wait(guard(t), id); err != nil {
		t.Fatal(err)
	}
	// The ended task's output is still read from A.
	if got := same("ended", 11, 100); got != (bgtask.Output{Text: "gamma", Offset: 11, NextOffset: 16, Size: 16, Done: true}) {
		t.Fatalf("ended read = %+v", got)
	}
	// The answers are deleted once read: no output lingers in the table.
	if n := sqlExec(t, f.dsn, `SELECT 1 FROM bgtask_messages WHERE message ? 'bgtask_output_read'`); n != 0 {
		t.Fatalf("%d carried reads left in bgtask_messages", n)
	}
}

// Output whose oldest bytes A dropped reads on B with the same drop.
func TestOutputAcrossInstancesDropped(t *testing.T) {
	t.Parallel()
	sa, dsn := openStore(t, pgstore.WithPollInterval(time.Hour))
	sb, err := pgstore.Open(t.Context(), dsn, pgstore.WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	ma := startManagerWith(t, sa, "inst_a", bgtask.WithCaps(bgtask.Caps{MaxOutputBytes: 8}))
	mb := startManagerWith(t, sb, "inst_b")
	sent, wrote := make(chan string), make(chan struct{})
	id, err := ma.Owner("alice").Spawn(t.Context(), writer(sent, wrote))
	if err != nil {
		t.Fatal(err)
	}
	defer close(sent)
	sent <- "0123456789abc"
	<-wrote
	want := bgtask.Output{Text: "56789abc", Offset: 5, NextOffset: 13, Dropped: 3, Size: 13}
	a, errA := ma.Owner("alice").ReadOutput(t.Context(), id, 2, 100)
	b, errB := mb.Owner("alice").ReadOutput(guard(t), id, 2, 100)
	if errA != nil || errB != nil || a != want || b != want {
		t.Fatalf("A reads %+v, %v; B reads %+v, %v; want %+v", a, errA, b, errB, want)
	}
}

// When the instance that ran the task stopped, B's read says so: the output
// it kept is lost, never read as empty.
func TestOutputAcrossInstancesStopped(t *testing.T) {
	t.Parallel()
	sb, dsn := openStore(t, pgstore.WithPollInterval(time.Hour))
	mb := startManagerWith(t, sb, "inst_b")
	sa, err := pgstore.Open(t.Context(), dsn, pgstore.WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	ma, err := bgtask.New(bgtask.WithStore(sa), bgtask.WithInstance("inst_a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.Start(t.Context(), ma.Runtime()); err != nil {
		t.Fatal(err)
	}
	id, err := ma.Owner("alice").Spawn(t.Context(), func(_ context.Context, task *bgtask.Task) (any, error) {
		_, err := io.WriteString(task.Output(), "kept on A")
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Owner("alice").Wait(guard(t), id); err != nil {
		t.Fatal(err)
	}
	if got, err := mb.Owner("alice").ReadOutput(guard(t), id, 0, 100); err != nil || got.Text != "kept on A" || !got.Done {
		t.Fatalf("B reads the ended task's output: %+v, %v", got, err)
	}
	if err := ma.Shutdown(guard(t)); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`bgtask: task %s: its instance "inst_a" is gone; the output it kept in memory is lost`, id)
	o := mb.Owner("alice")
	_, err = o.ReadOutput(guard(t), id, 0, 100)
	if !errors.Is(err, bgtask.ErrNotLive) || err.Error() != want {
		t.Fatalf("B's read after A stopped = %v", err)
	}
	if _, err := o.TailOutput(guard(t), id, 100); err == nil || err.Error() != want {
		t.Fatalf("B's tail after A stopped = %v", err)
	}
	if err := o.WaitOutput(guard(t), id, 100); err == nil || err.Error() != want {
		t.Fatalf("B's wait after A stopped = %v", err)
	}
	// The tools still answer with the task: the output is lost, not the record.
	for _, tool := range agent.Tools(o) {
		var args string
		switch tool.Name {
		case "get_task":
			args = fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":null}`, id)
		case "wait_task":
			args = fmt.Sprintf(`{"task_id":%q,"timeout_seconds":1,"output_since":0}`, id)
		default:
			continue
		}
		raw, err := tool.Call(guard(t), json.RawMessage(args))
		var got struct {
			Task struct {
				Status string `json:"status"`
			} `json:"task"`
			Output      *json.RawMessage `json:"output"`
			OutputError string           `json:"output_error"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &got)
		}
		if err != nil || got.Task.Status != "completed" || got.Output != nil || got.OutputError != want {
			t.Errorf("%s on B after A stopped = %s, %v", tool.Name, raw, err)
		}
	}
}

// When A dies while B waits there for new output, the reaper fails the
// read and B's wait says that A is gone.
func TestOutputAcrossInstancesDiesWhileWaiting(t *testing.T) {
	t.Parallel()
	f := newFleet(t, pgstore.WithGrace(time.Hour))
	id, err := f.ma.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- f.mb.Owner("alice").WaitOutput(guard(t), id, 0) }()
	waitFor(t, "B's wait held on A", func() bool { return carriedReads(t, f.dsn) == 1 })
	sqlExec(t, f.dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_a'`)
	if _, err := f.sb.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = <-waited
	if want := fmt.Sprintf(`bgtask: task %s: its instance "inst_a" is gone; the output it kept in memory is lost`, id); !errors.Is(err, bgtask.ErrNotLive) || err.Error() != want {
		t.Fatalf("B's wait = %v", err)
	}
}

// The agent's get_task and wait_task on B read and wait for the output of a
// task that runs on A.
func TestOutputToolsAcrossInstances(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	sent, wrote := make(chan string), make(chan struct{})
	id, err := f.ma.Owner("alice").Spawn(t.Context(), writer(sent, wrote))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]agent.Tool{}
	for _, tool := range agent.Tools(f.mb.Owner("alice")) {
		tools[tool.Name] = tool
	}
	type output struct {
		Text         string `json:"text"`
		Offset       int64  `json:"offset"`
		NextOffset   int64  `json:"next_offset"`
		DroppedBytes int64  `json:"dropped_bytes"`
		TotalBytes   int64  `json:"total_bytes"`
		Running      bool   `json:"running"`
	}
	type result struct {
		Task struct {
			OutputBytes int64 `json:"output_bytes"`
		} `json:"task"`
		TimedOut bool    `json:"timed_out"`
		Output   *output `json:"output"`
	}
	call := func(name, args string) (result, error) {
		var res result
		raw, err := tools[name].Call(guard(t), json.RawMessage(args))
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		return res, err
	}
	sent <- "hello "
	<-wrote
	got, err := call("get_task", fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":null}`, id))
	if err != nil || got.Output == nil || *got.Output != (output{Text: "hello ", NextOffset: 6, TotalBytes: 6, Running: true}) || got.Task.OutputBytes != 6 {
		t.Fatalf("get_task on B = %+v (output %+v), %v", got, got.Output, err)
	}
	done := make(chan error, 1)
	var waitedRes result
	go func() {
		var err error
		waitedRes, err = call("wait_task", fmt.Sprintf(`{"task_id":%q,"timeout_seconds":60,"output_since":6}`, id))
		done <- err
	}()
	waitFor(t, "wait_task's wait held on A", func() bool { return carriedReads(t, f.dsn) == 1 })
	sent <- "world"
	<-wrote
	if err := <-done; err != nil || waitedRes.TimedOut || waitedRes.Output == nil || waitedRes.Task.OutputBytes != 11 ||
		*waitedRes.Output != (output{Text: "world", Offset: 6, NextOffset: 11, TotalBytes: 11, Running: true}) {
		t.Fatalf("wait_task on B = %+v (output %+v), %v", waitedRes, waitedRes.Output, err)
	}
	close(sent)
	if _, err := f.mb.Owner("alice").Wait(guard(t), id); err != nil {
		t.Fatal(err)
	}
	if _, err := call("get_task", fmt.Sprintf(`{"task_id":%q,"output_since":11,"output_tail":null}`, id)); err != nil {
		t.Fatal(err)
	}
	// Another owner gets the refusal it gets on A.
	var errs []string
	for _, m := range []*bgtask.Manager{f.ma, f.mb} {
		for _, tool := range agent.Tools(m.Owner("mallory")) {
			if tool.Name == "get_task" {
				_, err := tool.Call(guard(t), json.RawMessage(fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":null}`, id)))
				errs = append(errs, fmt.Sprint(err))
			}
		}
	}
	if len(errs) != 2 || errs[0] != errs[1] || errs[0] == "<nil>" {
		t.Fatalf("get_task of another owner: A %q, B %q", errs[0], errs[1])
	}
}
