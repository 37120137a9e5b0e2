package bgtask

import (
	"context"
	"runtime"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/jsoncap"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/stackgrow"
)

// end records a task's end: its terminal record committed, the task
// retired, its owner told. Called by the task's goroutine once it claimed
// the end (finish), or by Stop for a task it cut (cut), whose context it
// cancels last: its function may still run, and is not waited for.
func (m *Manager) end(t *Task, out *outcome, cut, small bool) {
	t.emitMu.Lock()
	t.ended = true
	out.output = t.endOutput()
	busy := t.inputCommit()
	t.emitMu.Unlock()
	if busy != nil {
		<-busy // an input request's record and event come before the terminal ones
	}
	prog := t.settleProgress()
	if ib := t.agentInbox(); ib != nil {
		ib.Close() // nobody reads it any more: later sends fail with ErrInboxClosed
	}

	fg := t.fg.Load() != fgBackground && m.endForeground(t)
	// After endForeground: a task that ends in the foreground is fgEnded
	// now, so endsApart is false for it, as returned and finish saw it.
	if !cut && m.endsApart(t, small) {
		m.endSmall(t, out, prog)
		return
	}
	m.endOnStack(t, out, prog, fg, cut)
}

// endOnStack is the rest of end for a task on a grown stack, or whose end
// is not batched: the outcome is built in its frame. Out of line: that
// frame is not on the stack of an endSmall.
//
//go:noinline
func (m *Manager) endOnStack(t *Task, out *outcome, prog *bgtype.Progress, fg, cut bool) {
	var reason string
	if out.status == bgtype.StatusCanceled {
		reason = reasonOf(context.Cause(t.context()))
	}
	errText, _ := jsoncap.Text(out.err, m.cfg.caps.MaxErrorBytes)
	stack, _ := jsoncap.Text(out.stack, m.cfg.caps.MaxErrorBytes)
	end := clock.Now()
	edit := terminalEdit{Status: out.status, Kind: out.kind, Result: out.result, End: end, Reason: reason, ErrText: errText, Stack: stack, Progress: prog, Output: out.output}
	if !fg {
		if t.rec.WakePolicy() != bgtype.WakeSilent && m.durable() {
			m.sent.add(t.rec.Owner, t.rec.Owner, t.rec.ID) // before the commit: a Restore meanwhile must not announce it too
		}
		if m.mem != nil && !cut && m.cfg.observer == nil {
			// Committed with the other ends of the moment. Not with an
			// observer: it is called on the goroutine that records the
			// end, and may wait for another task's end.
			m.endBatched(t, &edit)
			return
		}
	}
	m.endCommit(t, &edit, fg, cut)
}

// endCommit is the rest of end for a task whose end is not batched: it
// commits the terminal record and tells the owner. Out of line: its frame
// holds a whole TaskMeta, which the usual end (endBatched) does without,
// so the end of a task on a new goroutine fits the stack that
// stackgrow.Grow gave it (decision 753).
//
//go:noinline
func (m *Manager) endCommit(t *Task, edit *terminalEdit, fg, cut bool) {
	var u bgtype.TaskMeta
	var commitErr error
	if fg { // rare: the record is marked before the commit
		m.readRecord(t, &u)
		edit.Apply(&u)
		m.answeredInForeground(t, &u) // marked announced, or held for the call's run
		commitErr = m.commitUpdate(t, &u)
	} else {
		commitErr = m.commitEdit(t, &u, edit)
	}
	from := edit.From
	if commitErr == nil {
		m.notify(from, &u)
	}
	m.counters.countEnd(u.Status)

	if commitErr == nil && !fg && !cut && m.mem == nil {
		m.endBatched(t, nil) // the private t.rec follows u (commitUpdate)
		return
	}
	m.mu.Lock()
	starts := m.unregister(t)
	m.mu.Unlock()
	m.startAll(starts)
	if !cut {
		t.stop(nil)
	}
	if commitErr != nil {
		m.reportCommitFailure(&u, commitErr)
	}
	if !fg {
		m.deliverTerminal(&u)
	}
	m.retire(t)
	if cut {
		t.stop(errStopCut) // after its end is recorded and told: whatever it returns now is discarded
	}
}

