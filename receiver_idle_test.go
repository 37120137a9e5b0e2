package bgtask

import (
	"context"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/bgtask/bgtask/bgtype"
)

// idleHeld lists what a Receiver holds beyond its fixed fields, and what the
// Manager holds for its owner beyond the Receiver itself.
func idleHeld(m *Manager, p *Receiver) []string {
	var held []string
	p.mu.Lock()
	if p.inbox != nil {
		held = append(held, "run inbox")
	}
	if p.older != nil {
		held = append(held, "older inboxes")
	}
	if p.drained != nil {
		held = append(held, "drained map")
	}
	if p.runID != "" {
		held = append(held, "run id")
	}
	p.mu.Unlock()
	if p.idle.Load() != nil {
		held = append(held, "idle inbox")
	}
	m.inboxMu.RLock()
	if m.inboxes[p.owner.id] != nil {
		held = append(held, "bound inbox")
	}
	m.inboxMu.RUnlock()
	return held
}

// An idle owner's Plugin, before its first run or after runs that are
// over, holds no inbox and no map: the closed inbox that takes events
// between runs is made by the first such event, which is then kept,
// handed to OnWake and delivered by the next run, once each.
func TestIdlePluginHoldsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs int
	}{
		{"before its first run", 0},
		{"after one run", 1},
		{"after three runs", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			var mu sync.Mutex
			var woken []string
			p, err := m.NewReceiver("thread-1", ReceiverConfig{OnWake: func(ev bgtype.Event) {
				mu.Lock()
				woken = append(woken, ev.TaskID+" "+string(ev.Kind))
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			for range tc.runs {
				if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
				if msgs, err := p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
					t.Fatalf("Deliver = %d messages, %v; want none", len(msgs), err)
				}
				if pending, err := p.Pending(t.Context()); err != nil || pending {
					t.Fatalf("StepEnd = %v, %v; want false, nil", pending, err)
				}
				if err := p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
					t.Fatal(err)
				}
			}
			if held := idleHeld(m, p); len(held) != 0 {
				t.Fatalf("idle Plugin holds %q, want nothing", held)
			}

			id, err := p.Owner().Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "ok", nil })
			if err != nil {
				t.Fatal(err)
			}
			waitTask(t, m, id)
			if held := idleHeld(m, p); !slices.Equal(held, []string{"idle inbox"}) {
				t.Fatalf("after an event between runs the Plugin holds %q, want [idle inbox]", held)
			}
			m.calls.wait() // OnWake is called on the callback goroutine
			mu.Lock()
			got := slices.Clone(woken)
			mu.Unlock()
			if want := []string{id + " " + string(bgtype.EventCompleted)}; !slices.Equal(got, want) {
				t.Fatalf("OnWake heard %q, want %q", got, want)
			}
			if err := p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			if msgs, err := p.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(msgs), []string{id}) {
				t.Fatalf("next run delivered %q, %v; want %s once", eventIDs(msgs), err, id)
			}
			if msgs, err := p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
				t.Fatalf("second Deliver = %q, %v; want nothing", eventIDs(msgs), err)
			}
			if err := p.RunEnd(t.Context(), RunOutcome{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Concurrent first uses of an idle Plugin's inbox (Manager.Inbox, the
// owner's tasks ending together between runs) share one closed inbox:
// every event is kept once.
func TestIdleInboxMadeOnce(t *testing.T) {
	m := newTestManager(t)
	p, err := m.NewReceiver("thread-1", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	got := make([]*Inbox, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range got {
		wg.Go(func() {
			<-start
			ib, err := m.Inbox("thread-1")
			if err != nil {
				t.Error(err)
			}
			got[i] = ib
		})
	}
	close(start)
	wg.Wait()
	for i, ib := range got {
		if ib == nil || ib != p.idle.Load() || !ib.Closed() {
			t.Fatalf("Inbox call %d returned %p (closed %v), want the Plugin's one closed idle inbox %p", i, ib, ib != nil && ib.Closed(), p.idle.Load())
		}
	}
	release := make(chan struct{})
	ids := make([]string, n)
	for i := range ids {
		ids[i], err = p.Owner().Spawn(t.Context(), func(context.Context, *Task) (any, error) {
			<-release
			return "ok", nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for _, id := range ids {
		waitTask(t, m, id)
	}
	if ib := p.idle.Load(); ib != got[0] {
		t.Fatalf("after the ends the idle inbox is %p, want the one made first, %p", ib, got[0])
	}
	if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	delivered := eventIDs(msgs)
	slices.Sort(delivered)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(delivered, want) {
		t.Fatalf("delivered %q, want each of %q once", delivered, want)
	}
}

// The structs every idle owner and every parked task pay for stay in their
// size classes: a Plugin in 256 bytes; a Task, allocated with its record
// (newTaskRecord), in 320 with the in-memory store's entry and in 288 with
// a private record.
func TestIdleStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		got, max uintptr
	}{
		{"Receiver", unsafe.Sizeof(Receiver{}), 200},
		{"Task with its entry", unsafe.Sizeof(taskEntry{}), 320},
		{"Task with its record", unsafe.Sizeof(taskRec{}), 288},
	} {
		if tc.got > tc.max {
			t.Errorf("%s is %d bytes, want at most %d", tc.name, tc.got, tc.max)
		}
	}
}
