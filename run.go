package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/jsoncap"
	"github.com/bgtask/bgtask/internal/stackgrow"
)

// outcome is what a task's function came to, before it is recorded.
type outcome struct {
	status     bgtype.Status
	kind       bgtype.ErrorKind
	err, stack string
	result     json.RawMessage
}

// run is a task's goroutine: promote from queued if needed, call the
// function, record the outcome, notify the owner, free everything. The
// frame of run holds no outcome while the function runs: it is built, and
// the end recorded, in frames made after the function returned or instead
// of calling it (returned, begin, runEnd), so a parked task keeps the
// small first stack of a goroutine even when an allocation in it goes deep
// into the runtime (docs/internals.md).
func (m *Manager) run(t *Task) {
	stage := stageBegin
	defer m.runEnd(t, &stage) // deferred so that a panic or runtime.Goexit in the function still ends it
	if !m.begin(t, &stage) {
		return
	}
	stage = stageCalling
	v, err := t.fn(t.context(), t)
	m.returned(t, v, err, &stage)
}

// Where a task's goroutine is, for runEnd.
const (
	stageBegin    uint8 = iota // before its function is called
	stageCalling               // in its function, or encoding its result
	stageRecorded              // its end is recorded (or Stop cut it)
)

// runEnd, deferred by run, records the end of a task whose function
// panicked (a failed outcome with the panic value and the stack) or called
// runtime.Goexit, unless it is recorded already, then lets Shutdown count
// the goroutine out. A panic outside the function (in bgtask, or in the
// Store while recording) is not the task's: it goes on. Out of line
// (docs/internals.md).
//
//go:noinline
func (m *Manager) runEnd(t *Task, stage *uint8) {
	if r := recover(); r != nil {
		if *stage != stageCalling {
			panic(r)
		}
		*stage = stageRecorded
		out := outcome{status: bgtype.StatusFailed, kind: bgtype.KindPanic, err: fmt.Sprintf("panic: %v", r), stack: string(debug.Stack())}
		m.counters.panicked.Add(1)
		m.log.Error("bgtask: task panicked", "task_id", t.rec.ID, "panic", r)
		m.finish(t, &out)
	}
	if *stage != stageRecorded {
		out := outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: "bgtask: task function called runtime.Goexit"}
		m.finish(t, &out)
	}
	m.wg.Done()
}

// begin readies t's function to be called, promoting it from queued if
// needed; false when the task ended instead (its end is recorded). Out of
// line (docs/internals.md).
//
//go:noinline
func (m *Manager) begin(t *Task, stage *uint8) bool {
	// The phase is read without the lock: it was settled, under the lock,
	// before this goroutine was started, and only this goroutine moves it
	// from here on, or Stop once the function is called (phase.go).
	if t.phase == phaseDropped { // cancelled while queued: the function never runs
		m.endEarly(t, droppedOutcome, nil, stage)
		return false
	}
	if !t.queued {
		// Recorded running at spawn: nothing to promote.
	} else if err := m.promote(t); err != nil {
		m.endEarly(t, startFailedOutcome, err, stage)
		return false
	}
	if !t.end.CompareAndSwap(endOpen, endCalling) { // Stop cut it before its function was called
		m.endEarly(t, stopCutOutcome, nil, stage)
		return false
	}
	return true
}

// endEarly records the end of a task whose function is not called: build
// makes its outcome (from err, for a start that could not be recorded).
func (m *Manager) endEarly(t *Task, build func(*Manager, *Task, error, *outcome), err error, stage *uint8) {
	var out outcome
	build(m, t, err, &out)
	*stage = stageRecorded
	m.finish(t, &out)
}

// stopCutOutcome is the outcome of a task Stop cut before its function was
// called.
func stopCutOutcome(m *Manager, _ *Task, _ error, out *outcome) { m.stopOutcome(out) }

// droppedOutcome is the outcome of a task cancelled while queued.
func droppedOutcome(_ *Manager, t *Task, _ error, out *outcome) {
	*out = outcome{status: bgtype.StatusCanceled, err: context.Cause(t.context()).Error()}
}

