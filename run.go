package bgtask

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// run is a task's goroutine: promote from queued if needed, call the
// function, record the outcome, notify the owner, free everything. The
// outcome is written into t.rec[0] in place: only this goroutine writes those
// fields, and readers wait for t.done. Nothing large is copied on the way,
// so the goroutine's small first stack rarely has to grow.
func (m *Manager) run(t *Task) {
	m.mu.Lock()
	admitted := t.admitted
	m.mu.Unlock()

	from := t.rec[0].Status
	defer func() {
		// Deferred so that a function calling runtime.Goexit still ends.
		m.finish(t, from)
		m.exit()
	}()
	meta := &t.rec[0]
	if !admitted { // cancelled while queued: the function never runs
		meta.Status, meta.Error = StatusCancelled, context.Cause(&t.ctx).Error()
		return
	}
	if meta.Status == StatusQueued {
		meta.Status, meta.StartedAt = StatusRunning, now()
		if err := m.commitRetry(t); err != nil {
			meta.Status, meta.StartedAt, meta.Error = StatusFailed, time.Time{}, fmt.Sprintf("bgtask: could not record the start: %v", err)
			return
		}
		m.notify(StatusQueued, meta)
		from = StatusRunning
	}
	meta.Status, meta.Error = StatusFailed, "bgtask: task function called runtime.Goexit"
	m.call(t)
}

// call runs the function and records its outcome in t.rec[0], recovering a
// panic.
func (m *Manager) call(t *Task) {
	meta := &t.rec[0]
	defer func() {
		if r := recover(); r != nil {
			meta.Status, meta.Error, meta.Stack = StatusFailed, fmt.Sprintf("panic: %v", r), string(debug.Stack())
			m.counters.panicked.Add(1)
			m.log.Error("bgtask: task panicked", "task_id", meta.ID, "panic", r)
		}
	}()
	v, err := t.fn(&t.ctx, t)
	switch {
	case err == nil:
		res, encErr := encodeJSON(v)
		if encErr != nil {
			meta.Status, meta.Error = StatusFailed, fmt.Sprintf("bgtask: result is not JSON-encodable: %v", encErr)
			return
		}
		meta.Status, meta.Error, meta.Result = StatusCompleted, "", res
	case t.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(&t.ctx))):
		meta.Status, meta.Error = StatusCancelled, context.Cause(&t.ctx).Error()
	default:
		meta.Status, meta.Error = StatusFailed, err.Error()
	}
}

// finish commits the terminal record, retires the task, and only then tells
// the owner (commit, then notify: whoever reads the event can Get the final
// record). If the commit keeps failing, the owner gets EventCommitFailed
// before the terminal event, so no record stays silently running.
func (m *Manager) finish(t *Task, from TaskStatus) {
	growStack()
	t.returned.Store(true)
	meta := &t.rec[0]
	meta.FinishedAt = now()
	t.emitMu.Lock()
	t.ended = true
	t.emitMu.Unlock()
	if t.inbox != nil {
		t.inbox.Close() // nobody reads it any more: later sends fail with ErrInboxClosed
	}

	commitErr := m.commitRetry(t)
	if commitErr == nil {
		m.notify(from, meta)
	}
	m.counters.countEnd(meta.Status)

	m.mu.Lock()
	starts := m.unregister(t)
	m.mu.Unlock()
	m.startAll(starts)
	t.stop(nil)
	if commitErr != nil {
		m.reportCommitFailure(meta, commitErr)
	}
	m.deliverTerminal(meta)
	m.ownerDone(t) // closes t.done
}

// reportCommitFailure tells the owner that the terminal record of a task
// could not be committed, so it does not stay silently running.
//
//go:noinline
func (m *Manager) reportCommitFailure(meta *TaskMeta, err error) {
	m.counters.commitFailures.Add(1)
	m.log.Error("bgtask: terminal record not committed", "task_id", meta.ID, "status", meta.Status, "err", err)
	_ = m.deliver(meta.Owner, Event{Kind: EventCommitFailed, TaskID: meta.ID, Status: meta.Status, Error: err.Error()})
}

