package bgtask

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask/bgtype"
)

// defaultHighWater is the inbox depth at which an Inbox first logs a warning
// (InboxConfig.HighWater).
const defaultHighWater = 256

// Inbox is an agent's queue of task events: unbounded, first in first out.
//
// Delivery contract:
//   - Send never blocks and never drops while the inbox is open.
//   - Drain takes every queued event at once; with concurrent drainers each
//     event goes to exactly one of them.
//   - Events of one task arrive in the order the task produced them, and its
//     custom events before its terminal event.
//   - Close and Send are mutually exclusive: the events left undrained at
//     Close, and every event sent after it, go to the OnClosed fallback
//     exactly once each, so a completion that races the end of a run is
//     never lost. Without a fallback they are logged and dropped. The
//     undrained events reach the fallback in order; an event sent during
//     Close may reach it before them.
//   - Quiet custom events (Event.Quiet: progress under the default wake
//     policy), and custom events whose type is in InboxConfig.Coalesce,
//     replace the undrained event of the same task and type in place (the
//     latest payload wins); terminal events are never coalesced.
//   - Quiet events are queued and drained like any other, but do not wake
//     Wait: an idle owner is not woken by progress alone.
//   - With a durable Store, a host that drains an owner's inbox itself
//     calls Owner.MarkAnnounced with the ids of the terminal events it
//     takes, before it hands them on; otherwise the owner's next run
//     after a restart announces them again.
//
// The zero value is not usable: call NewInbox, or let the Manager make one
// per owner (Manager.Inbox). Safe for concurrent use.
type Inbox struct {
	onClosed  func(bgtype.Event)
	highWater int
	coalesce  map[string]bool
	logger    *slog.Logger
	shut      atomic.Bool // closed, for Closed without the lock; set with mu held

	mu       sync.Mutex       // guards the fields below
	events   []bgtype.Event   // the newest events: the segment being filled
	full     [][]bgtype.Event // the filled segments before events, oldest first (see queueLocked)
	fullN    int              // events in full
	freeSegs [][]bgtype.Event // emptied segments, kept for the next ones (the high-water mark, as one buffer would be)
	spare    []bgtype.Event   // an empty buffer for events: AppendDrain copies a batch out without the lock
	loud     int              // queued events that are not Quiet: what Wait waits for
	closed   bool
	wake     chan struct{} // the waiters' signal (see wakeLocked); nil until the first Wait
	waiters  int           // Wait calls blocked on wake
	pending  map[coalesceKey]int
	nextWarn int
	stats    InboxStats
	onClose  func(*Inbox)    // set by the Manager to forget a closed owner inbox
	stopped  <-chan struct{} // set by the Manager that made or bound it; closed when it has shut down
}

type coalesceKey struct{ taskID, eventType string }

// InboxStats are counters for metrics.
type InboxStats struct {
	Len       int   // events queued now
	MaxLen    int   // high-water mark: the most events ever queued at once
	Sent      int64 // events accepted while open
	Coalesced int64 // events merged into an undrained one
	Fallback  int64 // events handed to OnClosed (or dropped) after Close
}

// InboxConfig configures an Inbox (NewInbox, and the Manager's inboxes
// through WithInboxConfig). The zero value is the default: no fallback, a
// warning at 256 queued events, no coalescing, nothing logged.
type InboxConfig struct {
	// OnClosed is the fallback that receives, exactly once each, the
	// events left undrained at Close and those sent afterwards. It runs in
	// the goroutine of Close or of the sender, outside the inbox's lock;
	// the sender of a task's terminal event may be the goroutine of another
	// task that ended at the same time, which records the ends of both. So
	// it must not block for long, nor wait for a task to end. A panic in it
	// is recovered and logged. Defaults to nil: such events are dropped
	// (counted in InboxStats.Fallback).
	OnClosed func(bgtype.Event)
	// HighWater is the depth at which a warning is logged; it is logged
	// again each time the depth doubles, until the inbox is drained.
	// Defaults to 256 when 0; a negative value disables the warning.
	HighWater int
	// Coalesce lists custom event types (progress, say) whose event
	// replaces an undrained one of the same task and type. Defaults to
	// none.
	Coalesce []string
	// Logger gets the high-water warnings and the fallback's panics.
	// Defaults to nil: discarded (the Manager's inboxes use the Manager's
	// logger, WithLogger).
	Logger *slog.Logger
}

