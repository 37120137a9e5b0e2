package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

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
	output     int64 // the bytes written to the task's output in all: set by end (endOutput)
}

// run is a task's goroutine: promote from queued if needed, call the
// function, record the outcome, notify the owner, free everything. The
// frame of run holds no outcome while the function runs: it is built, and
// the end recorded, in frames made after the function returned or instead
// of calling it (returned, begin, runEnd), so a parked task keeps the
// small first stack of a goroutine even when an allocation in it goes deep
// into the runtime (docs/internals.md).
func (m *Manager) run(t *Task, small bool) {
	stage := stageBegin
	defer m.runEnd(t, &stage) // deferred so that a panic or runtime.Goexit in the function still ends it
	if !m.begin(t, &stage) {
		return
	}
	stage = stageCalling
	v, err := t.fn(t.context(), t)
	m.returned(t, v, err, &stage, small)
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
		m.finish(t, &out, false)
	}
	if *stage != stageRecorded {
		out := outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: "bgtask: task function called runtime.Goexit"}
		m.finish(t, &out, false)
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
	m.finish(t, &out, false)
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
func (m *Manager) returned(t *Task, v any, err error, stage *uint8, small bool) {
	if small {
		if m.endsApart(t, small) && m.endAlone() {
			small = false // recorded here, on the stack grown next (decision 815)
		}
		if !m.endsApart(t, small) {
			// Before encoding the result, while shallow: the end needs
			// the bigger stack anyway. A reused worker (not small) grew
			// its stack once, after its first park: growing again would
			// only clear a KiB of stack (decision 814).
			stackgrow.Grow()
		}
	}
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
	m.finishGrown(t, &out, small)
}

// settle sets out from what the function returned. Out of line, so its
// frame is not part of returned's while the result is encoded; its error
// paths are out of line too, so that a completion is encoded on the stack
// a new goroutine started with (decision 770).
//
//go:noinline
func (m *Manager) settle(t *Task, out *outcome, v any, err error) {
	if err != nil {
		m.settleErr(t, out, err)
		return
	}
	res, encErr := jsoncap.Encode(v)
	if encErr != nil {
		notEncodable(out, encErr)
		return
	}
	out.status = bgtype.StatusCompleted
	out.result, _ = jsoncap.JSON(res, m.cfg.caps.MaxResultBytes)
}

// notEncodable is the outcome of a task whose result encoding/json
// refused. Out of line (settle).
//
//go:noinline
func notEncodable(out *outcome, err error) {
	*out = outcome{status: bgtype.StatusFailed, kind: bgtype.KindError, err: fmt.Sprintf("bgtask: result is not JSON-encodable: %v", err)}
}

// settleErr is settle of a function that returned an error. Out of line
// (settle).
//
//go:noinline
func (m *Manager) settleErr(t *Task, out *outcome, err error) {
	switch {
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

// endsApart reports whether t's end is likely recorded by another
// goroutine (endSmall): t runs on a new goroutine's first stack, in the
// background, with the in-memory store and no observer. Its stack is then
// not grown: its end fits (decision 770).
func (m *Manager) endsApart(t *Task, small bool) bool {
	return small && m.mem != nil && m.cfg.observer == nil && t.fg.Load() == fgBackground
}

// endAlone reports whether the end of a task that just returned would be
// the only one to record: no end waits on the list or is being recorded,
// and the task is the Manager's only live one (a lone spawn, as an agent
// makes them, after its idle workers expired). Its goroutine then records
// the end itself, on a stack grown once, instead of starting a recorder
// (endSmall): one goroutine less to start and to hand the end to, as eino's
// task hands its end to the waiter. In a burst others are live, or their
// ends are on the list: those ends stay apart (decision 770). It never
// waits for m.mu (TryLock): a held lock means another goroutine is busy
// with the Manager, so the end is not alone, and nothing that holds m.mu
// while it waits for a task's end can deadlock with it.
func (m *Manager) endAlone() bool {
	if m.ends.Load() != nil || m.endsBusy.Load() || !m.mu.TryLock() {
		return false
	}
	alone := m.live == 1
	m.mu.Unlock()
	return alone
}

// finish commits the terminal record, retires the task, and only then tells
// the owner (commit, then notify: whoever reads the event can Get the final
// record). If the commit keeps failing, the owner gets EventCommitFailed
// before the terminal event, so no record stays silently running.
func (m *Manager) finish(t *Task, out *outcome, small bool) {
	if !m.endsApart(t, small) {
		stackgrow.Grow()
	}
	m.finishGrown(t, out, small)
}

// finishGrown is finish on a stack grown for the end already, or whose end
// is recorded apart (endsApart): returned grew it, or its goroutine is a
// reused worker, grown once after its first park.
func (m *Manager) finishGrown(t *Task, out *outcome, small bool) {
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
	m.end(t, out, false, small)
}
