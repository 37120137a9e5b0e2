package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

func custom(task, typ string, payload string) bgtype.Event {
	return bgtype.Event{Kind: bgtype.EventCustom, TaskID: task, EventType: typ, Payload: json.RawMessage(payload)}
}

func seqEvent(sender, seq int) bgtype.Event {
	return bgtype.Event{Kind: bgtype.EventCustom, TaskID: "task_s" + strconv.Itoa(sender), EventType: "seq", Payload: json.RawMessage(strconv.Itoa(seq))}
}

func decodeSeq(t testing.TB, ev bgtype.Event) (sender, seq int) {
	t.Helper()
	s, err := strconv.Atoi(ev.TaskID[len("task_s"):])
	if err != nil {
		t.Fatalf("bad task id %q", ev.TaskID)
	}
	q, err := strconv.Atoi(string(ev.Payload))
	if err != nil {
		t.Fatalf("bad payload %q", ev.Payload)
	}
	return s, q
}

func mustSend(t testing.TB, ib *Inbox, evs ...bgtype.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := ib.Send(ev); err != nil {
			t.Fatalf("Send(%+v): %v", ev, err)
		}
	}
}

func TestInboxSendDrainFIFO(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{})
	want := []bgtype.Event{
		custom("task_1", "progress", `{"type":"progress","pct":50}`),
		custom("task_2", "note", `"done"`),
		{Kind: bgtype.EventCompleted, TaskID: "task_1", Result: json.RawMessage(`1`)},
		custom("task_1", "progress", `{"pct":60}`), // not coalesced without the option
		{Kind: bgtype.EventFailed, TaskID: "task_2", Error: "x"},
	}
	mustSend(t, ib, want...)
	if got := ib.Len(); got != len(want) {
		t.Fatalf("Len: got %d, want %d", got, len(want))
	}
	got := ib.Drain()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Drain:\n got  %+v\n want %+v", got, want)
	}
	if got := ib.Drain(); got != nil {
		t.Fatalf("second Drain: got %+v, want nil", got)
	}
	if got := ib.Len(); got != 0 {
		t.Fatalf("Len after drain: got %d", got)
	}
	// The drained slice is the caller's: later sends do not write into it.
	mustSend(t, ib, custom("task_3", "x", `3`))
	if got[0].TaskID != "task_1" {
		t.Fatalf("drained slice changed by a later send: %+v", got[0])
	}
	if got := ib.Drain(); len(got) != 1 || got[0].TaskID != "task_3" {
		t.Fatalf("third Drain: got %+v", got)
	}
}

func TestInboxDrainEmpty(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{})
	if got := ib.Drain(); got != nil {
		t.Fatalf("got %#v, want nil", got)
	}
	if got := ib.AppendDrain(nil); got != nil {
		t.Fatalf("AppendDrain(nil): got %#v, want nil", got)
	}
}

func TestInboxAppendDrain(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{})
	first := custom("task_0", "keep", `0`)
	buf := make([]bgtype.Event, 1, 8)
	buf[0] = first
	if got := ib.AppendDrain(buf); len(got) != 1 || &got[0] != &buf[0] {
		t.Fatalf("empty AppendDrain: got %+v, want the same buffer", got)
	}
	evs := []bgtype.Event{custom("task_1", "a", `1`), custom("task_2", "b", `2`)}
	mustSend(t, ib, evs...)
	got := ib.AppendDrain(buf)
	if want := append([]bgtype.Event{first}, evs...); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if &got[0] != &buf[0] {
		t.Fatalf("AppendDrain reallocated although the buffer had room")
	}
	// Reuse: truncate and drain again.
	mustSend(t, ib, custom("task_3", "c", `3`))
	got = ib.AppendDrain(got[:0])
	if len(got) != 1 || got[0].TaskID != "task_3" || &got[0] != &buf[0] {
		t.Fatalf("reuse: got %+v", got)
	}
	if ib.Len() != 0 {
		t.Fatalf("Len after AppendDrain: %d", ib.Len())
	}
}