// endSmall is the rest of end for a task whose goroutine runs on the
// small stack it started with (work): the usual end, batched, with
// the in-memory store. The outcome goes into a node on the list of ends,
// and when no goroutine records them, one is started for it (recordApart):
// the task's goroutine never records, whose stack would grow for it
// (runtime.newstack copying its frames, a 4 KiB stack allocated and, when
// it exits, freed), which was a fifth of a burst's CPU (decision 770).
// Out of line, with a small frame.
//
//go:noinline
func (m *Manager) endSmall(t *Task, out *outcome, prog *bgtype.Progress) {
	n := endNodes.Get().(*endNode)
	n.t, n.commit = t, true
	e := &n.edit
	e.Status, e.Kind, e.Result, e.Progress, e.Output = out.status, out.kind, out.result, prog, out.output
	if out.err != "" || out.stack != "" || out.status == bgtype.StatusCanceled {
		m.endTexts(t, out, e)
	}
	e.End = clock.Now()
	if m.pushEnd(n) {
		m.wg.Add(1) // this task's goroutine still counts: the count is not zero
		m.counters.recorders.Add(1)
		go m.recordApart()
	}
}

// endTexts sets e's texts: the error, the stack and the cancel reason,
// capped. Out of line (endSmall).
//
//go:noinline
func (m *Manager) endTexts(t *Task, out *outcome, e *terminalEdit) {
	if out.status == bgtype.StatusCanceled {
		e.Reason = reasonOf(context.Cause(t.context()))
	}
	e.ErrText, _ = jsoncap.Text(out.err, m.cfg.caps.MaxErrorBytes)
	e.Stack, _ = jsoncap.Text(out.stack, m.cfg.caps.MaxErrorBytes)
}

// recordApart is a goroutine that records the ends on the list for the
// tasks on small stacks (endSmall), with m.endsBusy taken by the one that
// started it. After each take it yields once, so that the tasks runnable
// meanwhile add their ends and one take records them together; it stops
// when a yield brought none. It counts in m.wg while it runs.
func (m *Manager) recordApart() {
	stackgrow.Grow()
	for {
		for m.retireEnds() {
		}
		runtime.Gosched()
		if m.ends.Load() != nil {
			continue
		}
		m.endsBusy.Store(false)
		if m.ends.Load() == nil || !m.endsBusy.CompareAndSwap(false, true) {
			break // an end added after the last take is seen by its own goroutine's CompareAndSwap
		}
	}
	m.wg.Done()
}

// endNode carries a task's end to the goroutine that records it.
type endNode struct {
	t      *Task
	next   *endNode
	edit   terminalEdit // the outcome to commit, when commit is set
	commit bool         // the terminal record is still to be committed (the in-memory store's); else t.rec is committed
}

// endNodes keeps endNodes for reuse: an end costs no allocation.
var endNodes = sync.Pool{New: func() any { return new(endNode) }}

// endBatched is the rest of end for the usual task, neither cut nor
// answered in the foreground. When no other end waits and no goroutine
// records, it records its own at once (recordOne). Otherwise its end joins
// the Manager's list of ends,
// and one ending goroutine at a time, the first to find none doing it,
// records every end on the list (retireEnds) until the list is empty. The
// others go on at once, so the tasks that end together queue neither on
// the in-memory store's locks nor on m.mu nor on the owner's inbox: one
// goroutine commits their records, one after another, then takes m.mu
// once per endChunk of them. With edit, the terminal record is still
// to be committed (the in-memory store's commit, which cannot fail); otherwise
// t's private record is the committed one. Each end keeps its order:
// committed, observed, unregistered, told, retired.
func (m *Manager) endBatched(t *Task, edit *terminalEdit) {
	if m.ends.Load() == nil && m.endsBusy.CompareAndSwap(false, true) {
		// No end waits and no goroutine records: record this one at
		// once, without a node (one task after another), then any that
		// came meanwhile.
		m.recordOne(t, edit)
		m.drainEnds()
		return
	}
	n := endNodes.Get().(*endNode)
	n.t = t
	if edit != nil {
		n.edit, n.commit = *edit, true
	}
	if m.pushEnd(n) {
		m.drainEnds()
	}
}

// pushEnd adds n to the list of ends. It reports whether it took
// m.endsBusy: then the caller records the ends (or has them recorded).
// One goroutine at a time records the ends: while one does, the others
// leave theirs on the list, which it takes before it stops.
func (m *Manager) pushEnd(n *endNode) bool {
	for {
		head := m.ends.Load()
		n.next = head
		if m.ends.CompareAndSwap(head, n) {
			break
		}
	}
	return m.endsBusy.CompareAndSwap(false, true)
}

// drainEnds records the ends on the list until it is empty, then lets
// another goroutine record; if an end came after the last take it records
// again, unless another goroutine does. Called with m.endsBusy taken;
// returns with it released.
func (m *Manager) drainEnds() {
	for {
		for m.retireEnds() {
		}
		m.endsBusy.Store(false)
		if m.ends.Load() == nil || !m.endsBusy.CompareAndSwap(false, true) {
			return // an end added after the last take is seen by its own goroutine's CompareAndSwap
		}
	}
}

