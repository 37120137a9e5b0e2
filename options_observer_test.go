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

// transitionLog records the transitions the observer saw, per task, and
// whether each was already committed when the observer was called.
type transitionLog struct {
	store store.Store
	mu    sync.Mutex
	byID  map[string][]string
	bad   []string
}

func newTransitionLog() *transitionLog { return &transitionLog{byID: map[string][]string{}} }

func (l *transitionLog) observe(tr Transition) {
	problem := ""
	if tr.Task.Status != tr.To {
		problem = fmt.Sprintf("%s: Task.Status %q, To %q", tr.Task.ID, tr.Task.Status, tr.To)
	} else if stored, err := l.store.Get(context.Background(), tr.Task.ID); err != nil || stored.Status != tr.To {
		problem = fmt.Sprintf("%s: observer called for %q before the commit (stored %q, %v)", tr.Task.ID, tr.To, stored.Status, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byID[tr.Task.ID] = append(l.byID[tr.Task.ID], fmt.Sprintf("%s->%s", tr.From, tr.To))
	if problem != "" {
		l.bad = append(l.bad, problem)
	}
}

func (l *transitionLog) get(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byID[id])
}

func TestObserverTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		queued bool // spawned behind a blocker with WithLimits(Limits{MaxConcurrent: 1})
		fn     Func
		cancel bool // cancelled while still queued
		want   []string
	}{
		{"completed", false, func(context.Context, *Task) (any, error) { return 1, nil }, false,
			[]string{"->running", "running->completed"}},
		{"failed", false, func(context.Context, *Task) (any, error) { return nil, errors.New("x") }, false,
			[]string{"->running", "running->failed"}},
		{"panicked", false, func(context.Context, *Task) (any, error) { panic("p") }, false,
			[]string{"->running", "running->failed"}},
		{"queued completed", true, func(context.Context, *Task) (any, error) { return 1, nil }, false,
			[]string{"->queued", "queued->running", "running->completed"}},
		{"queued cancelled", true, func(context.Context, *Task) (any, error) { return 1, nil }, true,
			[]string{"->queued", "queued->cancelled"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New()
				log := newTransitionLog()
				log.store = store
				m := newTestManager(t, WithStore(store), WithObserver(log.observe), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
				var blocker string
				release := gate(t)
				if tc.queued {
					blocker = spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { <-release; return nil, nil })
				}
				id := spawnFor(t, m, "a", tc.fn)
				synctest.Wait()
				if tc.cancel {
					if n, err := m.Cancel(t.Context(), id); n != 1 || err != nil {
						t.Fatalf("Cancel: (%d, %v), want (1, nil)", n, err)
					}
				}
				close(release)
				meta := waitTask(t, m, id)
				if blocker != "" {
					waitStatus(t, m, blocker, bgtype.StatusCompleted)
				}
				if got := log.get(id); !slices.Equal(got, tc.want) {
					t.Fatalf("transitions %q, want %q (final status %q)", got, tc.want, meta.Status)
				}
				log.mu.Lock()
				bad := slices.Clone(log.bad)
				log.mu.Unlock()
				if len(bad) > 0 {
					t.Fatalf("observer saw: %v", bad)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// An observer that panics is isolated: spawns succeed, tasks run and
// complete, events are delivered, and each panic is logged at Error level.
func TestObserverPanicIsIsolatedAndLogged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := &captureHandler{}
		calls := 0
		var mu sync.Mutex
		m := newTestManager(t, WithLogger(slog.New(h)), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}),
			WithObserver(func(tr Transition) {
				mu.Lock()
				calls++
				mu.Unlock()
				panic("observer boom")
			}))
		release := gate(t)
		first := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) {
			<-release
			return "one", tk.Emit("progress", 1)
		}, WithWake(bgtype.WakeOnActivity))
		second := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return "two", nil })
		close(release)
		if meta := waitStatus(t, m, first, bgtype.StatusCompleted); string(meta.Result) != `"one"` {
			t.Fatalf("first result %s", meta.Result)
		}
		if meta := waitStatus(t, m, second, bgtype.StatusCompleted); string(meta.Result) != `"two"` {
			t.Fatalf("second result %s", meta.Result)
		}
		// The second task starts once the first frees its slot, which may be
		// before the first's completion reaches the inbox: only each task's
		// own order is fixed.
		got := drainKindIDs(t, m, "a")
		custom, done1, done2 := slices.Index(got, kindID{bgtype.EventCustom, first}), slices.Index(got, kindID{bgtype.EventCompleted, first}), slices.Index(got, kindID{bgtype.EventCompleted, second})
		if len(got) != 3 || custom < 0 || done2 < 0 || done1 < custom {
			t.Fatalf("events %v, want the first's custom then its completion, and the second's completion", got)
		}
		shutdownManager(t, m)

		// first: ""->running, running->completed; second: ""->queued,
		// queued->running, running->completed.
		const wantCalls = 5
		if calls != wantCalls {
			t.Fatalf("observer called %d times, want %d", calls, wantCalls)
		}
		recs := h.find(slog.LevelError, "bgtask: callback panicked")
		if len(recs) != wantCalls {
			t.Fatalf("%d observer panics logged at Error, want %d", len(recs), wantCalls)
		}
		perTask := map[string]int{}
		for _, r := range recs {
			if r.Attrs["panic"] != "observer boom" || r.Attrs["callback"] != "WithObserver" {
				t.Fatalf("logged panic value %q, want %q", r.Attrs["panic"], "observer boom")
			}
			perTask[r.Attrs["about"]]++
		}
		if perTask[first] != 2 || perTask[second] != 3 {
			t.Fatalf("panics logged per task %v, want %s:2 %s:3", perTask, first, second)
		}
	})
}

