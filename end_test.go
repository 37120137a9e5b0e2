package bgtask

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

// TestEndsWaitForTheirRecorder: while one goroutine records the ends of
// the moment, a task that ends leaves its end on the Manager's list and its
// goroutine goes on; the recorder then commits a MemoryStore's terminal
// record, and for every store queues the events (or hands them to a closed
// inbox's fallback) in the order the tasks ended, each once, each after
// its record is committed. With an observer the end is not batched.
func TestEndsWaitForTheirRecorder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       func() []Option
		closed     bool          // the owner's inbox is closed, with a fallback
		listed     int           // ends left on the list for the recorder
		beforeRec  bgtype.Status // the records before the recorder ran
		eventsSoon bool          // the events are there before the recorder ran
	}{
		{"memory store", func() []Option { return nil }, false, 3, bgtype.StatusRunning, false},
		{"memory store, closed inbox", func() []Option { return nil }, true, 3, bgtype.StatusRunning, false},
		{"another store", func() []Option { return []Option{WithStore(&countingStore{Store: memstore.New()})} }, false, 3, bgtype.StatusCompleted, false},
		{"another store, closed inbox", func() []Option { return []Option{WithStore(&countingStore{Store: memstore.New()})} }, true, 3, bgtype.StatusCompleted, false},
		{"memory store with an observer", func() []Option { return []Option{WithObserver(func(Transition) {})} }, false, 0, bgtype.StatusCompleted, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t, tc.opts()...)
				o := m.Owner("a")
				var got []bgtype.Event // the closed inbox's fallback
				ib := NewInbox(InboxConfig{OnClosed: func(ev bgtype.Event) { got = append(got, ev) }})
				if _, err := m.BindInbox("a", ib); err != nil {
					t.Fatal(err)
				}
				m.endsBusy.Store(true) // another goroutine records ends right now

				var ids []string
				var gates []chan struct{}
				for i := range 3 {
					gate := make(chan struct{})
					gates = append(gates, gate)
					ids = append(ids, spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
						<-gate
						return i, nil
					}))
				}
				if tc.closed { // while the owner has tasks: it stays bound
					ib.Close()
				}
				for _, gate := range slices.Backward(gates) { // they end last first
					close(gate)
					synctest.Wait() // its goroutine went on: parked for the next task
				}
				slices.Reverse(ids)

				listed := 0
				for n := m.ends.Load(); n != nil; n = n.next {
					listed++
				}
				if listed != tc.listed {
					t.Fatalf("%d ends on the list, want %d", listed, tc.listed)
				}
				for _, id := range ids {
					if st := getTask(t, o, id).Status; st != tc.beforeRec {
						t.Errorf("%s before the recorder: %s, want %s", id, st, tc.beforeRec)
					}
				}
				if n := ib.Len() + len(got); (n == 3) != tc.eventsSoon || (n != 0 && n != 3) {
					t.Fatalf("%d events before the recorder, want them there: %v", n, tc.eventsSoon)
				}

				for m.retireEnds() { // the test is the recorder
				}
				m.endsBusy.Store(false)

				if !tc.closed {
					got = ib.Drain()
				}
				if len(got) != 3 {
					t.Fatalf("events %+v, want 3", got)
				}
				for i, ev := range got {
					want := strconv.Itoa(2 - i) // the tasks ended last first
					if ev.Kind != bgtype.EventCompleted || ev.TaskID != ids[i] || string(ev.Result) != want {
						t.Errorf("event %d = %s %s %s, want completed %s %s", i, ev.Kind, ev.TaskID, ev.Result, ids[i], want)
					}
					if rec := waitTask(t, o, ev.TaskID); rec.Status != bgtype.StatusCompleted || string(rec.Result) != want {
						t.Errorf("record of %s: %s %s, want completed %s", ev.TaskID, rec.Status, rec.Result, want)
					}
				}
				if m.ends.Load() != nil {
					t.Errorf("ends left on the list after the recorder")
				}
			})
		})
	}
}
