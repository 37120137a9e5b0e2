package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/storefake"
	"github.com/bgtask/bgtask/store"
)

// Test helpers shared by every test file of the package.

// newTestManager returns a Manager that is shut down (and checked) when the test ends,
// in case the test stops early. Tests still call shutdownManager at their end.
func newTestManager(t testing.TB, opts ...bgtask.Option) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		// No deadline: a Shutdown that hangs is a bug the test binary's
		// -timeout reports with every stack, not a race against the clock.
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown in cleanup: %v", err)
		}
	})
	return m
}

// shutdownManager shuts m down and fails the test unless Shutdown returns nil.
func shutdownManager(t testing.TB, m *bgtask.Manager) {
	t.Helper()
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// probeTask is a task body that reports it started, hands out its context and
// task, then blocks until its context is cancelled (or release is closed), and
// reports the cancellation cause.
type probeTask struct {
	started chan struct{}
	release chan struct{}
	cause   chan error // buffered: the cause seen when ctx ended, nil if released
	ctx     context.Context
	task    *bgtask.Task
}

func newProbe() *probeTask {
	return &probeTask{started: make(chan struct{}), release: make(chan struct{}), cause: make(chan error, 1)}
}

func (p *probeTask) fn(ctx context.Context, tk *bgtask.Task) (any, error) {
	p.ctx, p.task = ctx, tk
	close(p.started)
	select {
	case <-ctx.Done():
		p.cause <- context.Cause(ctx)
		return nil, ctx.Err()
	case <-p.release:
		p.cause <- nil
		return "released", nil
	}
}

// ctxErr returns the probe's context error once it started (safe: ctx is
// written before started is closed).
func (p *probeTask) ctxErr(t testing.TB) error {
	t.Helper()
	<-p.started
	return p.ctx.Err()
}

// spawnProbe spawns a probe and waits until its function runs.
func spawnProbe(t testing.TB, ctx context.Context, o bgtask.Owner, opts ...bgtask.SpawnOption) (string, *probeTask) {
	t.Helper()
	p := newProbe()
	id, err := o.Spawn(ctx, p.fn, opts...)
	if err != nil {
		t.Fatalf("Spawn probe: %v", err)
	}
	<-p.started
	return id, p
}

// listTasks collects an owner's List.
func listTasks(t testing.TB, o bgtask.Owner, statuses ...bgtype.Status) []bgtype.TaskMeta {
	t.Helper()
	metas, err := listed(o.List(context.Background(), statuses...))
	if err != nil {
		t.Fatalf("List(%s, %v): %v", o.ID(), statuses, err)
	}
	return metas
}

// getter and waiter are what a Manager and an Owner view have in common, so
// one helper reads or waits through either.
type (
	getter interface {
		Get(ctx context.Context, id string) (bgtype.TaskMeta, error)
	}
	waiter interface {
		Wait(ctx context.Context, id string) (bgtype.TaskMeta, error)
	}
)

// getTask reads the record of id through g (a Manager or an Owner view)
// or fails the test.
func getTask(t testing.TB, g getter, id string) bgtype.TaskMeta {
	t.Helper()
	meta, err := g.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return meta
}

// waitTask waits for id through w (a Manager or an Owner view) and fails
// the test on error, except the *TaskError of a failed task, which must
// say what its record says.
func waitTask(t testing.TB, w waiter, id string) bgtype.TaskMeta {
	t.Helper()
	meta, err := w.Wait(context.Background(), id)
	if te, ok := errors.AsType[*bgtask.TaskError](err); ok && meta.Status == bgtype.StatusFailed {
		if *te != (bgtask.TaskError{TaskID: id, Kind: meta.ErrorKind, Message: meta.Error}) || meta.ErrorKind == "" {
			t.Fatalf("Wait(%s): %#v for the record %+v", id, te, meta)
		}
		return meta
	}
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	if meta.Status == bgtype.StatusFailed {
		t.Fatalf("Wait(%s): no error for a failed task", id)
	}
	return meta
}

func panickingTask(ctx context.Context, tk *bgtask.Task) (any, error) {
	panic("boom")
}

// receiverTask is a sub-agent body that waits for n events in its own inbox
// and returns them; it fails if the inbox closes or ctx ends first.
func receiverTask(n int, got chan<- []bgtype.Event) bgtask.Func {
	return func(ctx context.Context, tk *bgtask.Task) (any, error) {
		ib := tk.Inbox()
		if ib == nil {
			return nil, errors.New("sub-agent without inbox")
		}
		var evs []bgtype.Event
		for len(evs) < n {
			if err := ib.Wait(ctx); err != nil {
				return nil, err
			}
			evs = ib.AppendDrain(evs)
		}
		got <- evs
		return len(evs), nil
	}
}

func spawnReceiver(t testing.TB, o bgtask.Owner, n int, opts ...bgtask.SpawnOption) (string, <-chan []bgtype.Event, *bgtask.Task) {
	t.Helper()
	got := make(chan []bgtype.Event, 1)
	handle := make(chan *bgtask.Task, 1)
	recv := receiverTask(n, got)
	id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		taskCtxs.Store(tk, ctx)
		handle <- tk
		return recv(ctx, tk)
	}, opts...)
	if err != nil {
		t.Fatalf("SpawnAgent: %v", err)
	}
	return id, got, <-handle
}

