package bgtask

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

// TestCallbacksMayCallBack: every host callback may call the Manager, an
// Owner or a Receiver, even the very task or Receiver it hears of, without
// deadlocking it: one row per callback, each calling back from inside the
// callback and reporting what it got. Each row runs in a synctest bubble,
// so a deadlock fails the row ("all goroutines in bubble are blocked")
// instead of hanging the test.
func TestCallbacksMayCallBack(t *testing.T) {
	ok := func(context.Context, *Task) (any, error) { return "ok", nil }
	tests := []struct {
		name string
		// run sets up a Manager whose callback calls back into it and
		// sends what it got on got, then makes the callback due.
		run  func(t *testing.T, got chan<- string)
		want string
	}{
		{
			// The observer hears the start of the task, on the spawner's
			// goroutine, and reads it, cancels it and spawns another one.
			name: "WithObserver: Get and Cancel of the observed task, then Spawn",
			run: func(t *testing.T, got chan<- string) {
				var m *Manager
				m = newTestManager(t, WithObserver(func(tr Transition) {
					if tr.To != bgtype.StatusRunning || tr.Task.Name != "first" {
						return
					}
					meta, err := m.Get(context.Background(), tr.Task.ID)
					n, cerr := m.Cancel(context.Background(), tr.Task.ID)
					_, serr := m.Owner("thread-1").Spawn(context.Background(), ok, WithName("second"))
					got <- fmt.Sprintf("Get: %s %s, %v; Cancel: %d, %v; Spawn: %v", meta.Name, meta.Status, err, n, cerr, serr)
				}))
				if _, err := m.Owner("thread-1").Spawn(t.Context(), ok, WithName("first")); err != nil {
					t.Fatal(err)
				}
			},
			want: "Get: first running, <nil>; Cancel: 1, <nil>; Spawn: <nil>",
		},
		{
			// The event observer, on the emitter's goroutine, reads the
			// emitting task's latest event (it used to run with that
			// task's emitMu held) and cancels it.
			name: "WithEventObserver: LatestEvent and Cancel of the emitting task",
			run: func(t *testing.T, got chan<- string) {
				var m *Manager
				m = newTestManager(t, WithEventObserver(func(ev bgtype.Event) {
					le, found := m.Owner("thread-1").LatestEvent(ev.TaskID)
					n, err := m.Cancel(context.Background(), ev.TaskID)
					got <- fmt.Sprintf("LatestEvent: %s %s %v; Cancel: %d, %v", le.EventType, le.Payload, found, n, err)
				}))
				if _, err := m.Owner("thread-1").Spawn(t.Context(), func(ctx context.Context, task *Task) (any, error) {
					if err := task.Emit("ping", 1); err != nil {
						return nil, err
					}
					<-ctx.Done()
					return nil, ctx.Err()
				}); err != nil {
					t.Fatal(err)
				}
			},
			want: "LatestEvent: ping 1 true; Cancel: 1, <nil>",
		},
		{
			// OnWake hears an event a task emits between runs (it used to
			// run with the task's emitMu held), reads that task's latest
			// event, and opens the run itself and delivers.
			name: "OnWake: LatestEvent of the emitter, RunStart and Deliver",
			run: func(t *testing.T, got chan<- string) {
				m := newTestManager(t)
				var r *Receiver
				r, err := m.NewReceiver("thread-1", ReceiverConfig{OnWake: func(ev bgtype.Event) {
					le, found := r.Owner().LatestEvent(ev.TaskID)
					err := r.RunStart(context.Background(), RunInfo{RunID: "run-1"})
					evs, derr := r.Deliver(context.Background())
					var kinds []string
					for _, e := range evs {
						kinds = append(kinds, string(e.Kind)+" "+e.EventType)
					}
					got <- fmt.Sprintf("LatestEvent: %s %v; RunStart: %v; Deliver: %q, %v", le.EventType, found, err, kinds, derr)
				}})
				if err != nil {
					t.Fatal(err)
				}
				release := make(chan struct{})
				t.Cleanup(func() { close(release) })
				if _, err := r.Owner().Spawn(t.Context(), func(ctx context.Context, task *Task) (any, error) {
					if err := task.Emit("ping", 1); err != nil {
						return nil, err
					}
					<-release
					return "ok", nil
				}, WithWake(bgtype.WakeOnActivity)); err != nil {
					t.Fatal(err)
				}
			},
			want: `LatestEvent: ping true; RunStart: <nil>; Deliver: ["custom ping"], <nil>`,
		},
		{
			// The pending-owner function spawns for the owner it is told
			// of and reads the Manager's snapshot of it.
			name: "WithOnPendingOwner: Spawn and Wait",
			run: func(t *testing.T, got chan<- string) {
				var m *Manager
				made := make(chan struct{}) // the call may come before New returned
				m = newTestManager(t, WithStore(pendingFixture(t)), WithOnPendingOwner(func(owner string) {
					<-made
					if owner != "thread-news" {
						return
					}
					id, err := m.Owner(owner).Spawn(context.Background(), ok)
					meta, werr := m.Wait(context.Background(), id)
					got <- fmt.Sprintf("Spawn: %v; Wait: %s, %v", err, meta.Status, werr)
				}))
				close(made)
			},
			want: "Spawn: <nil>; Wait: completed, <nil>",
		},
		{
			// OnRunCanceled ends the cancelled run itself.
			name: "OnRunCanceled: RunEnd of the cancelled run",
			run: func(t *testing.T, got chan<- string) {
				m := newTestManager(t)
				var r *Receiver
				r, err := m.NewReceiver("thread-1", ReceiverConfig{OnRunCanceled: func(run, reason string) {
					err := r.RunEnd(context.Background(), RunOutcome{RunID: run})
					got <- fmt.Sprintf("%s %s; RunEnd: %v; Running: %v", run, reason, err, r.Running())
				}})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Owner().CancelRun("run-1", WithReason("user stop")); err != nil {
					t.Fatal(err)
				}
			},
			want: "run-1 user stop; RunEnd: <nil>; Running: false",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := make(chan string, 4)
				tc.run(t, got)
				if g := <-got; g != tc.want {
					t.Fatalf("the callback got %q, want %q", g, tc.want)
				}
			})
		})
	}
}