// Several drainers race several senders: each event is delivered once in
// total, and the events of one sender arrive in the order it sent them.
func TestInboxConcurrentDrainers(t *testing.T) {
	t.Parallel()
	const senders, perSender, drainers = 4, 500, 3
	var fallback []bgtype.Event
	ib := NewInbox(InboxConfig{OnClosed: func(ev bgtype.Event) { fallback = append(fallback, ev) }})

	batches := make([][][]bgtype.Event, drainers) // per drainer, its batches in order
	var dwg, swg sync.WaitGroup
	for d := range drainers {
		dwg.Go(func() {
			var buf []bgtype.Event
			for {
				if err := ib.Wait(context.Background()); err != nil {
					if !errors.Is(err, ErrInboxClosed) {
						t.Errorf("drainer %d: Wait: %v", d, err)
					}
					return
				}
				buf = ib.AppendDrain(buf[:0])
				if len(buf) > 0 {
					batches[d] = append(batches[d], append([]bgtype.Event(nil), buf...))
				}
			}
		})
	}
	for s := range senders {
		swg.Go(func() {
			for q := range perSender {
				if err := ib.Send(seqEvent(s, q)); err != nil {
					t.Errorf("sender %d: Send: %v", s, err)
					return
				}
			}
		})
	}
	swg.Wait()
	ib.Close() // what no drainer took goes to the fallback, in order
	dwg.Wait()

	seen := make([][]int, senders)
	for s := range seen {
		seen[s] = make([]int, perSender)
	}
	checkOrder := func(where string, evs []bgtype.Event, last []int) {
		for _, ev := range evs {
			s, q := decodeSeq(t, ev)
			seen[s][q]++
			if q <= last[s] {
				t.Fatalf("%s: sender %d: seq %d after %d", where, s, q, last[s])
			}
			last[s] = q
		}
	}
	drained := 0
	for d := range drainers {
		last := []int{-1, -1, -1, -1}
		for _, b := range batches[d] {
			checkOrder(fmt.Sprintf("drainer %d", d), b, last)
			drained += len(b)
		}
	}
	checkOrder("fallback", fallback, []int{-1, -1, -1, -1})
	for s := range senders {
		for q, n := range seen[s] {
			if n != 1 {
				t.Fatalf("sender %d seq %d delivered %d times", s, q, n)
			}
		}
	}
	st := ib.Stats()
	if st.Sent != senders*perSender || drained+len(fallback) != senders*perSender || st.Fallback != int64(len(fallback)) {
		t.Fatalf("stats %+v, drained %d, fallback %d", st, drained, len(fallback))
	}
}