// startFailedOutcome is the outcome of a task whose start could not be
// recorded.
func startFailedOutcome(_ *Manager, _ *Task, err error, out *outcome) {
	*out = outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: fmt.Sprintf("bgtask: could not record the start: %v", err)}
}

// promote records a task admitted from the queue as running. Out of line
// (docs/internals.md).
//
//go:noinline
func (m *Manager) promote(t *Task) error {
	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	if u.Status != bgtype.StatusQueued {
		return nil
	}
	u.Status, u.StartedAt = bgtype.StatusRunning, clock.Now()
	if err := m.commitUpdate(t, &u); err != nil {
		if m.mem == nil {
			u.Status, u.StartedAt = bgtype.StatusQueued, time.Time{} // not started after all
			t.rec.SetMutable(&u)
		}
		return err
	}
	m.notify(bgtype.StatusQueued, &u)
	return nil
}

// returned records the end of a task whose function returned v and err.
// Its end is claimed before the result is encoded: from then on a
// promotion of a foreground call loses to it (toBackground), and Stop does
// not cut it. Out of line: its frame, with the outcome, is made only once
// the function has returned (docs/internals.md).
//
//go:noinline
func (m *Manager) returned(t *Task, v any, err error, stage *uint8) {
	stackgrow.Grow() // before encoding the result: the end needs the bigger stack anyway
	// Claimed before the result is encoded; finish claims it again, a no-op.
	if !t.claimEnd() {
		*stage = stageRecorded
		m.releaseCut(t) // Stop ended it: what the function returned is discarded
		return
	}
	if err != nil && t.isKind() {
		if rq, ok := errors.AsType[*requeueError](err); ok {
			*stage = stageRecorded
			m.requeueEnd(t, rq.why, rq.yield) // a resumable task yielded to a stop
			return
		}
	}
	var out outcome
	m.settle(t, &out, v, err)
	*stage = stageRecorded
	m.finish(t, &out)
}

// settle sets out from what the function returned. Out of line, so its
// frame is not part of returned's while the result is encoded.
//
//go:noinline
func (m *Manager) settle(t *Task, out *outcome, v any, err error) {
	switch {
	case err == nil:
		res, encErr := jsoncap.Encode(v)
		if encErr != nil {
			*out = outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: fmt.Sprintf("bgtask: result is not JSON-encodable: %v", encErr)}
			return
		}
		res, _ = jsoncap.JSON(res, m.cfg.caps.MaxResultBytes)
		*out = outcome{status: bgtype.StatusCompleted, result: res}
	case t.cctx.Err() != nil && errors.Is(context.Cause(t.context()), ErrTimeout):
		// Its time ran out (not a cancel: a cancel's cause stays the cause).
		text := err.Error()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
			text = context.Cause(t.context()).Error()
		}
		*out = outcome{status: bgtype.StatusFailed, kind: bgtype.KindTimeout, err: text}
	case t.cctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(t.context()))):
		*out = outcome{status: bgtype.StatusCanceled, err: context.Cause(t.context()).Error()}
	default:
		*out = outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: err.Error()}
	}
}

// finish commits the terminal record, retires the task, and only then tells
// the owner (commit, then notify: whoever reads the event can Get the final
// record). If the commit keeps failing, the owner gets EventCommitFailed
// before the terminal event, so no record stays silently running.
func (m *Manager) finish(t *Task, out *outcome) {
	stackgrow.Grow()
	if !t.claimEnd() {
		m.releaseCut(t) // Stop ended it: what the function returned is discarded
		return
	}
	if t.cctx.Err() != nil && context.Cause(t.context()) == errStopCut {
		if t.isKind() {
			m.requeueEnd(t, m.stopWhy(), true) // a resumable task resumes elsewhere
			return
		}
		m.stopOutcome(out) // Stop cut it while queued or before its call: it ends interrupted
	}
	m.end(t, out, false)
}