// recordOne records t's end as recordEnds does, for an end that no other
// waits with: with edit, its in-memory store record is committed first. Called
// with m.endsBusy taken.
func (m *Manager) recordOne(t *Task, edit *terminalEdit) {
	var ev bgtype.Event
	if edit != nil {
		m.commitMemEnd(t, edit, &ev)
	} else { // another Store's: t.rec is private, committed by end
		ev = recEvent(t.rec)
	}
	// The function returned: its context is cancelled now, not after the
	// event, so the owner the event wakes waits for less (the owner's
	// goroutine runs once this one parks).
	t.stop(nil)
	told, depth := !t.reports(), 0
	var ib *Inbox
	m.mu.Lock()
	starts := m.unregister(t)
	if !told {
		if ib = m.openInboxLocked(t.rec.Owner); ib != nil {
			told, depth = ib.sendOpen(&ev)
		}
	}
	if told {
		m.retireLocked(t)
	}
	m.mu.Unlock()
	if depth > 0 { // the logger is the host's code: no lock held
		ib.warnDepth(depth)
	}
	m.startAll(starts)
	if !told { // the inbox is closed or not made yet: its fallback may take m.mu
		_ = m.deliver(t.rec.Owner, ev)
		m.retire(t)
	}
}

// retireEnds takes the list of ends and records them in order, endChunk at
// a time (recordEnds): it commits the terminal records still to be
// committed (no lock of the Manager held) and, under one hold of m.mu per
// chunk, unregisters each task, cancels its context, queues its terminal event in
// its owner's open inbox (the inbox's lock nests in m.mu: the lock order)
// and retires it. An end whose owner's inbox is closed or not made yet is
// told after m.mu is released, since the inbox's fallback (or the making of
// an inbox) may take m.mu, and retired then. The queued tasks that a
// released slot admits start after the unlock. It reports false, doing
// nothing, when the list is empty. Called by one goroutine at a time
// (m.endsBusy).
func (m *Manager) retireEnds() bool {
	if m.ends.Load() == nil {
		return false
	}
	var batch *endNode
	for n := m.ends.Swap(nil); n != nil; { // the list is newest first: reverse it
		next := n.next
		n.next, batch = batch, n
		n = next
	}
	if m.endEvents == nil {
		m.endEvents = make([]bgtype.Event, 0, endChunk)
	}
	for batch != nil {
		batch = m.recordEnds(batch)
	}
	return true
}

// endChunk is how many ends retireEnds records per hold of m.mu: a burst's
// ends take the lock in turns with the spawns, and the buffer of their
// events stays small.
const endChunk = 64

// recordEnds records up to endChunk ends of batch, in order, as retireEnds
// describes, and returns the rest of batch.
func (m *Manager) recordEnds(batch *endNode) (rest *endNode) {
	evs := m.endEvents[:0] // the terminal events, in the batch's order
	for n := batch; n != nil && len(evs) < endChunk; n = n.next {
		evs = append(evs, bgtype.Event{})
		ev := &evs[len(evs)-1]
		switch {
		case n.commit:
			m.commitMemEnd(n.t, &n.edit, ev)
		default: // another Store's: t.rec is private, committed before the end joined the list
			*ev = recEvent(n.t.rec)
		}
	}
	type slowEnd struct {
		n  *endNode
		ev bgtype.Event
	}
	var slow []slowEnd
	var starts []*Task
	var warns []warnAt
	n := batch
	m.mu.Lock()
	for i := range evs {
		next := n.next
		t := n.t
		starts = append(starts, m.unregister(t)...)
		if t.reports() {
			ib := m.openInboxLocked(t.rec.Owner)
			ok, depth := false, 0
			if ib != nil {
				ok, depth = ib.sendOpen(&evs[i])
			}
			if !ok {
				n.next = nil
				slow = append(slow, slowEnd{n, evs[i]})
				n = next
				continue
			}
			if depth > 0 {
				warns = append(warns, warnAt{ib, depth})
			}
		}
		t.stop(nil)
		m.retireLocked(t)
		*n = endNode{}
		endNodes.Put(n)
		n = next
	}
	m.mu.Unlock()
	clear(evs)
	for _, w := range warns { // the logger is the host's code: no lock held
		w.ib.warnDepth(w.depth)
	}
	m.startAll(starts)
	for _, e := range slow {
		e.n.t.stop(nil)
		_ = m.deliver(e.n.t.rec.Owner, e.ev)
		m.retire(e.n.t)
		*e.n = endNode{}
		endNodes.Put(e.n)
	}
	return n
}