// Each batch of one drain holds, per sender, a contiguous run that follows
// the previous batch of any drainer: checked by merging in drain order.
func TestInboxDrainIsAtomic(t *testing.T) {
	t.Parallel()
	const senders, perSender = 3, 300
	ib := NewInbox(InboxConfig{})
	var mu sync.Mutex // orders drains so their batches can be merged
	var all []bgtype.Event
	var swg, dwg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		dwg.Go(func() {
			for {
				mu.Lock()
				all = ib.AppendDrain(all)
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	for s := range senders {
		swg.Go(func() {
			for q := range perSender {
				mustSend(t, ib, seqEvent(s, q))
			}
		})
	}
	swg.Wait()
	close(stop)
	dwg.Wait()
	all = ib.AppendDrain(all)
	next := make([]int, senders)
	for _, ev := range all {
		s, q := decodeSeq(t, ev)
		if q != next[s] {
			t.Fatalf("sender %d: got seq %d, want %d", s, q, next[s])
		}
		next[s]++
	}
	for s, n := range next {
		if n != perSender {
			t.Fatalf("sender %d: %d events, want %d", s, n, perSender)
		}
	}
}

func TestInboxWait(t *testing.T) {
	t.Parallel()
	t.Run("returns nil when events are queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			mustSend(t, ib, custom("task_1", "x", `1`))
			start := time.Now()
			if err := ib.Wait(t.Context()); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("Wait took %v of fake time", d)
			}
			if ib.Len() != 1 {
				t.Fatalf("Wait consumed events: Len %d", ib.Len())
			}
		})
	})
	t.Run("blocks until a send", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			done := make(chan error, 3)
			for range 3 {
				go func() { done <- ib.Wait(context.Background()) }()
			}
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v before any send", err)
			default:
			}
			mustSend(t, ib, custom("task_1", "x", `1`))
			synctest.Wait()
			for range 3 {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Wait: %v", err)
					}
				default:
					t.Fatal("a waiter was not woken by the send")
				}
			}
		})
	})
	t.Run("a drained wakeup waits again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			mustSend(t, ib, custom("task_1", "x", `1`))
			ib.Drain()
			done := make(chan error, 1)
			go func() { done <- ib.Wait(context.Background()) }()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v on an empty inbox", err)
			default:
			}
			ib.Close()
			synctest.Wait()
			if err := <-done; !errors.Is(err, ErrInboxClosed) {
				t.Fatalf("got %v, want ErrInboxClosed", err)
			}
		})
	})
	t.Run("returns the ctx error at the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := ib.Wait(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want DeadlineExceeded", err)
			}
			if d := time.Since(start); d != 1500*time.Millisecond {
				t.Fatalf("Wait returned after %v, want exactly 1.5s", d)
			}
			// The abandoned wake channel does not break a later waiter.
			time.AfterFunc(time.Second, func() {
				if err := ib.Send(custom("task_1", "x", `1`)); err != nil {
					t.Errorf("Send: %v", err)
				}
			})
			start = time.Now()
			if err := ib.Wait(t.Context()); err != nil {
				t.Fatalf("second Wait: %v", err)
			}
			if d := time.Since(start); d != time.Second {
				t.Fatalf("second Wait returned after %v, want 1s", d)
			}
		})
	})
	t.Run("returns Canceled when ctx is cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- ib.Wait(ctx) }()
			synctest.Wait()
			cancel()
			synctest.Wait()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want Canceled", err)
			}
			// An already-ended ctx with queued events: the events win.
			mustSend(t, ib, custom("task_1", "x", `1`))
			if err := ib.Wait(ctx); err != nil {
				t.Fatalf("Wait with events and a done ctx: %v", err)
			}
		})
	})
	t.Run("a waiter that left does not hide the others", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			left, stayed := make(chan error, 1), make(chan error, 2)
			go func() { left <- ib.Wait(ctx) }()
			go func() { stayed <- ib.Wait(t.Context()) }()
			synctest.Wait()
			cancel()
			synctest.Wait()
			if err := <-left; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter: got %v, want Canceled", err)
			}
			go func() { stayed <- ib.Wait(t.Context()) }() // a third one, after the leave
			synctest.Wait()
			mustSend(t, ib, custom("task_1", "x", `1`))
			synctest.Wait()
			for i := range 2 {
				select {
				case err := <-stayed:
					if err != nil {
						t.Fatalf("waiter %d: %v", i, err)
					}
				default:
					t.Fatalf("waiter %d was not woken by the send", i)
				}
			}
		})
	})
	t.Run("one waiter woken again and again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			for round := range 3 {
				done := make(chan error, 1)
				go func() { done <- ib.Wait(t.Context()) }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("round %d: Wait returned %v on an empty inbox", round, err)
				default:
				}
				mustSend(t, ib, custom("task_1", "x", `1`))
				synctest.Wait()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("round %d: Wait: %v", round, err)
					}
				default:
					t.Fatalf("round %d: the waiter was not woken", round)
				}
				if got := len(ib.Drain()); got != 1 {
					t.Fatalf("round %d: drained %d events, want 1", round, got)
				}
			}
		})
	})
	t.Run("returns ErrInboxClosed after Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ib := NewInbox(InboxConfig{})
			done := make(chan error, 1)
			go func() { done <- ib.Wait(context.Background()) }()
			synctest.Wait()
			ib.Close()
			synctest.Wait()
			if err := <-done; !errors.Is(err, ErrInboxClosed) {
				t.Fatalf("blocked waiter: got %v, want ErrInboxClosed", err)
			}
			if err := ib.Wait(context.Background()); !errors.Is(err, ErrInboxClosed) {
				t.Fatalf("later Wait: got %v, want ErrInboxClosed", err)
			}
			if err := ib.Wait(t.Context()); err != ErrInboxClosed {
				t.Fatalf("Wait returns %v, want the sentinel itself", err)
			}
		})
	})
}