// NewInbox returns an open, empty Inbox configured by cfg.
func NewInbox(cfg InboxConfig) *Inbox {
	ib := &Inbox{onClosed: cfg.OnClosed, highWater: cfg.HighWater, logger: cfg.Logger}
	switch {
	case ib.highWater == 0:
		ib.highWater = defaultHighWater
	case ib.highWater < 0:
		ib.highWater = 0 // never reached: no warning
	}
	if len(cfg.Coalesce) > 0 {
		ib.coalesce = make(map[string]bool, len(cfg.Coalesce))
		for _, t := range cfg.Coalesce {
			ib.coalesce[t] = true
		}
	}
	if ib.logger == nil {
		ib.logger = discardLogger
	}
	ib.nextWarn = ib.highWater
	return ib
}

// Send queues ev. It never blocks. On a closed inbox it hands ev to the
// OnClosed fallback and returns ErrInboxClosed.
func (ib *Inbox) Send(ev bgtype.Event) error {
	ib.mu.Lock()
	if ib.closed {
		ib.stats.Fallback++
		ib.mu.Unlock()
		ib.fallback(ev)
		return ErrInboxClosed
	}
	warnAt := ib.queueLocked(&ev)
	ib.mu.Unlock()
	if warnAt > 0 {
		ib.warnDepth(warnAt)
	}
	return nil
}

// sendOpen queues ev if the inbox is open and reports whether it was; a
// closed inbox is left as it was (its fallback is not called). warnAt, when
// above zero, is the depth the caller reports with warnDepth once it holds
// no lock.
func (ib *Inbox) sendOpen(ev *bgtype.Event) (ok bool, warnAt int) {
	ib.mu.Lock()
	if ib.closed {
		ib.mu.Unlock()
		return false, 0
	}
	warnAt = ib.queueLocked(ev)
	ib.mu.Unlock()
	return true, warnAt
}

// warnDepth logs that the inbox reached depth n.
func (ib *Inbox) warnDepth(n int) {
	ib.logger.Warn("bgtask: inbox depth is high", "len", n, "high_water", ib.highWater)
}

// queueLocked queues ev in the open inbox, coalescing it or waking the
// waiters as Send describes. It returns the depth to warn about, or 0.
// Called with ib.mu held.
func (ib *Inbox) queueLocked(ev *bgtype.Event) (warnAt int) {
	if ev.Kind == bgtype.EventCustom && (ev.Quiet || ib.coalesce[ev.EventType]) {
		k := coalesceKey{ev.TaskID, ev.EventType}
		if i, ok := ib.pending[k]; ok {
			old := ib.eventAt(i)
			old.Payload = ev.Payload
			ib.stats.Coalesced++
			if old.Quiet && !ev.Quiet { // the merged event now wakes
				old.Quiet = false
				ib.wakeLocked()
			}
			return 0
		}
		if ib.pending == nil {
			ib.pending = make(map[coalesceKey]int)
		}
		ib.pending[k] = ib.fullN + len(ib.events)
	}
	if len(ib.events) == cap(ib.events) && cap(ib.events) >= inboxSegment {
		// Full: a new segment rather than a copy of everything queued
		// into a bigger array (under the lock, as long as it is).
		ib.full = append(ib.full, ib.events)
		ib.fullN += len(ib.events)
		ib.events = ib.newSegment()
	}
	ib.events = append(ib.events, *ev)
	ib.stats.Sent++
	n := ib.fullN + len(ib.events)
	ib.stats.MaxLen = max(ib.stats.MaxLen, n)
	if ib.highWater > 0 && n == ib.nextWarn {
		ib.nextWarn *= 2
		warnAt = n
	}
	if !ev.Quiet {
		ib.wakeLocked()
	}
	return warnAt
}

// inboxSegment is the most events a segment of a long queue holds: past
// it, the queue grows by a new segment instead of a doubled copy.
const inboxSegment = 128

// newSegment returns an empty segment, an emptied one if there is one.
// Called with ib.mu held.
func (ib *Inbox) newSegment() []bgtype.Event {
	if n := len(ib.freeSegs); n > 0 {
		seg := ib.freeSegs[n-1]
		ib.freeSegs[n-1] = nil
		ib.freeSegs = ib.freeSegs[:n-1]
		return seg
	}
	return make([]bgtype.Event, 0, inboxSegment)
}