// warnAt is a depth an inbox reached that retireEnds logs after the unlock.
type warnAt struct {
	ib    *Inbox
	depth int
}

// openInboxLocked returns the owner's bound inbox without making one, or
// nil when none is bound. Called with m.mu held (m.mu, then inboxMu: the
// lock order).
func (m *Manager) openInboxLocked(owner string) *Inbox {
	m.inboxMu.RLock()
	ib := m.inboxes[owner]
	m.inboxMu.RUnlock()
	return ib
}

// terminalEdit is what finish writes on a task's record: its outcome. The
// in-memory store applies it under its lock (no interface: it stays on
// the stack).
type terminalEdit = memstore.Outcome

// reportCommitFailure tells the owner that the terminal record of a task
// could not be committed, so it does not stay silently running. Out of line
// (docs/internals.md).
//
//go:noinline
func (m *Manager) reportCommitFailure(meta *bgtype.TaskMeta, err error) {
	m.counters.commitFailures.Add(1)
	m.log.Error("bgtask: terminal record not committed", "task_id", meta.ID, "status", meta.Status, "err", err)
	text, _ := jsoncap.Text(err.Error(), m.cfg.caps.MaxErrorBytes)
	ev := bgtype.Event{Kind: bgtype.EventCommitFailed, TaskID: meta.ID, Name: meta.Name, Status: meta.Status, Error: text}
	if m.cfg.eventObserver != nil {
		m.observeEvent(ev) // no transition reports this end
	}
	_ = m.deliver(meta.Owner, ev)
}

// deliverTerminal sends the event that reports a terminal record.
func (m *Manager) deliverTerminal(meta *bgtype.TaskMeta) {
	if meta.Wake != bgtype.WakeSilent {
		_ = m.deliver(meta.Owner, terminalEvent(meta))
	}
}

// terminalEvent is the event that reports a terminal record.
func terminalEvent(meta *bgtype.TaskMeta) bgtype.Event {
	ev := bgtype.Event{Kind: bgtype.EventKind(meta.Status), TaskID: meta.ID, Name: meta.Name}
	switch meta.Status {
	case bgtype.StatusCompleted:
		ev.Result = meta.Result
	case bgtype.StatusFailed, bgtype.StatusInterrupted:
		ev.Error, ev.ErrorKind = meta.Error, meta.ErrorKind
	case bgtype.StatusCanceled:
		ev.CancelReason = meta.CancelReason
	}
	ev.OutputBytes = meta.OutputBytes // the same on every instance: the record's
	return ev
}

// commitMemEnd commits edit, t's end, in the in-memory store, which keeps
// t.rec, and sets *ev to its terminal event. The usual end (a plain one,
// memstore.Store.CommitEnd) builds no TaskMeta: the event is made of the
// edit and the record's identity, as terminalEvent would make it of the
// committed record, so the end of a task on a new goroutine fits the
// stack stackgrow.Grow gave it (decision 753). Out of line, so its frame
// is not part of its callers' while they hold the lock.
//
//go:noinline
func (m *Manager) commitMemEnd(t *Task, edit *terminalEdit, ev *bgtype.Event) {
	if !m.mem.CommitEnd(t.ent, edit) {
		m.commitMemEndSlow(t, edit, ev)
		return
	}
	m.notifyRec(edit.From, t.rec)
	m.counters.countEnd(edit.Status)
	*ev = bgtype.Event{Kind: bgtype.EventKind(edit.Status), TaskID: t.rec.ID, Name: t.rec.Name()}
	switch edit.Status {
	case bgtype.StatusCompleted:
		ev.Result = edit.Result
	case bgtype.StatusFailed:
		ev.Error, ev.ErrorKind = edit.ErrText, edit.Kind
	case bgtype.StatusCanceled:
		ev.CancelReason = edit.Reason
	}
}

// commitMemEndSlow is commitMemEnd of an end that is not plain, through a
// whole TaskMeta and the reducer. Out of line: its frame holds the
// TaskMeta.
//
//go:noinline
func (m *Manager) commitMemEndSlow(t *Task, edit *terminalEdit, ev *bgtype.Event) {
	var u bgtype.TaskMeta
	m.mem.CommitEdit(t.rec, &u, edit)
	m.notify(edit.From, &u)
	m.counters.countEnd(u.Status)
	*ev = terminalEvent(&u)
}

// recEvent is terminalEvent of a Task's private record. Out of line: its
// frame holds a whole TaskMeta.
//
//go:noinline
func recEvent(r *memstore.Rec) bgtype.Event {
	meta := r.Expand()
	return terminalEvent(&meta)
}