func TestInboxClose(t *testing.T) {
	t.Parallel()
	var got []bgtype.Event
	ib := NewInbox(InboxConfig{OnClosed: func(ev bgtype.Event) { got = append(got, ev) }})
	left := []bgtype.Event{
		custom("task_1", "a", `1`),
		{Kind: bgtype.EventCompleted, TaskID: "task_1", Result: json.RawMessage(`{"r":1}`)},
		custom("task_2", "b", `2`),
	}
	mustSend(t, ib, custom("task_0", "drained", `0`))
	ib.Drain()
	mustSend(t, ib, left...)
	if ib.Closed() {
		t.Fatal("Closed before Close")
	}
	ib.Close()
	if !ib.Closed() {
		t.Fatal("not Closed after Close")
	}
	if !reflect.DeepEqual(got, left) {
		t.Fatalf("fallback at Close:\n got  %+v\n want %+v", got, left)
	}
	if ib.Len() != 0 || ib.Drain() != nil {
		t.Fatalf("events left after Close")
	}
	late := bgtype.Event{Kind: bgtype.EventFailed, TaskID: "task_2", Error: "late"}
	if err := ib.Send(late); err != ErrInboxClosed {
		t.Fatalf("Send after Close: got %v, want ErrInboxClosed", err)
	}
	if want := append(append([]bgtype.Event(nil), left...), late); !reflect.DeepEqual(got, want) {
		t.Fatalf("fallback after a late send:\n got  %+v\n want %+v", got, want)
	}
	ib.Close() // idempotent: nothing is handed over twice
	ib.Close()
	if len(got) != len(left)+1 {
		t.Fatalf("second Close called the fallback again: %d events", len(got))
	}
	if err := ib.Send(late); !errors.Is(err, ErrInboxClosed) {
		t.Fatalf("second late Send: got %v", err)
	}
	st := ib.Stats()
	if want := (InboxStats{Len: 0, MaxLen: 3, Sent: 4, Coalesced: 0, Fallback: 5}); st != want {
		t.Fatalf("stats: got %+v, want %+v", st, want)
	}
}

// Close racing concurrent senders and a drainer: every event is either
// drained or handed to the fallback, exactly once, and a Send returns
// ErrInboxClosed exactly for the events it handed to the fallback itself.
func TestInboxCloseRacesSends(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		const senders, perSender = 4, 200
		var fbMu sync.Mutex
		var fallback []bgtype.Event
		ib := NewInbox(InboxConfig{OnClosed: func(ev bgtype.Event) {
			fbMu.Lock()
			fallback = append(fallback, ev)
			fbMu.Unlock()
		}})
		var refused [senders][perSender]bool
		var started sync.WaitGroup
		started.Add(senders)
		var swg, dwg sync.WaitGroup
		for s := range senders {
			swg.Go(func() {
				for q := range perSender {
					if q == perSender/4 {
						started.Done()
					}
					err := ib.Send(seqEvent(s, q))
					switch {
					case err == nil:
					case errors.Is(err, ErrInboxClosed):
						refused[s][q] = true
					default:
						t.Errorf("Send: %v", err)
					}
				}
			})
		}
		var drained []bgtype.Event
		dwg.Go(func() {
			for ib.Wait(context.Background()) == nil {
				drained = ib.AppendDrain(drained)
			}
		})
		started.Wait()
		ib.Close()
		swg.Wait()
		dwg.Wait()

		var seen [senders][perSender]int
		for _, ev := range drained {
			s, q := decodeSeq(t, ev)
			seen[s][q]++
			if refused[s][q] {
				t.Fatalf("round %d: sender %d seq %d refused but drained", round, s, q)
			}
		}
		var refusedN int64
		for _, ev := range fallback {
			s, q := decodeSeq(t, ev)
			seen[s][q]++
		}
		for s := range senders {
			for q := range perSender {
				if seen[s][q] != 1 {
					t.Fatalf("round %d: sender %d seq %d delivered %d times", round, s, q, seen[s][q])
				}
				if refused[s][q] {
					refusedN++
				}
			}
		}
		st := ib.Stats()
		if st.Sent+refusedN != senders*perSender || st.Fallback != int64(len(fallback)) || int64(len(drained))+st.Fallback != senders*perSender {
			t.Fatalf("round %d: stats %+v, refused %d, drained %d, fallback %d", round, st, refusedN, len(drained), len(fallback))
		}
	}
}