// eventAt returns the queued event at index i, oldest first. Called with
// ib.mu held.
func (ib *Inbox) eventAt(i int) *bgtype.Event {
	for _, seg := range ib.full {
		if i < len(seg) {
			return &seg[i]
		}
		i -= len(seg)
	}
	return &ib.events[i]
}

// flattenLocked puts every queued event in ib.events, for the rare calls
// that work on the whole queue at once. Called with ib.mu held.
func (ib *Inbox) flattenLocked() {
	if len(ib.full) == 0 {
		return
	}
	all := make([]bgtype.Event, 0, ib.fullN+len(ib.events))
	for _, seg := range ib.full {
		all = append(all, seg...)
	}
	ib.events = append(all, ib.events...)
	ib.full, ib.fullN = nil, 0
}

// wakeLocked counts one more event that wakes, and wakes the waiters.
// Called with ib.mu held.
func (ib *Inbox) wakeLocked() {
	ib.loud++
	ib.signalLocked()
}

// signalLocked wakes every blocked Wait. One waiter (the usual agent loop)
// gets a token on the reusable channel, so a wait costs no allocation; more
// than one, or one while an earlier token is still untaken (its waiter has
// not run yet), are woken by closing the channel, which the next Wait
// replaces. A token left behind by a waiter that went away wakes a later
// Wait once, which looks again and waits on: Wait loops anyway. Called with
// ib.mu held.
func (ib *Inbox) signalLocked() {
	n := ib.waiters
	if n == 0 {
		return
	}
	ib.waiters = 0
	if n == 1 {
		select {
		case ib.wake <- struct{}{}:
			return
		default:
		}
	}
	close(ib.wake)
	ib.wake = nil
}

// takeTerminal removes the queued terminal event of task id, if there is
// one, and reports whether it did: a tool gave the model that end as its
// result already (Owner.answered).
func (ib *Inbox) takeTerminal(id string) bool {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.flattenLocked()
	i := slices.IndexFunc(ib.events, func(ev bgtype.Event) bool { return ev.TaskID == id && ev.Kind.IsTerminal() })
	if i < 0 {
		return false
	}
	if !ib.events[i].Quiet {
		ib.loud--
	}
	ib.events = slices.Delete(ib.events, i, i+1)
	for k, j := range ib.pending { // coalescing indexes past i moved down by one
		if j > i {
			ib.pending[k] = j - 1
		}
	}
	return true
}

// loudLen returns how many queued events would wake Wait.
func (ib *Inbox) loudLen() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.loud
}

// Drain removes and returns every queued event, oldest first; nil when
// there are none.
func (ib *Inbox) Drain() []bgtype.Event { return ib.AppendDrain(nil) }

// drainInLock is the longest batch AppendDrain copies out under the
// inbox's lock; a longer one is swapped for the spare buffer and copied
// after the unlock, so Send does not wait for the copy (one lock round
// more, which a short batch does not pay).
const drainInLock = 64

// AppendDrain is Drain that appends to dst, so a loop can reuse one buffer.
func (ib *Inbox) AppendDrain(dst []bgtype.Event) []bgtype.Event {
	ib.mu.Lock()
	batch, full := ib.events, ib.full
	if len(batch) == 0 && len(full) == 0 {
		ib.mu.Unlock()
		return dst
	}
	ib.loud = 0
	clear(ib.pending)
	ib.nextWarn = ib.highWater
	if len(full) == 0 && len(batch) <= drainInLock {
		dst = append(dst, batch...)
		clear(batch)
		ib.events = batch[:0]
		ib.mu.Unlock()
		return dst
	}
	ib.events, ib.spare = ib.spare[:0], nil // a long batch is copied out after the unlock
	total := ib.fullN + len(batch)
	ib.full, ib.fullN = nil, 0
	ib.mu.Unlock()
	dst = slices.Grow(dst, total) // once, not once per segment
	for _, seg := range full {
		dst = append(dst, seg...)
		clear(seg)
	}
	dst = append(dst, batch...)
	clear(batch)
	ib.mu.Lock()
	for _, seg := range full {
		ib.freeSegs = append(ib.freeSegs, seg[:0])
	}
	switch {
	case len(ib.events) == 0 && cap(ib.events) < cap(batch):
		ib.events = batch[:0] // nothing came meanwhile: an idle inbox keeps one buffer
	case cap(batch) > cap(ib.spare):
		ib.spare = batch[:0]
	}
	ib.mu.Unlock()
	return dst
}

