package bgtask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// errInjected is the error a failingStore returns.
var errInjected = errors.New("injected store failure")

// failingStore is a MemoryStore whose Commit fails for records of chosen
// statuses a chosen number of times.
type failingStore struct {
	*memstore.Store

	mu    sync.Mutex
	fails map[bgtype.Status]int // failures left per status; < 0: always
	calls map[bgtype.Status]int // commits tried per status
}

func newFailingStore() *failingStore {
	return &failingStore{
		Store: memstore.New(),
		fails: make(map[bgtype.Status]int),
		calls: make(map[bgtype.Status]int),
	}
}

// failTerminal makes the next n commits of terminal records fail (n < 0:
// all of them).
func (s *failingStore) failTerminal(n int) {
	s.fail(n, bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted)
}

// fail makes the next n commits of records with one of statuses fail, each
// status counted on its own (n < 0: all of them; 0: none).
func (s *failingStore) fail(n int, statuses ...bgtype.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range statuses {
		s.fails[st] = n
	}
}

func (s *failingStore) tried(st bgtype.Status) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[st]
}

func (s *failingStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	s.mu.Lock()
	for _, a := range actions {
		for _, meta := range a.Tasks {
			s.calls[meta.Status]++
			if n := s.fails[meta.Status]; n != 0 {
				if n > 0 {
					s.fails[meta.Status] = n - 1
				}
				s.mu.Unlock()
				return fmt.Errorf("commit %s: %w", meta.Status, errInjected)
			}
		}
	}
	s.mu.Unlock()
	return s.Store.Commit(ctx, owner, actions...)
}