// end records a task's end: its terminal record committed, the task
// retired, its owner told. Called by the task's goroutine once it claimed
// the end (finish), or by Stop for a task it cut (cut), whose context it
// cancels last: its function may still run, and is not waited for.
func (m *Manager) end(t *Task, out *outcome, cut bool) {
	t.emitMu.Lock()
	t.ended = true
	t.endOutput()
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
	var reason string
	if out.status == bgtype.StatusCanceled {
		reason = reasonOf(context.Cause(t.context()))
	}
	errText, _ := jsoncap.Text(out.err, m.cfg.caps.MaxErrorBytes)
	stack, _ := jsoncap.Text(out.stack, m.cfg.caps.MaxErrorBytes)
	end := clock.Now()
	var u bgtype.TaskMeta
	edit := terminalEdit{Status: out.status, Kind: out.kind, Result: out.result, End: end, Reason: reason, ErrText: errText, Stack: stack, Progress: prog}
	var commitErr error
	if fg { // rare: the record is marked before the commit
		m.readRecord(t, &u)
		edit.Apply(&u)
		m.answeredInForeground(&u)
		u.Announced = true // the foreground call returned it: a restart must not announce it
		commitErr = m.commitUpdate(t, &u)
	} else {
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
		commitErr = m.commitEdit(t, &u, &edit)
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
	for {
		head := m.ends.Load()
		n.next = head
		if m.ends.CompareAndSwap(head, n) {
			break
		}
	}
	// One goroutine at a time records the ends: while one does, the others
	// leave theirs on the list, which it takes before it stops.
	if m.endsBusy.CompareAndSwap(false, true) {
		m.drainEnds()
	}
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
		var u bgtype.TaskMeta
		m.mem.CommitEdit(t.rec, &u, edit)
		m.notify(edit.From, &u)
		m.counters.countEnd(u.Status)
		ev = terminalEvent(&u)
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
		var ev bgtype.Event
		switch {
		case n.commit:
			var u bgtype.TaskMeta
			m.mem.CommitEdit(n.t.rec, &u, &n.edit)
			m.notify(n.edit.From, &u)
			m.counters.countEnd(u.Status)
			ev = terminalEvent(&u)
		default: // another Store's: t.rec is private, committed before the end joined the list
			ev = recEvent(n.t.rec)
		}
		evs = append(evs, ev)
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
	return ev
}

// recEvent is terminalEvent of a Task's private record. Out of line: its
// frame holds a whole TaskMeta.
//
//go:noinline
func recEvent(r *memstore.Rec) bgtype.Event {
	meta := r.Expand()
	return terminalEvent(&meta)
}

// unregister removes t from every index but its owner's count (see
// retire): it is no longer live, its name is free and its slot released.
// It returns the queued tasks to start. An ended task with live attached
// children stays in m.nodes so that CancelTree still reaches them. Called
// with m.mu held.
func (m *Manager) unregister(t *Task) (starts []*Task) {
	if !t.phase.live() {
		return nil
	}
	held, queued := t.phase.holdsSlot(), t.phase == phaseWaiting || t.phase == phaseQueued
	t.move(phaseEnding)
	m.live--
	meta := t.rec
	os := m.owners[meta.Owner]
	os.head = unlink(os.head, t, ownerLinks)
	if t.reports() { // the owner links are free now: keep it on the ending list
		os.ending = linkFront(os.ending, t, ownerLinks)
		os.endingN++
	}
	if name := meta.Name(); name != "" && os.names[name] == t {
		delete(os.names, name)
	}
	m.releaseKey(t)
	if queued {
		m.dequeue(t)
	}
	if held {
		starts = m.release(os, nil)
	}
	if key, ok := taskRun(meta); ok {
		rs := m.runs[key]
		rs.live--
		rs.head = unlink(rs.head, t, runLinks)
		if rs.live == 0 {
			m.retireRun(key, rs)
		}
	}
	return starts
}

// retire is the last step of a task's end, after its events were
// delivered, in one critical section. When the owner has no task left its
// state goes, and so does its inbox if closed: until then the owner's inbox
// stays bound, so a closed inbox's fallback sees every late event instead of
// a fresh inbox. Then the task leaves the lineage index, its waiters are
// released (seeing all of this done) and it no longer counts for Shutdown.
// The caller's m.wg.Done follows.
func (m *Manager) retire(t *Task) {
	m.mu.Lock()
	m.retireLocked(t)
	m.mu.Unlock()
}

// retireLocked is retire with m.mu held.
func (m *Manager) retireLocked(t *Task) {
	owner := t.rec.Owner
	os := m.owners[owner]
	if t.reports() {
		os.reporting--
		os.ending = unlink(os.ending, t, ownerLinks) // unregister put it there
		os.endingN--
	}
	if os.live--; os.live == 0 {
		delete(m.owners, owner)
		m.owners = shrunk(m.owners, &m.deletes.owners)
		names := os.names // empty now: every name was freed by unregister
		*os = ownerState{names: names}
		m.spareOwner = os          // the next owner to start a task takes it
		m.forgetClosedInbox(owner) // m.mu, then inboxMu: the lock order (task.go)
	}
	t.move(phaseGone)
	if r := t.rare.Load(); r != nil && r.done != nil {
		close(r.done)
	}
	m.pruneNode(t)
	m.active--
	m.checkIdle()
}

// reporting reports whether a task of owner will still put its terminal
// event in the inbox for the caller to drain: it is not silent, and either
// it is live (its event comes after it unregisters) or it is ending and its
// event is not among those the caller has drained (seen, by task id). The
// ids in seen of tasks that have retired are forgotten, so seen stays small.
func (m *Manager) reporting(owner string, seen map[string]struct{}) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	os := m.owners[owner]
	if os == nil {
		clear(seen)
		return false
	}
	pending := os.reporting > os.endingN // a live task's event is yet to come
	kept := 0
	for t := os.ending; t != nil; t = t.ownerNext {
		if _, drained := seen[t.rec.ID]; drained {
			kept++
		} else {
			pending = true
		}
	}
	if kept < len(seen) { // forget the ids of tasks that have retired
		for id := range seen {
			if !os.isEnding(id) {
				delete(seen, id)
			}
		}
	}
	return pending
}

