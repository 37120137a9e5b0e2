package bgtask

import (
	"context"
	"runtime"
	"testing"

	"github.com/bgtask/bgtask/internal/gstate"
)

// TestInboxWaitYieldsBeforeParking: a Wait on an empty inbox yields its P
// once before it parks (decision 750), so an event that a goroutine queues
// meanwhile finds the waiter runnable, not parked: the Send wakes nobody
// (no waiter counted) and the Wait returns on its next look. With one P
// the waiter runs until it yields, then this goroutine sends; the race
// detector shuffles run queues, so the waiter may run on and park first:
// some of the attempts must find it yielded (none did before).
// Not parallel: it sets GOMAXPROCS.
func TestInboxWaitYieldsBeforeParking(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 100 {
		if waitYielded(t) {
			return
		}
	}
	t.Fatal("in 100 attempts the waiter was parked in Wait before anything was sent, never runnable (yielded)")
}

// waitYielded runs one Wait on an empty inbox and reports whether it was
// runnable, not parked, when this goroutine next ran and sent it an event.
func waitYielded(t *testing.T) bool {
	ib := NewInbox(InboxConfig{})
	done := make(chan error, 1)
	go func() { done <- ib.Wait(context.Background()) }()
	state := ""
	for i := 0; state == ""; i++ { // until the waiter is in Wait
		if i == 1000 {
			t.Fatal("the waiter never reached Wait")
		}
		runtime.Gosched()
		state = gstate.Of("github.com/bgtask/bgtask.(*Inbox).Wait(")
	}
	ib.mu.Lock()
	waiters := ib.waiters
	ib.mu.Unlock()
	mustSend(t, ib, custom("task_1", "ping", "1"))
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v, want nil", err)
	}
	if got := ib.Drain(); len(got) != 1 || got[0].EventType != "ping" {
		t.Fatalf("drained %+v, want the one ping", got)
	}
	if state == "runnable" && waiters != 0 {
		t.Fatalf("%d waiters counted while the waiter yields, want 0", waiters)
	}
	return state == "runnable"
}