// A terminal commit that fails is retried with doubling backoff; if it
// fails every time the owner gets EventCommitFailed, then the terminal event.
func TestCommitRetryOfTerminalRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fails       int // -1: always
		wantTries   int
		wantElapsed time.Duration // from the function's return to Wait's
		wantEvents  []bgtype.EventKind
	}{
		{"no failure", 0, 1, 0, []bgtype.EventKind{bgtype.EventCompleted}},
		{"fails once", 1, 2, 10 * time.Millisecond, []bgtype.EventKind{bgtype.EventCompleted}},
		{"fails twice", 2, 3, 30 * time.Millisecond, []bgtype.EventKind{bgtype.EventCompleted}},
		{"fails always", -1, 3, 30 * time.Millisecond, []bgtype.EventKind{bgtype.EventCommitFailed, bgtype.EventCompleted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := newFailingStore()
				m := newTestManager(t, WithStore(st), WithTuning(Tuning{CommitAttempts: 3, CommitBackoff: 10 * time.Millisecond}))
				st.failTerminal(tc.fails)
				var returned time.Time
				id := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) {
					if err := tk.Emit("progress", 1); err != nil {
						return nil, err
					}
					returned = time.Now()
					return "done", nil
				}, WithWake(bgtype.WakeOnActivity))
				meta := waitStatus(t, m, id, bgtype.StatusCompleted)
				if d := time.Since(returned); d != tc.wantElapsed {
					t.Fatalf("terminal record settled %v after the function returned, want %v", d, tc.wantElapsed)
				}
				if string(meta.Result) != `"done"` || meta.Error != "" {
					t.Fatalf("Wait: result %s error %q, want \"done\" and no error", meta.Result, meta.Error)
				}
				if got := st.tried(bgtype.StatusCompleted); got != tc.wantTries {
					t.Fatalf("terminal commit tried %d times, want %d", got, tc.wantTries)
				}

				ib, _ := m.Inbox("a")
				evs := ib.Drain()
				var kinds []bgtype.EventKind
				for _, ev := range evs {
					if ev.TaskID != id {
						t.Fatalf("event for %s, want %s", ev.TaskID, id)
					}
					kinds = append(kinds, ev.Kind)
				}
				wantKinds := append([]bgtype.EventKind{bgtype.EventCustom}, tc.wantEvents...)
				if !slices.Equal(kinds, wantKinds) {
					t.Fatalf("events %v, want %v", kinds, wantKinds)
				}
				last := evs[len(evs)-1]
				if string(last.Result) != `"done"` {
					t.Fatalf("completed event result %s, want \"done\"", last.Result)
				}

				stored := getTask(t, m, id)
				if tc.fails >= 0 {
					if stored.Status != bgtype.StatusCompleted || string(stored.Result) != `"done"` {
						t.Fatalf("stored: status %q result %s, want completed \"done\"", stored.Status, stored.Result)
					}
					if !stored.FinishedAt.Equal(returned.UTC()) {
						t.Fatalf("stored FinishedAt %v, want %v (stamped once, before the retries)", stored.FinishedAt, returned.UTC())
					}
				} else {
					cf := evs[1]
					wantErr := "commit completed: injected store failure"
					if cf.Status != bgtype.StatusCompleted || cf.Error != wantErr {
						t.Fatalf("commit_failed event: status %q error %q, want completed %q", cf.Status, cf.Error, wantErr)
					}
					b, err := cf.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					wantJSON := fmt.Sprintf(`{"kind":"commit_failed","task_id":"%s","status":"completed","error":%q}`, id, wantErr)
					if string(b) != wantJSON {
						t.Fatalf("commit_failed JSON %s, want %s", b, wantJSON)
					}
					// The store could not be told: it still says running,
					// and the event is what tells the owner otherwise.
					if stored.Status != bgtype.StatusRunning {
						t.Fatalf("stored status %q after a failed terminal commit, want running (the last committed)", stored.Status)
					}
				}
				m.mu.Lock()
				nodes, owners := len(m.nodes), len(m.owners)
				m.mu.Unlock()
				if nodes != 0 || owners != 0 {
					t.Fatalf("after the task ended: %d nodes, %d owners, want 0 and 0", nodes, owners)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// The failure of every terminal commit is reported whatever the terminal
// status, and the event carries that status.
func TestCommitFailedEventCarriesStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fn      Func
		cancel  bool
		status  bgtype.Status
		kind    bgtype.EventKind
		errText string // of the terminal event
	}{
		{"failed", func(ctx context.Context, _ *Task) (any, error) { return nil, errors.New("bad") }, false, bgtype.StatusFailed, bgtype.EventFailed, "bad"},
		{"panicked", func(ctx context.Context, _ *Task) (any, error) { panic("boom") }, false, bgtype.StatusFailed, bgtype.EventFailed, "panic: boom"},
		{"cancelled", func(ctx context.Context, _ *Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() }, true, bgtype.StatusCanceled, bgtype.EventCanceled, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := newFailingStore()
				m := newTestManager(t, WithStore(st), WithTuning(Tuning{CommitAttempts: 2, CommitBackoff: time.Second}))
				st.failTerminal(-1)
				id := spawnFor(t, m, "a", tc.fn)
				if tc.cancel {
					synctest.Wait()
					if _, err := m.Cancel(t.Context(), id); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				waitStatus(t, m, id, tc.status)
				if d := time.Since(start); d != time.Second {
					t.Fatalf("two tries took %v, want 1s of backoff", d)
				}
				ib, _ := m.Inbox("a")
				evs := ib.Drain()
				if len(evs) != 2 {
					t.Fatalf("events %+v, want commit_failed then %s", evs, tc.kind)
				}
				wantErr := fmt.Sprintf("commit %s: injected store failure", tc.status)
				if evs[0].Kind != bgtype.EventCommitFailed || evs[0].Status != tc.status || evs[0].Error != wantErr {
					t.Fatalf("first event %+v, want commit_failed %s %q", evs[0], tc.status, wantErr)
				}
				if evs[1].Kind != tc.kind || evs[1].Error != tc.errText {
					t.Fatalf("second event %+v, want %s %q", evs[1], tc.kind, tc.errText)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// A spawn whose first commit fails returns the store's error and leaves
// nothing: the function never runs, the name and the slot are free again.
func TestCommitSpawnFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		agent bool
		queue bool // the failing spawn is a queued one
	}{
		{"Spawn", false, false},
		{"SpawnAgent", true, false},
		{"Spawn queued", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := newFailingStore()
				m := newTestManager(t, WithStore(st), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
				o := m.Owner("a")
				var log startLog
				var blocker string
				relBlock := gate(t)
				if tc.queue {
					blocker = spawnFor(t, m, "a", gated(&log, "blocker", relBlock))
				}
				spawn := o.Spawn
				if tc.agent {
					spawn = o.SpawnAgent
				}
				st.fail(1, bgtype.StatusRunning, bgtype.StatusQueued)
				rel := gate(t)
				id, err := spawn(t.Context(), gated(&log, "job", rel), WithName("job"))
				if !errors.Is(err, errInjected) || id != "" {
					t.Fatalf("spawn with a failing commit: (%q, %v), want the store's error", id, err)
				}
				wantStatus := bgtype.StatusRunning
				if tc.queue {
					wantStatus = bgtype.StatusQueued
				}
				wantText := fmt.Sprintf("bgtask: spawn: commit: commit %s: injected store failure", wantStatus)
				if err.Error() != wantText {
					t.Fatalf("error text %q, want %q", err.Error(), wantText)
				}
				st.fail(0, bgtype.StatusRunning, bgtype.StatusQueued)
				synctest.Wait()
				wantLog := []string{}
				wantCount, wantNodes := 0, 0
				if tc.queue {
					wantLog, wantCount, wantNodes = []string{"blocker"}, 1, 1
				}
				if got := log.get(); !slices.Equal(got, wantLog) {
					t.Fatalf("started %v, want %v: the failed spawn must not run", got, wantLog)
				}
				if n := countRecords(t, m, "a"); n != wantCount {
					t.Fatalf("store holds %d records, want %d", n, wantCount)
				}
				m.mu.Lock()
				nodes, queued, active := len(m.nodes), len(m.queue), m.active
				m.mu.Unlock()
				if nodes != wantNodes || queued != 0 || active != wantNodes {
					t.Fatalf("after the failed spawn: %d nodes, %d queued, %d active; want %d, 0, %d", nodes, queued, active, wantNodes, wantNodes)
				}
				m.inboxMu.RLock()
				inboxes := len(m.inboxes)
				m.inboxMu.RUnlock()
				if inboxes != 0 {
					t.Fatalf("%d inboxes kept after the failed spawn, want 0", inboxes)
				}
				if got := drainKindIDs(t, m, "a"); len(got) != 0 {
					t.Fatalf("events after the failed spawn: %v, want none", got)
				}

				// Same name, same slot, now the store works.
				id, err = spawn(t.Context(), gated(&log, "job2", rel), WithName("job"))
				if err != nil {
					t.Fatalf("spawn again with the same name: %v", err)
				}
				close(relBlock)
				if tc.queue {
					waitStatus(t, m, blocker, bgtype.StatusCompleted)
				}
				close(rel)
				meta := waitStatus(t, m, id, bgtype.StatusCompleted)
				if meta.Name != "job" {
					t.Fatalf("name %q, want job", meta.Name)
				}
				if got, want := log.get(), append(wantLog, "job2"); !slices.Equal(got, want) {
					t.Fatalf("started %v, want %v", got, want)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// A queued task whose running record cannot be committed fails without its
// function running, and frees its slot.
func TestCommitStartFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFailingStore()
		m := newTestManager(t, WithStore(st), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}), WithTuning(Tuning{CommitAttempts: 2, CommitBackoff: 5 * time.Millisecond}))
		var log startLog
		rel0, rel1, rel2 := gate(t), gate(t), gate(t)
		id0 := spawnFor(t, m, "a", gated(&log, "r0", rel0))
		id1 := spawnFor(t, m, "a", gated(&log, "q1", rel1))
		id2 := spawnFor(t, m, "a", gated(&log, "q2", rel2))
		st.fail(2, bgtype.StatusRunning) // both tries of q1's start
		close(rel0)
		waitStatus(t, m, id0, bgtype.StatusCompleted)
		meta := waitStatus(t, m, id1, bgtype.StatusFailed)
		wantErr := "bgtask: could not record the start: commit running: injected store failure"
		if meta.Error != wantErr || !meta.StartedAt.IsZero() {
			t.Fatalf("q1: error %q started %v, want %q and no start stamp", meta.Error, meta.StartedAt, wantErr)
		}
		if stored := getTask(t, m, id1); stored.Status != bgtype.StatusFailed || stored.Error != wantErr {
			t.Fatalf("stored q1: status %q error %q, want failed %q", stored.Status, stored.Error, wantErr)
		}
		synctest.Wait()
		if got := log.get(); !slices.Equal(got, []string{"r0", "q2"}) {
			t.Fatalf("started %v, want [r0 q2]", got)
		}
		close(rel1)
		close(rel2)
		waitStatus(t, m, id2, bgtype.StatusCompleted)
		want := []kindID{{bgtype.EventCompleted, id0}, {bgtype.EventFailed, id1}, {bgtype.EventCompleted, id2}}
		if got := drainKindIDs(t, m, "a"); !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		shutdownManager(t, m)
	})
}

// blockingHandler is a slog.Handler that stops the goroutine logging msg
// until resume is closed, after telling entered.
type blockingHandler struct {
	msg     string
	entered chan struct{}
	resume  chan struct{}
	once    sync.Once
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler            { return h }
func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.entered) })
		<-h.resume
	}
	return nil
}

