package bgtask

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Stop waits for running tasks exactly until its context's deadline, then
// cuts what still runs: interrupted, its late result discarded, counted as
// interrupted; a task that ended in time keeps its own end.
func TestStopCutsAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithInstance("inst-deploy"))
		quick := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(3 * time.Second):
				return "in time", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		causes := make(chan error, 1)
		slow := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(time.Hour):
				return "too late", nil
			case <-ctx.Done():
				causes <- context.Cause(ctx)
				return "late result", nil
			}
		})
		synctest.Wait()
		err := stopWithin5s(t, m)
		want := fmt.Sprintf("bgtask: stop: 1 task(s) still running at the deadline were interrupted (%s): context deadline exceeded", slow)
		se, ok := errors.AsType[*ShutdownError](err)
		// The cut function may or may not have returned yet: Stop does not wait for it.
		if !ok || err.Error() != want || !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(se.Interrupted, []string{slow}) ||
			(se.Running != nil && !slices.Equal(se.Running, []string{slow})) {
			t.Fatalf("Stop: %v, want %q", err, want)
		}
		if c := <-causes; !errors.Is(c, ErrShutdown) || c != errStopCut {
			t.Fatalf("cause seen by the cut task: %v", c)
		}
		if got := getTask(t, m, quick); got.Status != bgtype.StatusCompleted || string(got.Result) != `"in time"` {
			t.Fatalf("quick task: %q %s, want completed", got.Status, got.Result)
		}
		got := getTask(t, m, slow)
		wantErr := `bgtask: interrupted: the runtime that ran it (instance "inst-deploy") shut down before it ended; it will not be re-run`
		if got.Status != bgtype.StatusInterrupted || got.Error != wantErr || got.ErrorKind != bgtype.KindInterrupted || got.Result != nil || got.Attempt != 1 {
			t.Fatalf("slow task: %+v, want interrupted %q on attempt 1", got, wantErr)
		}
		if st := m.Stats(); st.Interrupted != 1 || st.Completed != 1 {
			t.Fatalf("stats: %d interrupted, %d completed; want 1 and 1", st.Interrupted, st.Completed)
		}
		if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{bgtype.EventCompleted, quick}, {bgtype.EventInterrupted, slow}}) {
			t.Fatalf("events %v", evs)
		}
	})
}

// When every running task ends on its own before the deadline, Stop
// returns nil when the last one ends, having cancelled nothing; on an idle
// Manager it returns nil at once, even with a done context.
func TestStopWaitsForTasksToEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		id := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(2 * time.Second):
				return "done", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := m.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Stop returned after %v, want 2s (when the task ended)", d)
		}
		if got := getTask(t, m, id); got.Status != bgtype.StatusCompleted {
			t.Fatalf("task: %q, want completed", got.Status)
		}
		done, stop := context.WithCancel(t.Context())
		stop()
		if err := m.Stop(done); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if _, err := m.Owner("a").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Spawn after Stop: %v, want ErrClosed", err)
		}
	})
}