// deliverTerminal sends the event that reports a terminal record.
func (m *Manager) deliverTerminal(meta *TaskMeta) {
	_ = m.deliver(meta.Owner, terminalEvent(meta))
}

// terminalEvent is the event that reports a terminal record.
func terminalEvent(meta *TaskMeta) Event {
	ev := Event{Kind: EventKind(meta.Status), TaskID: meta.ID}
	switch meta.Status {
	case StatusCompleted:
		ev.Result = meta.Result
	case StatusFailed, StatusInterrupted:
		ev.Error = meta.Error
	}
	return ev
}

// unregister removes t from every index but its owner's count (see
// ownerDone): it is no longer live, its name is free and its slot released.
// It returns the queued tasks to start. An ended task with live attached
// children stays in m.nodes so that CancelTree still reaches them. Called
// with m.mu held.
func (m *Manager) unregister(t *Task) (starts []*Task) {
	if !t.live {
		return nil
	}
	t.live = false
	m.live--
	meta := &t.rec[0]
	os := m.owners[meta.Owner]
	os.head = unlink(os.head, t, ownerLinks)
	if meta.Name != "" && os.names[meta.Name] == t {
		delete(os.names, meta.Name)
	}
	if !t.admitted {
		m.dequeue(t)
	}
	starts = m.release(t, os, nil)
	if run := meta.Parent.RunID; run != "" && !meta.Detached {
		rs := m.runs[run]
		rs.live--
		rs.head = unlink(rs.head, t, runLinks)
		if rs.live == 0 {
			m.retireRun(run, rs)
		}
	}
	return starts
}

// ownerDone is the last step of a task's end, after its events were
// delivered: the task leaves the lineage index (so Wait finds it until its
// event is out), and when the owner has no task left its state goes, and so
// does its inbox if closed. Until then the owner's inbox stays bound, so a
// closed inbox's fallback sees every late event instead of a fresh inbox.
func (m *Manager) ownerDone(t *Task) {
	owner := t.rec[0].Owner
	m.mu.Lock()
	t.gone = true
	if t.done != nil {
		close(t.done)
	}
	m.pruneNode(t)
	os := m.owners[owner]
	os.live--
	gone := os.live == 0
	if gone {
		delete(m.owners, owner)
	}
	m.mu.Unlock()
	if gone {
		m.forgetClosedInbox(owner)
	}
}

// pruneNode drops finished nodes without children, walking up the lineage.
func (m *Manager) pruneNode(t *Task) {
	for t != nil && t.gone && len(t.children) == 0 {
		delete(m.nodes, t.rec[0].ID)
		p := t.parent
		if p != nil {
			delete(p.children, t)
			t.parent = nil
		}
		t = p
	}
}

// retireRun forgets a run without live tasks, unless it was cancelled: a
// cancelled run is remembered (up to WithCancelledRunsKept of them) so late
// spawns into it are refused. Called with m.mu held.
func (m *Manager) retireRun(run string, rs *runState) {
	if !rs.cancelled {
		delete(m.runs, run)
		return
	}
	m.deadRuns = append(m.deadRuns, run)
	for len(m.deadRuns) > m.cfg.runMemory {
		old := m.deadRuns[0]
		m.deadRuns[0] = ""
		m.deadRuns = m.deadRuns[1:]
		if rs := m.runs[old]; rs != nil && rs.live == 0 {
			delete(m.runs, old)
		}
	}
}

// exit marks a task goroutine (or an abandoned spawn) as done.
func (m *Manager) exit() {
	m.mu.Lock()
	m.active--
	m.checkIdle()
	m.mu.Unlock()
	m.wg.Done()
}

// checkIdle closes m.idle once shutdown began and no task is active. Called
// with m.mu held.
func (m *Manager) checkIdle() {
	if m.closed.Load() && m.active == 0 && !m.idleShut {
		m.idleShut = true
		close(m.idle)
	}
}