// toolNamed returns the owner's tool called name.
func toolNamed(t testing.TB, o bgtask.Owner, name string, opts ...ToolOption) Tool {
	t.Helper()
	for _, tool := range Tools(o, opts...) {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q", name)
	return Tool{}
}

// callTool calls a tool that must succeed and decodes its result into out.
func callTool(t testing.TB, ctx context.Context, tool Tool, args string, out any) json.RawMessage {
	t.Helper()
	res, err := tool.Call(ctx, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s(%s): %v", tool.Name, args, err)
	}
	if !json.Valid(res) {
		t.Fatalf("%s(%s) = %s: not JSON", tool.Name, args, res)
	}
	if out != nil {
		dec := json.NewDecoder(strings.NewReader(string(res)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			t.Fatalf("%s(%s) = %s: %v", tool.Name, args, res, err)
		}
	}
	return res
}

// callToolErr calls a tool that must fail and returns its error.
func callToolErr(t testing.TB, ctx context.Context, tool Tool, args string) error {
	t.Helper()
	res, err := tool.Call(ctx, json.RawMessage(args))
	if err == nil {
		t.Fatalf("%s(%s) = %s, want an error", tool.Name, args, res)
	}
	if res != nil {
		t.Fatalf("%s(%s) returned %s with error %v", tool.Name, args, res, err)
	}
	return err
}

type listResult struct {
	Tasks      []toolTask `json:"tasks"`
	Total      int        `json:"total"`
	NextCursor string     `json:"next_cursor"`
}

type getResult struct {
	Task     toolTask               `json:"task"`
	Messages []bgtask.MessageRecord `json:"messages"`
	Output   *toolOutput            `json:"output"`
}

// jsonEqual reports whether raw and want encode the same value.
func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ---- stores and ids the tests build

type durableMem = storefake.DurableMem

// finishTasks spawns one task per result on owner of m and waits for each
// to end; a non-nil error makes it fail.
func finishTasks(t *testing.T, m *bgtask.Manager, owner string, results ...error) []string {
	t.Helper()
	var ids []string
	for _, res := range results {
		id, err := m.Owner(owner).Spawn(t.Context(), func(context.Context, *bgtask.Task) (any, error) { return "ok", res })
		if err != nil {
			t.Fatal(err)
		}
		if meta, err := m.Wait(t.Context(), id); !meta.Status.IsTerminal() || (err != nil) != (res != nil) {
			t.Fatalf("Wait(%s) = %s, %v", id, meta.Status, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func eventIDs(msgs []PromptMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Event != nil && m.Event.Kind.IsTerminal() {
			out = append(out, m.Event.TaskID)
		}
	}
	return out
}

type fakeShared = storefake.Shared

// remoteRecord is a running task of another instance, in the store.
func remoteRecord(t *testing.T, f *fakeShared, id string) bgtype.TaskMeta {
	t.Helper()
	meta := bgtype.TaskMeta{ID: id, Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, Instance: "other-instance", Attempt: 1}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(meta)); err != nil {
		t.Fatal(err)
	}
	return meta
}

// testTaskID returns a valid task id for a record made at at: the i-th
// of the test (ids of one test differ by i).
func testTaskID(at time.Time, i int) string {
	return fmt.Sprintf("task_%012x7000%016x", at.UnixMilli(), 0x8000000000000000|uint64(i))
}

// messagesPerTask is how many messages a task's history keeps (Owner.Messages).
const messagesPerTask = 20

// taskCtxs maps a task to the context its function got, for the tests
// that call a tool from inside a task (spawnReceiver records it).
var taskCtxs sync.Map

// taskCtx returns the context the function of tk got.
func taskCtx(tk *bgtask.Task) context.Context {
	ctx, _ := taskCtxs.Load(tk)
	return ctx.(context.Context)
}

// blankOwners are owner ids the Manager refuses as blank.
var blankOwners = []string{"", " ", "\t\n", "\u00a0", "\u2003", "\u00a0\u2003"}

// causeTask is a task body that reports the cause its context ended with.
func causeTask(causes chan<- error) bgtask.Func {
	return func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
}

// spawnFor spawns fn for owner or fails the test.
func spawnFor(t testing.TB, m *bgtask.Manager, owner string, fn bgtask.Func, opts ...bgtask.SpawnOption) string {
	t.Helper()
	id, err := m.Owner(owner).Spawn(context.Background(), fn, opts...)
	if err != nil {
		t.Fatalf("Spawn for %q: %v", owner, err)
	}
	return id
}

func doneTask(context.Context, *bgtask.Task) (any, error) { return "ok", nil }

func taskIDs(metas []bgtype.TaskMeta) []string {
	ids := make([]string, len(metas))
	for i, m := range metas {
		ids[i] = m.ID
	}
	return ids
}

// lockedWriter is an io.Writer that writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newTestLogger returns a text logger that writes to w under mu.
func newTestLogger(mu *sync.Mutex, w *strings.Builder) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, w}, nil))
}