// With a logger, the library reports what it recovers from and what it
// could not record.
func TestLoggerRecordsFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := &captureHandler{}
		st := newFailingStore()
		m := newTestManager(t, WithLogger(slog.New(h)), WithStore(st), WithTuning(Tuning{CommitAttempts: 2, CommitBackoff: time.Millisecond}))
		p := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { panic("task boom") })
		waitStatus(t, m, p, bgtype.StatusFailed)
		st.failTerminal(-1)
		c := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return nil, nil })
		waitStatus(t, m, c, bgtype.StatusCompleted)
		shutdownManager(t, m)

		panics := h.find(slog.LevelError, "bgtask: task panicked")
		if len(panics) != 1 || panics[0].Attrs["task_id"] != p || panics[0].Attrs["panic"] != "task boom" {
			t.Fatalf("task panic records %+v, want one for %s with panic %q", panics, p, "task boom")
		}
		warns := h.find(slog.LevelWarn, "bgtask: commit failed")
		if len(warns) != 2 {
			t.Fatalf("%d commit-failed warnings, want 2 (one per try)", len(warns))
		}
		for i, w := range warns {
			if w.Attrs["task_id"] != c || w.Attrs["attempt"] != fmt.Sprint(i+1) || w.Attrs["status"] != "completed" ||
				w.Attrs["err"] != "commit completed: injected store failure" {
				t.Fatalf("warning %d: %v", i, w.Attrs)
			}
		}
		errs := h.find(slog.LevelError, "bgtask: terminal record not committed")
		if len(errs) != 1 || errs[0].Attrs["task_id"] != c {
			t.Fatalf("terminal-commit error records %+v, want one for %s", errs, c)
		}
		// Every status change is logged at Debug.
		debug := h.find(slog.LevelDebug, "bgtask: task status")
		if len(debug) != 3 { // p: ->running, ->failed; c: ->running (its terminal commit failed)
			t.Fatalf("%d status records at Debug, want 3", len(debug))
		}
	})
}

// The event observer sees every custom event, in order, whatever the wake
// policy, messages included; a panic in it is logged and changes nothing.
func TestEventObserverSeesEveryCustomEvent(t *testing.T) {
	t.Parallel()
	for _, wake := range []bgtype.WakePolicy{bgtype.WakeSilent, bgtype.WakeOnTerminal, bgtype.WakeOnActivity} {
		t.Run(string(wake), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := &captureHandler{}
				var mu sync.Mutex
				var got []string
				m := newTestManager(t, WithLogger(slog.New(h)), WithEventObserver(func(ev bgtype.Event) {
					mu.Lock()
					got = append(got, fmt.Sprintf("%s %s %s %s quiet=%v", ev.Kind, ev.Name, ev.EventType, ev.Payload, ev.Quiet))
					mu.Unlock()
					if ev.EventType == "boom" {
						panic("event observer boom")
					}
				}))
				id := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) {
					for _, typ := range []string{"progress", "boom", "progress"} {
						if err := tk.Emit(typ, len(typ)); err != nil {
							return nil, err
						}
					}
					return nil, tk.Emit(bgtype.EventTypeMessage, bgtype.Message{Content: "hi"})
				}, WithName("w"), WithWake(wake))
				waitStatus(t, m, id, bgtype.StatusCompleted)
				shutdownManager(t, m)
				quiet := wake == bgtype.WakeOnTerminal
				want := []string{
					fmt.Sprintf("custom w progress 8 quiet=%v", quiet),
					fmt.Sprintf("custom w boom 4 quiet=%v", quiet),
					fmt.Sprintf("custom w progress 8 quiet=%v", quiet),
					`custom w agent_message {"from":"","content":"hi"} quiet=false`,
				}
				if !slices.Equal(got, want) {
					t.Fatalf("observed\n%q\nwant\n%q", got, want)
				}
				recs := h.find(slog.LevelError, "bgtask: callback panicked")
				if len(recs) != 1 || recs[0].Attrs["callback"] != "WithEventObserver" || recs[0].Attrs["about"] != id || recs[0].Attrs["panic"] != "event observer boom" {
					t.Fatalf("panic records %+v, want one for %s", recs, id)
				}
			})
		})
	}
}

// The event observer hears of an end that could not be committed, which no
// transition reports.
func TestEventObserverSeesCommitFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFailingStore()
		var mu sync.Mutex
		var got []string
		m := newTestManager(t, WithStore(st), WithTuning(Tuning{CommitAttempts: 2, CommitBackoff: time.Millisecond}), WithEventObserver(func(ev bgtype.Event) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%s %s %s %s", ev.Kind, ev.TaskID, ev.Status, ev.Error))
			mu.Unlock()
		}))
		st.failTerminal(-1)
		id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return nil, nil }, WithWake(bgtype.WakeSilent))
		synctest.Wait()
		shutdownManager(t, m)
		want := []string{"commit_failed " + id + " completed commit completed: injected store failure"}
		if !slices.Equal(got, want) {
			t.Fatalf("observed %q, want %q", got, want)
		}
	})
}
