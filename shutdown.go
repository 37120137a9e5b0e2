package bgtask

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
)

// Shutdown is the hard stop (like river's StopAndCancel; unlike net/http's
// graceful Shutdown, it cancels): it refuses
// new spawns (ErrClosed), cancels every task with cause ErrShutdown (queued
// ones end cancelled without running), and waits until every task
// goroutine has returned, its terminal record committed and its event
// delivered. A task that ends cancelled this way has the cancel reason
// ShutdownReason on its record and in its cancelled event, so the model can
// tell a shutdown from a user's cancel. Then Shutdown returns nil, and no
// goroutine of the Manager is left. From then on, Inbox.Wait on every inbox
// the Manager made or bound (and Receiver.WaitEvent) returns ErrClosed once
// its events are drained, so a host's consumer goroutine blocked there ends
// instead of waiting forever. Stop is the soft stop, which lets tasks finish.
//
// If ctx ends first, Shutdown returns a *ShutdownError that names the tasks
// still running and wraps ctx's error; those tasks keep their cancelled
// context, and a later Shutdown call can wait for them again. Shutdown is
// safe to call more than once and concurrently, and after Stop.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.drainOnce.Do(func() { close(m.drain) })
	var starts []*Task
	m.mu.Lock()
	m.markClosed()
	for _, t := range m.nodes {
		_, starts = m.signal(t, ErrShutdown, starts)
	}
	m.checkIdle()
	m.mu.Unlock()
	m.workers.Shut() // a task that ends from now on frees its goroutine
	m.startAll(starts)

	select {
	case <-m.idle: // checked first: a stopped Manager returns nil even with a done ctx
		m.stop()
		return nil
	default:
	}
	select {
	case <-m.idle:
		m.stop()
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	ids := m.runningIDs()
	active := m.active
	m.mu.Unlock()
	return &ShutdownError{Running: ids, Finishing: active - len(ids), Err: ctx.Err()}
}

// runningIDs returns, sorted, the ids of the tasks whose function has not
// returned: the live ones and those Stop cut. A task cancelled while
// queued is not among them: its function never runs. Called with m.mu
// held.
func (m *Manager) runningIDs() []string {
	var ids []string
	for id, t := range m.nodes {
		if t.phase.live() && t.phase != phaseDropped && t.calling() {
			ids = append(ids, id)
		}
	}
	for t := range m.cutRunning {
		ids = append(ids, t.rec.ID)
	}
	slices.Sort(ids)
	return ids
}

// Stop is the soft stop, like river's Client.Stop, for a deploy: it
// refuses new spawns (ErrClosed) and cancels nothing. Queued tasks, which
// have not started, never start: they end interrupted at once. The tasks
// that run may end on their own until ctx ends (give it a deadline); then
// every task still running is cut: it ends interrupted, as after a crash
// and the recovery of its records, with an error saying that its process
// shut down (error kind KindInterrupted, the record fenced on a new
// attempt), and its owner gets an EventInterrupted. Stop itself records
// that end and delivers the event, then cancels the task's context with a
// cause that matches ErrShutdown; whatever its function returns later is
// discarded: the interrupted record is final, and no second event follows.
//
// Stop returns nil once every running task ended on its own and every
// terminal event is delivered, like Shutdown. If ctx ended first, Stop
// returns about then, without waiting for the functions it cut to return:
// a *ShutdownError whose Interrupted field names the tasks it cut and whose
// Running field names the tasks whose function had not returned when Stop
// returned (a function that honours its context may still be winding
// down), wrapping ctx's error. Their goroutines still run: a later Shutdown
// (or Stop) waits for them, and returns nil once they have returned.
// Stop is safe to call more than once and concurrently; after Shutdown
// began it cuts nothing Shutdown already cancelled, and it does not wait
// for those tasks either.
func (m *Manager) Stop(ctx context.Context) error {
	m.drainOnce.Do(func() { close(m.drain) }) // resumable tasks save and yield (Task.Draining)
	var starts []*Task
	m.mu.Lock()
	m.markClosed()
	for _, t := range m.nodes {
		if t.phase == phaseQueued || t.phase == phaseWaiting {
			_, starts = m.signal(t, errStopCut, starts)
		}
	}
	m.checkIdle()
	m.mu.Unlock()
	m.workers.Shut()
	m.startAll(starts)

	select {
	case <-m.idle: // checked first: nothing to cut, even with a done ctx
		m.stop()
		return nil
	default:
	}
	select {
	case <-m.idle:
		m.stop()
		return nil
	case <-ctx.Done():
	}
	cut, early, ids := m.cut()
	for _, t := range cut {
		if t.isKind() {
			m.requeueEnd(t, m.stopWhy(), true) // a resumable task resumes elsewhere
			continue
		}
		out := outcome{}
		m.stopOutcome(&out)
		m.end(t, &out, true, false)
	}
	for _, done := range early {
		<-done // its goroutine ends it without calling its function
	}

	m.mu.Lock()
	running := m.runningIDs()
	active := m.active
	m.mu.Unlock()
	if len(running) == 0 { // what is left records its end without waiting for a function
		<-m.idle
		m.stop()
		if len(ids) == 0 {
			return nil
		}
	}
	return &ShutdownError{Interrupted: ids, Running: running, Finishing: active - len(running), Err: ctx.Err()}
}