// A task whose function ignores its context does not hold Stop past its
// deadline: Stop records the cut itself (interrupted, fenced, one event)
// before it cancels the task's context, and returns at the deadline naming
// the task as interrupted and still running. When the function returns
// later, nothing more is recorded or delivered; a Shutdown before that
// names it as running, one after it returns nil.
func TestStopDoesNotWaitForAFunctionThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithInstance("inst-deploy"))
		release := make(chan struct{})
		seen := make(chan bgtype.Status, 1)
		var id string
		id = spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			seen <- getTask(t, m, id).Status // the cut is recorded before the cancel
			<-release                        // and then ignores it
			return "late result", nil
		})
		synctest.Wait()
		before := getTask(t, m, id)
		err := stopWithin5s(t, m)
		want := fmt.Sprintf("bgtask: stop: 1 task(s) still running at the deadline were interrupted (%s): context deadline exceeded", id)
		se, ok := errors.AsType[*ShutdownError](err)
		if !ok || err.Error() != want || !errors.Is(err, context.DeadlineExceeded) ||
			!slices.Equal(se.Interrupted, []string{id}) || !slices.Equal(se.Running, []string{id}) || se.Finishing != 0 {
			t.Fatalf("Stop: %#v (%v), want %q naming %s interrupted and running", se, err, want, id)
		}
		if st := <-seen; st != bgtype.StatusInterrupted {
			t.Fatalf("record when the task's context was cancelled: %q, want interrupted", st)
		}
		got := getTask(t, m, id)
		wantErr := `bgtask: interrupted: the runtime that ran it (instance "inst-deploy") shut down before it ended; it will not be re-run`
		if got.Status != bgtype.StatusInterrupted || got.Error != wantErr || got.ErrorKind != bgtype.KindInterrupted || got.Result != nil ||
			got.Attempt != before.Attempt+1 || got.FinishedAt.IsZero() {
			t.Fatalf("record after Stop: %+v, want interrupted %q on attempt %d", got, wantErr, before.Attempt+1)
		}
		if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{bgtype.EventInterrupted, id}}) {
			t.Fatalf("events after Stop: %v, want one interrupted", evs)
		}

		// A Shutdown while the function still runs waits for it until its
		// own deadline, and names it.
		short, cancelShort := context.WithTimeout(t.Context(), time.Second)
		defer cancelShort()
		err = m.Shutdown(short)
		se, ok = errors.AsType[*ShutdownError](err)
		if !ok || !slices.Equal(se.Running, []string{id}) || se.Finishing != 0 || se.Interrupted != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown while the cut function runs: %v, want it named running", err)
		}

		close(release) // the function returns at last: its result is discarded
		synctest.Wait()
		if after := getTask(t, m, id); !reflect.DeepEqual(after, got) {
			t.Fatalf("record changed after the function returned:\n%+v\nwas\n%+v", after, got)
		}
		if evs := drainKindIDs(t, m, "a"); len(evs) != 0 {
			t.Fatalf("events after the function returned: %v, want none", evs)
		}
		if st := m.Stats(); st.Interrupted != 1 || st.Completed != 0 {
			t.Fatalf("stats: %d interrupted, %d completed; want 1 and 0", st.Interrupted, st.Completed)
		}
		shutdownManager(t, m)
	})
}

// gateStore is a MemoryStore whose commits of the records that block
// picks wait: each sends its status on entered, then waits for release.
type gateStore struct {
	*memstore.Store
	block   func(bgtype.Status) bool
	entered chan bgtype.Status
	release chan struct{}
}

func newGateStore(block func(bgtype.Status) bool) *gateStore {
	return &gateStore{Store: memstore.New(), block: block, entered: make(chan bgtype.Status, 1), release: make(chan struct{})}
}

func (s *gateStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	for _, a := range actions {
		for _, meta := range a.Tasks {
			if s.block(meta.Status) {
				s.entered <- meta.Status
				<-s.release
			}
		}
	}
	return s.Store.Commit(ctx, owner, actions...)
}

// A task's function returning just as Stop cuts it ends the task once,
// whoever claims the end first: the task's goroutine (its function
// returned before the cut: completed, Stop returns nil) or Stop (it cut
// the task first: interrupted, what the function returned right after is
// discarded). Each order is forced by holding the first end's commit.
func TestStopAndAReturnRaceForTheEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cutFirst   bool
		wantStatus bgtype.Status
	}{
		{"function returns first", false, bgtype.StatusCompleted},
		{"stop cuts first", true, bgtype.StatusInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store := newGateStore(bgtype.Status.IsTerminal)
				m := newTestManager(t, WithStore(store))
				proceed := make(chan struct{})
				id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
					<-proceed // ignores its context
					return "done", nil
				})
				synctest.Wait()
				ctx, cancel := context.WithCancel(t.Context())
				stopped := make(chan error, 1)
				go func() { stopped <- m.Stop(ctx) }()
				synctest.Wait()                                    // Stop waits for the task
				first, second := func() { close(proceed) }, cancel // the function's end is being committed when Stop cuts
				if tc.cutFirst {
					first, second = cancel, func() { close(proceed) } // it returns while Stop commits the cut
				}
				first()
				if st := <-store.entered; st != tc.wantStatus {
					t.Fatalf("first end committed: %q, want %q", st, tc.wantStatus)
				}
				second()
				synctest.Wait()
				close(store.release)
				err := <-stopped
				if tc.cutFirst {
					se, ok := errors.AsType[*ShutdownError](err)
					if !ok || !slices.Equal(se.Interrupted, []string{id}) || se.Running != nil || !errors.Is(err, context.Canceled) {
						t.Fatalf("Stop: %v, want %s interrupted and nothing running", err, id)
					}
				} else if err != nil {
					t.Fatalf("Stop: %v, want nil", err)
				}
				shutdownManager(t, m)
				select {
				case st := <-store.entered:
					t.Fatalf("a second end was committed: %q", st)
				default:
				}
				if got := getTask(t, m, id); got.Status != tc.wantStatus {
					t.Fatalf("record: %q, want %q", got.Status, tc.wantStatus)
				}
				if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{bgtype.EventKind(tc.wantStatus), id}}) {
					t.Fatalf("events: %v, want one %s", evs, tc.wantStatus)
				}
				st := m.Stats()
				if n := st.Completed + st.Interrupted; n != 1 {
					t.Fatalf("stats: %d ends counted, want 1", n)
				}
			})
		})
	}
}