func TestInboxPanickingFallback(t *testing.T) {
	t.Parallel()
	h, log := newCapture()
	var calls []string
	ib := NewInbox(InboxConfig{Logger: log, OnClosed: func(ev bgtype.Event) {
		calls = append(calls, ev.TaskID)
		panic("fallback exploded")
	}})
	mustSend(t, ib, custom("task_1", "a", `1`), custom("task_2", "a", `2`))
	ib.Close() // must not panic, and must go on with the next event
	if err := ib.Send(custom("task_3", "a", `3`)); err != ErrInboxClosed {
		t.Fatalf("Send after Close: got %v", err)
	}
	if want := []string{"task_1", "task_2", "task_3"}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("fallback calls: got %v, want %v", calls, want)
	}
	recs := h.records()
	if len(recs) != 3 {
		t.Fatalf("logged %d records, want 3: %+v", len(recs), recs)
	}
	for i, r := range recs {
		if r.Level != slog.LevelError || r.Msg != "bgtask: inbox OnClosed fallback panicked" ||
			r.Attrs["panic"] != "fallback exploded" || r.Attrs["task_id"] != calls[i] {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if got := ib.Stats().Fallback; got != 3 {
		t.Fatalf("Stats.Fallback: got %d, want 3", got)
	}
}

func TestInboxNoFallback(t *testing.T) {
	t.Parallel()
	h, log := newCapture()
	ib := NewInbox(InboxConfig{Logger: log})
	mustSend(t, ib, custom("task_1", "a", `1`), bgtype.Event{Kind: bgtype.EventCompleted, TaskID: "task_1"})
	ib.Close()
	if err := ib.Send(bgtype.Event{Kind: bgtype.EventCanceled, TaskID: "task_2"}); !errors.Is(err, ErrInboxClosed) {
		t.Fatalf("Send after Close: got %v", err)
	}
	if got := ib.Stats().Fallback; got != 3 {
		t.Fatalf("Stats.Fallback: got %d, want 3", got)
	}
	recs := h.records()
	want := []struct{ id, kind string }{{"task_1", "custom"}, {"task_1", "completed"}, {"task_2", "cancelled"}}
	if len(recs) != len(want) {
		t.Fatalf("logged %d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		if r.Level != slog.LevelWarn || r.Msg != "bgtask: event dropped: inbox closed without fallback" ||
			r.Attrs["task_id"] != want[i].id || r.Attrs["kind"] != want[i].kind {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	// The default logger discards: no panic without a logger either.
	ib2 := NewInbox(InboxConfig{Logger: nil})
	mustSend(t, ib2, custom("task_1", "a", `1`))
	ib2.Close()
	if err := ib2.Send(custom("task_1", "a", `2`)); err != ErrInboxClosed {
		t.Fatalf("got %v", err)
	}
}

func TestInboxHighWater(t *testing.T) {
	t.Parallel()
	h, log := newCapture()
	ib := NewInbox(InboxConfig{HighWater: 4, Logger: log})
	warnLens := func() []string {
		var out []string
		for _, r := range h.records() {
			if r.Level != slog.LevelWarn || r.Msg != "bgtask: inbox depth is high" || r.Attrs["high_water"] != "4" {
				t.Fatalf("unexpected record %+v", r)
			}
			out = append(out, r.Attrs["len"])
		}
		return out
	}
	send := func(n int) {
		for i := range n {
			mustSend(t, ib, custom("task_1", "x", strconv.Itoa(i)))
		}
	}
	send(3)
	if got := warnLens(); got != nil {
		t.Fatalf("warned below the mark: %v", got)
	}
	send(1) // 4
	if got := warnLens(); !reflect.DeepEqual(got, []string{"4"}) {
		t.Fatalf("at 4: got %v", got)
	}
	send(3) // 5..7: no new warning
	if got := warnLens(); !reflect.DeepEqual(got, []string{"4"}) {
		t.Fatalf("at 7: got %v", got)
	}
	send(1) // 8 = 2n
	if got := warnLens(); !reflect.DeepEqual(got, []string{"4", "8"}) {
		t.Fatalf("at 8: got %v", got)
	}
	send(8) // 16 = 4n
	if got := warnLens(); !reflect.DeepEqual(got, []string{"4", "8", "16"}) {
		t.Fatalf("at 16: got %v", got)
	}
	ib.Drain() // resets the mark
	send(4)
	if got := warnLens(); !reflect.DeepEqual(got, []string{"4", "8", "16", "4"}) {
		t.Fatalf("after drain: got %v", got)
	}
	if st := ib.Stats(); st.MaxLen != 16 || st.Len != 4 || st.Sent != 20 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestInboxHighWaterDefaultAndDisabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		highWater int
		want      int
	}{
		{"default 256", 0, 1},
		{"disabled", -1, 0},
		{"disabled, any negative", -5, 0},
	} {
		h, log := newCapture()
		ib := NewInbox(InboxConfig{HighWater: tc.highWater, Logger: log})
		for i := range defaultHighWater + 1 {
			mustSend(t, ib, custom("task_1", "x", strconv.Itoa(i)))
		}
		recs := h.records()
		if len(recs) != tc.want {
			t.Fatalf("%s: %d warnings, want %d", tc.name, len(recs), tc.want)
		}
		if tc.want == 1 && recs[0].Attrs["len"] != "256" {
			t.Fatalf("%s: %+v", tc.name, recs[0])
		}
	}
}

func TestInboxStats(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{Coalesce: []string{"progress"}})
	if st := ib.Stats(); st != (InboxStats{}) {
		t.Fatalf("new inbox: %+v", st)
	}
	mustSend(t, ib, custom("task_1", "progress", `1`), custom("task_1", "progress", `2`), custom("task_1", "log", `3`))
	if st, want := ib.Stats(), (InboxStats{Len: 2, MaxLen: 2, Sent: 2, Coalesced: 1}); st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	ib.Drain()
	mustSend(t, ib, custom("task_2", "log", `1`))
	if st, want := ib.Stats(), (InboxStats{Len: 1, MaxLen: 2, Sent: 3, Coalesced: 1}); st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	ib.Close()
	if st, want := ib.Stats(), (InboxStats{Len: 0, MaxLen: 2, Sent: 3, Coalesced: 1, Fallback: 1}); st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
}

func TestInboxCoalescing(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{Coalesce: []string{"progress", "heartbeat"}})
	mustSend(t, ib,
		custom("task_a", "progress", `{"pct":10}`), // 0
		custom("task_b", "progress", `{"pct":1}`),  // 1
		custom("task_a", "log", `"l1"`),            // 2
		custom("task_a", "heartbeat", `1`),         // 3
		custom("task_a", "progress", `{"pct":20}`), // replaces 0
		custom("task_a", "log", `"l2"`),            // 4: other type, kept
		custom("task_b", "progress", `{"pct":2}`),  // replaces 1
		custom("task_a", "heartbeat", `2`),         // replaces 3
		custom("task_a", "progress", `{"pct":30}`), // replaces 0 again
		bgtype.Event{Kind: bgtype.EventCompleted, TaskID: "task_a", EventType: "progress", Result: json.RawMessage(`1`)}, // 5: terminal
		bgtype.Event{Kind: bgtype.EventCompleted, TaskID: "task_a", EventType: "progress", Result: json.RawMessage(`2`)}, // 6: terminal, never coalesced
		bgtype.Event{Kind: bgtype.EventFailed, TaskID: "task_b", EventType: "progress", Error: "x"},                      // 7
	)
	want := []bgtype.Event{
		custom("task_a", "progress", `{"pct":30}`),
		custom("task_b", "progress", `{"pct":2}`),
		custom("task_a", "log", `"l1"`),
		custom("task_a", "heartbeat", `2`),
		custom("task_a", "log", `"l2"`),
		{Kind: bgtype.EventCompleted, TaskID: "task_a", EventType: "progress", Result: json.RawMessage(`1`)},
		{Kind: bgtype.EventCompleted, TaskID: "task_a", EventType: "progress", Result: json.RawMessage(`2`)},
		{Kind: bgtype.EventFailed, TaskID: "task_b", EventType: "progress", Error: "x"},
	}
	if st := ib.Stats(); st.Coalesced != 4 || st.Sent != 8 || st.Len != 8 {
		t.Fatalf("stats: %+v", st)
	}
	if got := ib.Drain(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Drain:\n got  %+v\n want %+v", got, want)
	}
	// After a drain a new progress is queued again, at the end, and the
	// coalescing index follows the new positions.
	mustSend(t, ib,
		custom("task_c", "log", `0`),
		custom("task_a", "progress", `{"pct":40}`),
		custom("task_a", "progress", `{"pct":50}`),
	)
	want = []bgtype.Event{custom("task_c", "log", `0`), custom("task_a", "progress", `{"pct":50}`)}
	if got := ib.Drain(); !reflect.DeepEqual(got, want) {
		t.Fatalf("second Drain:\n got  %+v\n want %+v", got, want)
	}
	// A coalesced event left at Close reaches the fallback once, with the
	// latest payload.
	var fb []bgtype.Event
	ib2 := NewInbox(InboxConfig{Coalesce: []string{"progress"}, OnClosed: func(ev bgtype.Event) { fb = append(fb, ev) }})
	mustSend(t, ib2, custom("task_a", "progress", `1`), custom("task_a", "progress", `2`))
	ib2.Close()
	if want := []bgtype.Event{custom("task_a", "progress", `2`)}; !reflect.DeepEqual(fb, want) {
		t.Fatalf("fallback: got %+v, want %+v", fb, want)
	}
}

// Without the option nothing is coalesced.
func TestInboxNoCoalescingByDefault(t *testing.T) {
	t.Parallel()
	ib := NewInbox(InboxConfig{})
	mustSend(t, ib, custom("task_a", "progress", `1`), custom("task_a", "progress", `2`))
	if got := ib.Drain(); len(got) != 2 || string(got[1].Payload) != "2" {
		t.Fatalf("got %+v", got)
	}
	if st := ib.Stats(); st.Coalesced != 0 || st.Sent != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

// Close of an inbox with a waiter and concurrent senders leaves no goroutine
// and no blocked waiter.
func TestInboxCloseWakesAllWaiters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ib := NewInbox(InboxConfig{})
		var n atomic.Int32
		for range 5 {
			go func() {
				if errors.Is(ib.Wait(context.Background()), ErrInboxClosed) {
					n.Add(1)
				}
			}()
		}
		synctest.Wait()
		ib.Close()
		synctest.Wait()
		if got := n.Load(); got != 5 {
			t.Fatalf("%d waiters saw ErrInboxClosed, want 5", got)
		}
	})
}