// Wait documents that, for a task this Manager runs, it returns after the
// terminal record is committed and the terminal event delivered. The test
// holds a sub-agent's end between its retirement and the delivery of its
// terminal event (the unread message left in its inbox is dropped with a
// warning, which the logger holds) and asks Wait then.
func TestCommitWaitReturnsAfterTerminalEvent(t *testing.T) {
	t.Parallel()
	var bug string
	synctest.Test(t, func(t *testing.T) {
		h := &blockingHandler{
			msg:     "bgtask: message to an ended sub-agent dropped",
			entered: make(chan struct{}),
			resume:  make(chan struct{}),
		}
		m := newTestManager(t, WithLogger(slog.New(h)))
		o := m.Owner("a")
		proceed := make(chan struct{})
		id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			<-proceed // returns without reading its inbox
			return "done", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Send(t.Context(), id, bgtype.Message{From: "a", Content: "unread"}); err != nil {
			t.Fatal(err)
		}
		close(proceed)
		<-h.entered // the task is committed and retired; its event is not sent yet

		ib, _ := o.Inbox()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		meta, err := o.Wait(ctx, id)
		cancel()
		if err == nil && ib.Len() == 0 {
			bug = fmt.Sprintf("Wait must not return before the terminal event is delivered: "+
				"Wait returned %q while the terminal event was not in the inbox yet", meta.Status)
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait before the terminal event: (%q, %v), want it to wait", meta.Status, err)
		}
		close(h.resume)
		waitStatus(t, m, id, bgtype.StatusCompleted)
		synctest.Wait()
		if got, want := drainKindIDs(t, m, "a"), []kindID{{bgtype.EventCompleted, id}}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		shutdownManager(t, m)
	})
	if bug != "" {
		t.Fatal(bug)
	}
}