// Wait blocks until an event that wakes is queued (one that is not
// Event.Quiet), the inbox is closed, the Manager that made or bound it has
// shut down, or ctx ends. Quiet events alone do not end it: they wait in
// the queue for the next drain. It returns nil when there is something to
// drain (another drainer may still take it first), ErrInboxClosed once
// closed, or ctx's error. Once that Manager's Shutdown has returned no event
// can arrive any more: Wait returns nil while anything, quiet or not, is
// left to drain, then ErrClosed. With nothing to drain it yields the
// processor once (runtime.Gosched) before it blocks, so a task that was just
// handed a worker can queue its event first: the common spawn-then-wait
// costs no park and no wake-up.
func (ib *Inbox) Wait(ctx context.Context) error {
	yielded := false
	for {
		ib.mu.Lock()
		switch {
		case ib.loud > 0:
			ib.mu.Unlock()
			return nil
		case ib.closed:
			ib.mu.Unlock()
			return ErrInboxClosed
		}
		stopped := ib.stopped
		select {
		case <-stopped: // a nil channel (no Manager) never is
			n := ib.fullN + len(ib.events)
			ib.mu.Unlock()
			if n > 0 {
				return nil
			}
			return ErrClosed
		default:
		}
		if !yielded {
			// Yield once before parking: a task just handed to a
			// worker on this P runs now and queues its event while
			// this goroutine is runnable, so nothing parks here and
			// nobody has to ready it (decision 750).
			yielded = true
			ib.mu.Unlock()
			runtime.Gosched()
			continue
		}
		if ib.wake == nil {
			ib.wake = make(chan struct{}, 1)
		}
		wake := ib.wake
		ib.waiters++
		ib.mu.Unlock()
		select {
		case <-wake:
		case <-stopped:
			ib.leave(wake)
		case <-ctx.Done():
			ib.leave(wake)
			return ctx.Err()
		}
	}
}

// leave uncounts a Wait that stopped waiting on wake without being woken,
// unless a wake or a close has counted it out already.
func (ib *Inbox) leave(wake chan struct{}) {
	ib.mu.Lock()
	if ib.wake == wake && ib.waiters > 0 {
		ib.waiters--
	}
	ib.mu.Unlock()
}

// Close closes the inbox and hands every undrained event to the OnClosed
// fallback, in order, in the caller's goroutine. Waiters return
// ErrInboxClosed. Close is idempotent.
func (ib *Inbox) Close() {
	ib.mu.Lock()
	if ib.closed {
		ib.mu.Unlock()
		return
	}
	ib.closed = true
	ib.shut.Store(true)
	ib.flattenLocked()
	left := ib.events
	ib.events, ib.freeSegs, ib.spare = nil, nil, nil
	ib.loud = 0
	ib.pending = nil
	ib.stats.Fallback += int64(len(left))
	if ib.wake != nil { // wake every waiter, now and later: Wait sees closed first
		close(ib.wake)
		ib.wake, ib.waiters = nil, 0
	}
	onClose := ib.onClose
	ib.mu.Unlock()
	for _, ev := range left {
		ib.fallback(ev)
	}
	if onClose != nil {
		onClose(ib)
	}
}

// Closed reports whether Close was called.
func (ib *Inbox) Closed() bool { return ib.shut.Load() }

// Len returns how many events are queued.
func (ib *Inbox) Len() int {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.fullN + len(ib.events)
}

// Stats returns the inbox's counters.
func (ib *Inbox) Stats() InboxStats {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	s := ib.stats
	s.Len = ib.fullN + len(ib.events)
	return s
}

func (ib *Inbox) fallback(ev bgtype.Event) {
	if ib.onClosed == nil {
		ib.logger.Warn("bgtask: event dropped: inbox closed without fallback", "task_id", ev.TaskID, "kind", ev.Kind)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			ib.logger.Error("bgtask: inbox OnClosed fallback panicked", "panic", r, "task_id", ev.TaskID)
		}
	}()
	ib.onClosed(ev)
}