// takeTerminal removes one task's queued terminal event and keeps the
// coalescing of the events queued after it.
func TestInboxTakeTerminal(t *testing.T) {
	ib := NewInbox(InboxConfig{Coalesce: []string{"step"}})
	for _, ev := range []bgtype.Event{
		{Kind: bgtype.EventCustom, TaskID: "a", EventType: "step", Payload: []byte(`1`)},
		{Kind: bgtype.EventCompleted, TaskID: "b"},
		{Kind: bgtype.EventCustom, TaskID: "c", EventType: "step", Payload: []byte(`1`)},
	} {
		if err := ib.Send(ev); err != nil {
			t.Fatal(err)
		}
	}
	if ib.takeTerminal("a") || ib.takeTerminal("x") {
		t.Fatal("took an event that is not a queued terminal one")
	}
	if !ib.takeTerminal("b") || ib.takeTerminal("b") {
		t.Fatal("takeTerminal(b): want it taken once")
	}
	if err := ib.Send(bgtype.Event{Kind: bgtype.EventCustom, TaskID: "c", EventType: "step", Payload: []byte(`2`)}); err != nil {
		t.Fatal(err)
	}
	if n := ib.loudLen(); n != 2 {
		t.Fatalf("%d events that wake, want 2", n)
	}
	got := ib.Drain()
	if len(got) != 2 || got[0].TaskID != "a" || got[1].TaskID != "c" || string(got[1].Payload) != "2" || string(got[0].Payload) != "1" {
		t.Fatalf("drained %+v", got)
	}
}