// The states of Task.end: who ends the task, and whether its function
// runs. Only the task's goroutine moves it from endOpen to endCalling and
// from there to endReturned; only Stop moves it from endOpen to
// endCutEarly or from endCalling to endCut. Whoever moves it first ends
// the task; the other records nothing.
const (
	endOpen     uint32 = iota // the function has not been called yet
	endCalling                // the function is running
	endReturned               // the task's goroutine ends it: its function returned, or never runs
	endCut                    // Stop ended it while its function ran; the goroutine only releases it
	endCutEarly               // Stop cut it before its function was called: its goroutine ends it interrupted, without calling it
)

// claimEnd is called by the task's goroutine once the function returned
// (or will never run): it reports whether the goroutine ends the task,
// false if Stop already did.
func (t *Task) claimEnd() bool {
	for {
		s := t.end.Load()
		if s == endCut {
			return false
		}
		if t.end.CompareAndSwap(s, endReturned) {
			return true
		}
	}
}

// calling reports whether the task's function has not returned (it may not
// have been called yet), and Stop has not ended the task.
func (t *Task) calling() bool {
	s := t.end.Load()
	return s != endReturned && s != endCut
}

// cut claims, at Stop's deadline, the end of every live task that was not
// cancelled and whose function has not returned. It returns the tasks
// whose function runs, for Stop to end (each counts twice in m.active from
// now on: once for that end, once for its goroutine, see releaseCut); the
// channels closed once the tasks cut before their call have ended; and
// the sorted ids of all of them.
func (m *Manager) cut() (cut []*Task, early []chan struct{}, ids []string) {
	var starts []*Task
	m.mu.Lock()
	for id, t := range m.nodes {
		if !t.phase.live() || t.signaled {
			continue
		}
		switch {
		case t.end.CompareAndSwap(endCalling, endCut):
			t.signaled = true // nobody else cancels it: its cause is errStopCut
			if m.cutRunning == nil {
				m.cutRunning = make(map[*Task]struct{})
			}
			m.cutRunning[t] = struct{}{}
			m.active++
			cut = append(cut, t)
		case t.end.CompareAndSwap(endOpen, endCutEarly):
			r := t.rareState()
			if r.done == nil {
				r.done = make(chan struct{})
			}
			early = append(early, r.done)
			_, starts = m.signal(t, errStopCut, starts)
		default:
			continue // its function returned: it ends on its own
		}
		ids = append(ids, id)
	}
	m.mu.Unlock()
	m.startAll(starts)
	slices.Sort(ids)
	return cut, early, ids
}

// releaseCut is what the goroutine of a task that Stop ended does once its
// function returned: it no longer counts as running nor for Shutdown.
func (m *Manager) releaseCut(t *Task) {
	m.mu.Lock()
	delete(m.cutRunning, t)
	m.active--
	m.checkIdle()
	m.mu.Unlock()
}

// errStopCut is the cancel cause of the tasks that Stop cuts: they end
// interrupted, whatever their function returns.
var errStopCut = fmt.Errorf("%w: the stop's deadline passed; the task ends interrupted", ErrShutdown)

// stopOutcome is the outcome of a task that Stop cut. Out of line
// (docs/internals.md).
//
//go:noinline
func (m *Manager) stopOutcome(out *outcome) {
	*out = outcome{status: bgtype.StatusInterrupted, kind: bgtype.KindInterrupted, err: fmt.Sprintf(
		"bgtask: interrupted: the runtime that ran it (instance %q) shut down before it ended; it will not be re-run", m.cfg.instance)}
}

// stop waits for the last task goroutines and the callbacks they queued,
// then releases the inbox waiters: every final event is delivered by now.
func (m *Manager) stop() {
	m.wg.Wait()
	m.calls.wait()
	m.workers.Close()
	m.stopOnce.Do(func() { close(m.stopped) })
}

// ShutdownError is returned by Shutdown when its context ends before every
// task stopped, and by Stop when its context ended before every running
// task ended on its own. It wraps the context's error. The goroutines of
// the tasks in Running are still running when it is returned: a later
// Shutdown waits for them.
type ShutdownError struct {
	// Running: ids of the tasks whose function had not returned, sorted.
	// For Stop, among them the tasks it cut whose function had not yet
	// returned (their records are interrupted already).
	Running []string
	// Finishing: tasks whose function returned and that were still
	// recording their end.
	Finishing int
	// Interrupted (Stop only): ids of the tasks it cut at its deadline,
	// sorted; their records are interrupted and their events delivered.
	Interrupted []string
	Err         error
}

func (e *ShutdownError) Error() string {
	if len(e.Interrupted) > 0 {
		return fmt.Sprintf("bgtask: stop: %d task(s) still running at the deadline were interrupted (%s): %v",
			len(e.Interrupted), showIDs(e.Interrupted), e.Err)
	}
	return fmt.Sprintf("bgtask: shutdown: %d task(s) did not stop (%s), %d finishing: %v",
		len(e.Running), showIDs(e.Running), e.Finishing, e.Err)
}

// showIDs lists the first ten ids, and how many more there are.
func showIDs(ids []string) string {
	const show = 10
	if len(ids) > show {
		return strings.Join(ids[:show], ", ") + fmt.Sprintf(" and %d more", len(ids)-show)
	}
	return strings.Join(ids, ", ")
}

// Unwrap returns the context's error.
func (e *ShutdownError) Unwrap() error { return e.Err }

// markClosed marks m closed: New, Spawn and the boundaries refuse from now
// on, and m.closing is closed, which ends the retries of helpers (see
// retryCloseRun). Called with m.mu held.
func (m *Manager) markClosed() {
	if !m.closed.Swap(true) {
		close(m.closing)
	}
}