// TestCallbacksInOrderOnePanicLogged: one task's events reach the event
// observer in order; a panic in it is recovered and logged with the
// callback's name, and the next event is still observed.
func TestCallbacksInOrderOnePanicLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, log := newCapture()
		var seen []string // one call at a time: no lock needed, -race checks it
		m := newTestManager(t, WithLogger(log), WithEventObserver(func(ev bgtype.Event) {
			seen = append(seen, ev.EventType)
			if ev.EventType == "b" {
				panic("host bug")
			}
		}))
		id, err := m.Owner("thread-1").Spawn(t.Context(), func(_ context.Context, task *Task) (any, error) {
			for _, typ := range []string{"a", "b", "c", "d"} {
				if err := task.Emit(typ, nil); err != nil {
					return nil, err
				}
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, m, id)
		shutdownManager(t, m)
		if want := []string{"a", "b", "c", "d"}; !slices.Equal(seen, want) {
			t.Fatalf("observer saw %q, want %q", seen, want)
		}
		panics := h.find(slog.LevelError, "bgtask: callback panicked")
		if len(panics) != 1 || panics[0].Attrs["callback"] != "WithEventObserver" || panics[0].Attrs["about"] != id || panics[0].Attrs["panic"] != "host bug" {
			t.Fatalf("logged %+v, want one panic of WithEventObserver about %s", panics, id)
		}
	})
}

// TestCallbacksNoGoroutineWithout: a spawn and its end queue nothing for
// the callback goroutine, without callbacks and with observers (called on
// the goroutines of the spawn and of the end): no handoff is added.
func TestCallbacksNoGoroutineWithout(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithObserver(func(Transition) {}), WithEventObserver(func(bgtype.Event) {})}} {
		callbacksQueueNothing(t, opts)
	}
}

func callbacksQueueNothing(t *testing.T, opts []Option) {
	m := newTestManager(t, opts...)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	spawnCompleteOnce(t, o, ib, nil)
	m.calls.mu.Lock()
	running, queued := m.calls.running, len(m.calls.queue)
	m.calls.mu.Unlock()
	if running || queued != 0 {
		t.Fatalf("callback goroutine running %v, %d calls queued; want none", running, queued)
	}
	shutdownManager(t, m)
}