// isEnding reports whether task id is on the ending list.
func (os *ownerState) isEnding(id string) bool {
	for t := os.ending; t != nil; t = t.ownerNext {
		if t.rec.ID == id {
			return true
		}
	}
	return false
}

// pruneNode drops finished nodes without children, walking up the lineage.
func (m *Manager) pruneNode(t *Task) {
	for t != nil && t.phase == phaseGone && len(t.children) == 0 {
		delete(m.nodes, t.rec.ID)
		m.nodes = shrunk(m.nodes, &m.deletes.nodes)
		p := t.parent
		if p != nil {
			delete(p.children, t)
			t.parent = nil
		}
		t = p
	}
}

// retireRun forgets a run without live tasks, unless it was cancelled: a
// cancelled run is remembered (up to Tuning.CanceledRunsKept of them) so late
// spawns into it are refused. Called with m.mu held.
func (m *Manager) retireRun(key runKey, rs *runState) {
	if !rs.canceled {
		delete(m.runs, key)
		m.runs = shrunk(m.runs, &m.deletes.runs)
		return
	}
	m.deadRuns.Push(key)
	for m.deadRuns.Len() > m.cfg.tuning.CanceledRunsKept {
		old := m.deadRuns.Pop()
		if rs := m.runs[old]; rs != nil && rs.live == 0 {
			delete(m.runs, old)
		}
	}
}

// checkIdle closes m.idle once shutdown began and no task is active. Called
// with m.mu held.
func (m *Manager) checkIdle() {
	if m.closed.Load() && m.active == 0 && m.helpers == 0 && !m.idleShut {
		m.idleShut = true
		close(m.idle)
	}
}
