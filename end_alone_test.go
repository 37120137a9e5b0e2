package bgtask

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

// TestLoneEndStartsNoRecorder: a lone task on a goroutine started for it
// (no idle worker, as after the pool's workers expired between an agent's
// turns) records its own end: no goroutine is started to record it, and
// the owner's event comes after the record is committed. Before decision
// 815 each such end started a recorder (recordApart): a third goroutine
// between the task and its owner.
func TestLoneEndStartsNoRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		m.workers.SetMax(0) // no worker parks: every task starts a goroutine
		o := m.Owner("a")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		for i := range n {
			id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return i, nil })
			if err := ib.Wait(t.Context()); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			evs := ib.Drain()
			if len(evs) != 1 || evs[0].TaskID != id || evs[0].Kind != bgtype.EventCompleted || string(evs[0].Result) != fmt.Sprint(i) {
				t.Fatalf("task %d: events %+v, want one completed %s with %d", i, evs, id, i)
			}
			// Committed before told.
			if got := getTask(t, m, id); got.Status != bgtype.StatusCompleted || string(got.Result) != fmt.Sprint(i) {
				t.Fatalf("task %d after its event: %s %s, want completed %d", i, got.Status, got.Result, i)
			}
		}
		if got := m.counters.recorders.Load(); got != 0 {
			t.Errorf("%d recorder goroutines started for %d lone ends, want 0", got, n)
		}
		if s := m.Stats(); s.Completed != n || s.Live != 0 {
			t.Errorf("Stats %+v, want %d completed, none live", s, n)
		}
	})
}

// TestEndsTogetherStillRecordedApart: tasks on goroutines started for them
// that end together keep their ends off their first stacks (decision 770):
// the first to end is not alone (the others are live), so a recorder takes
// the ends; every event arrives once, after its record.
func TestEndsTogetherStillRecordedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("a")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var release sync.WaitGroup
		release.Add(1)
		ids := make(map[string]bool, n)
		for range n {
			ids[spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
				release.Wait()
				return 42, nil
			})] = false
		}
		synctest.Wait()
		release.Done()
		for got := 0; got < n; {
			if err := ib.Wait(t.Context()); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			for _, ev := range ib.Drain() {
				seen, ok := ids[ev.TaskID]
				if !ok || seen || ev.Kind != bgtype.EventCompleted || string(ev.Result) != "42" {
					t.Fatalf("event %+v: want one completed 42 of each task", ev)
				}
				ids[ev.TaskID] = true
				got++
			}
		}
		if got := m.counters.recorders.Load(); got < 1 {
			t.Errorf("%d recorder goroutines started for %d ends together, want at least 1", got, n)
		}
	})
}