// A task that Stop cuts before its function was called (here: its first
// record is still being committed at the deadline) never calls it: its
// goroutine ends it interrupted, and Stop returns once that end is
// recorded.
func TestStopCutBeforeTheCallNeverCallsTheFunction(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newGateStore(func(st bgtype.Status) bool { return st == bgtype.StatusRunning })
		m := newTestManager(t, WithStore(store), WithInstance("inst-deploy"))
		spawned := make(chan string, 1)
		go func() {
			spawned <- spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
				t.Error("the function of a task cut before its call was called")
				return nil, nil
			})
		}()
		if st := <-store.entered; st != bgtype.StatusRunning {
			t.Fatalf("first commit: %q, want running", st)
		}
		done, cancel := context.WithCancel(t.Context())
		cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- m.Stop(done) }()
		synctest.Wait() // Stop cut it and waits for its end
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v before the cut task's end was recorded", err)
		default:
		}
		close(store.release)
		id := <-spawned
		err := <-stopped
		se, ok := errors.AsType[*ShutdownError](err)
		if !ok || !slices.Equal(se.Interrupted, []string{id}) || se.Running != nil || se.Finishing != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop: %v, want %s interrupted and nothing running", err, id)
		}
		got := getTask(t, m, id)
		wantErr := `bgtask: interrupted: the runtime that ran it (instance "inst-deploy") shut down before it ended; it will not be re-run`
		if got.Status != bgtype.StatusInterrupted || got.Error != wantErr || got.ErrorKind != bgtype.KindInterrupted || got.Attempt != 1 {
			t.Fatalf("record: %+v, want interrupted %q on attempt 1", got, wantErr)
		}
		if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{bgtype.EventInterrupted, id}}) {
			t.Fatalf("events: %v, want one interrupted", evs)
		}
		shutdownManager(t, m)
	})
}

// A task cancelled before Stop's deadline is not cut (its cancel stands),
// and Stop does not wait for its function either: it returns at the
// deadline naming it as running. The task ends cancelled when its function
// returns, with one event, and Shutdown then returns nil.
func TestStopDoesNotWaitForACanceledTask(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		release := make(chan struct{})
		id := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			<-release
			return nil, context.Cause(ctx)
		})
		synctest.Wait()
		if n, err := m.Owner("a").Cancel(t.Context(), id); n != 1 || err != nil {
			t.Fatalf("Cancel: %d, %v", n, err)
		}
		err := stopWithin5s(t, m)
		want := fmt.Sprintf("bgtask: shutdown: 1 task(s) did not stop (%s), 0 finishing: context deadline exceeded", id)
		se, ok := errors.AsType[*ShutdownError](err)
		if !ok || err.Error() != want || se.Interrupted != nil || !slices.Equal(se.Running, []string{id}) {
			t.Fatalf("Stop: %v, want %q", err, want)
		}
		if got := getTask(t, m, id); got.Status != bgtype.StatusRunning {
			t.Fatalf("record at Stop's return: %q, want running", got.Status)
		}
		close(release)
		shutdownManager(t, m)
		if got := getTask(t, m, id); got.Status != bgtype.StatusCanceled {
			t.Fatalf("record: %q, want cancelled", got.Status)
		}
		if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{bgtype.EventCanceled, id}}) {
			t.Fatalf("events: %v, want one cancelled", evs)
		}
	})
}

// stopWithin5s calls m.Stop with a deadline 5 s ahead (in a synctest
// bubble) and checks that it returns exactly at that deadline, not later.
func stopWithin5s(t *testing.T, m *Manager) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := m.Stop(ctx)
	if d := time.Since(start); d != 5*time.Second {
		t.Fatalf("Stop returned after %v, want 5s (its deadline)", d)
	}
	return err
}