// TestInboxLongQueue: a queue longer than a segment (a burst's events
// before the owner drains) keeps its order, coalesces into any segment,
// gives up a terminal event from any segment, hands every undrained event
// to the fallback at Close in order, and is drained whole: whatever the
// drain, the events come back exactly once each, oldest first.
func TestInboxLongQueue(t *testing.T) {
	t.Parallel()
	n := 3*inboxSegment + 7
	tests := []struct {
		name  string
		drain func(ib *Inbox) []bgtype.Event
	}{
		{"Drain", (*Inbox).Drain},
		{"AppendDrain into a short buffer", func(ib *Inbox) []bgtype.Event { return ib.AppendDrain(make([]bgtype.Event, 0, 4)) }},
		{"Close to the fallback", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var fb []bgtype.Event
			ib := NewInbox(InboxConfig{Coalesce: []string{"progress"}, HighWater: -1, OnClosed: func(ev bgtype.Event) { fb = append(fb, ev) }})
			var want []bgtype.Event
			for i := range n {
				ev := bgtype.Event{Kind: bgtype.EventCompleted, TaskID: fmt.Sprintf("task_%04d", i)}
				if i == 5 {
					ev = custom("task_p", "progress", `1`) // in the first segment
				}
				mustSend(t, ib, ev)
				want = append(want, ev)
			}
			mustSend(t, ib, custom("task_p", "progress", `2`)) // coalesced into the first segment
			want[5] = custom("task_p", "progress", `2`)
			gone := inboxSegment + 3 // in the second segment
			if !ib.takeTerminal(want[gone].TaskID) {
				t.Fatalf("takeTerminal(%s) = false, want true", want[gone].TaskID)
			}
			want = append(want[:gone], want[gone+1:]...)
			mustSend(t, ib, custom("task_p", "progress", `3`)) // still coalesced, after the take
			want[5] = custom("task_p", "progress", `3`)
			if got := ib.Len(); got != len(want) {
				t.Fatalf("Len = %d, want %d", got, len(want))
			}
			var got []bgtype.Event
			if tc.drain == nil {
				ib.Close()
				got = fb
			} else {
				got = tc.drain(ib)
				if again := ib.Drain(); again != nil {
					t.Fatalf("second drain: %d events, want none", len(again))
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("drained %d events, want %d in order (first difference at %d)", len(got), len(want), firstDiff(got, want))
			}
			if tc.drain != nil { // the emptied segments serve the next burst
				for i := range n {
					mustSend(t, ib, bgtype.Event{Kind: bgtype.EventFailed, TaskID: fmt.Sprint(i)})
				}
				if got := ib.Drain(); len(got) != n || got[0].TaskID != "0" || got[n-1].TaskID != fmt.Sprint(n-1) {
					t.Fatalf("next burst: %d events, want %d in order", len(got), n)
				}
			}
		})
	}
}

// firstDiff returns the first index where a and b differ.
func firstDiff(a, b []bgtype.Event) int {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestWithInboxConfig: the Manager's inboxes take WithInboxConfig's
// coalescing and high-water mark, and the caller's slice is copied.
func TestWithInboxConfig(t *testing.T) {
	h, log := newCapture()
	types := []string{"step"}
	m := newTestManager(t, WithInboxConfig(InboxConfig{Coalesce: types, HighWater: 2, Logger: log}))
	types[0] = "other" // changes nothing: the option kept a copy
	o := m.Owner("a")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	id, err := o.Spawn(t.Context(), func(_ context.Context, tk *Task) (any, error) {
		for i := range 3 {
			if err := tk.Emit("step", i); err != nil {
				return nil, err
			}
		}
		return "done", tk.Emit("note", "x")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Wait(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range ib.Drain() {
		got = append(got, string(ev.Kind)+":"+ev.EventType+":"+string(ev.Payload))
	}
	want := []string{"custom:step:2", "custom:note:\"x\"", "completed::"}
	if !slices.Equal(got, want) {
		t.Fatalf("drained %q, want %q", got, want)
	}
	if n := len(h.find(slog.LevelWarn, "bgtask: inbox depth is high")); n != 1 {
		t.Fatalf("%d high-water warnings, want 1 (depth 2 of 3)", n)
	}
}
