package bgtask

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Shutdown is the hard stop, like net/http's Server.Shutdown: it refuses
// new spawns (ErrClosed), cancels every task with cause ErrShutdown (queued
// ones end cancelled without running), and waits until every task
// goroutine has returned, its terminal record committed and its event
// delivered. A task that ends cancelled this way has the cancel reason
// ShutdownReason on its record and in its cancelled event, so the model can
// tell a shutdown from a user's cancel. Then Shutdown returns nil, and no
// goroutine of the Manager is left. From then on, Inbox.Wait on every inbox
// the Manager made or bound (and Plugin.WaitEvent) returns ErrClosed once
// its events are drained, so a host's consumer goroutine blocked there ends
// instead of waiting forever. Stop is the soft stop, which lets tasks finish.
//
// If ctx ends first, Shutdown returns a *ShutdownError that names the tasks
// still running and wraps ctx's error; those tasks keep their cancelled
// context, and a later Shutdown call can wait for them again. Shutdown is
// safe to call more than once and concurrently, and after Stop.
func (m *Manager) Shutdown(ctx context.Context) error {
	var starts []*Task
	m.mu.Lock()
	m.closed.Store(true)
	for _, t := range m.nodes {
		_, starts = m.signal(t, ErrShutdown, starts)
	}
	m.checkIdle()
	m.mu.Unlock()
	m.workers.shut() // a task that ends from now on frees its goroutine
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
	var ids []string
	m.mu.Lock()
	for id, t := range m.nodes {
		if t.phase.live() && !t.returned.Load() {
			ids = append(ids, id)
		}
	}
	active := m.active
	m.mu.Unlock()
	slices.Sort(ids)
	return &ShutdownError{Running: ids, Finishing: active - len(ids), Err: ctx.Err()}
}

// Stop is the soft stop, like river's Client.Stop, for a deploy: it
// refuses new spawns (ErrClosed) and cancels nothing. Queued tasks, which
// have not started, never start: they end interrupted at once. The tasks
// that run may end on their own until ctx ends (give it a deadline); then
// every task still running is cut: it ends interrupted, as after a crash
// and the recovery of its records, with an error saying that its process
// shut down (error kind KindInterrupted, the record fenced on a new
// attempt), and its owner gets an EventInterrupted. Its context is
// cancelled with a cause that matches ErrShutdown, and whatever its
// function returns then is discarded: the interrupted record is final.
//
// Stop returns once every task goroutine has returned and every terminal
// event is delivered, like Shutdown: nil when every running task ended on
// its own, else a *ShutdownError whose Interrupted field names the tasks it
// cut and that wraps ctx's error. A function that ignores its context keeps
// Stop waiting after the deadline, as it would keep a process from exiting.
// Stop is safe to call more than once and concurrently; after Shutdown
// began it cuts nothing Shutdown already cancelled.
func (m *Manager) Stop(ctx context.Context) error {
	var starts []*Task
	m.mu.Lock()
	m.closed.Store(true)
	for _, t := range m.nodes {
		if t.phase == phaseQueued || t.phase == phaseWaiting {
			_, starts = m.signal(t, errStopCut, starts)
		}
	}
	m.checkIdle()
	m.mu.Unlock()
	m.workers.shut()
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
	var ids []string
	starts = nil
	m.mu.Lock()
	for id, t := range m.nodes {
		if t.phase.live() && !t.returned.Load() && !t.signalled {
			ids = append(ids, id)
			_, starts = m.signal(t, errStopCut, starts)
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	<-m.idle
	m.stop()
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return &ShutdownError{Interrupted: ids, Err: ctx.Err()}
}

// errStopCut is the cancel cause of the tasks that Stop cuts: they end
// interrupted, whatever their function returns.
var errStopCut = fmt.Errorf("%w: the stop's deadline passed; the task ends interrupted", ErrShutdown)

// stopOutcome is the outcome of a task that Stop cut. Out of line
// (docs/internals.md).
//
//go:noinline
func (m *Manager) stopOutcome(out *outcome) {
	*out = outcome{status: StatusInterrupted, kind: KindInterrupted, err: fmt.Sprintf(
		"bgtask: interrupted: the runtime that ran it (instance %q) shut down before it ended; it will not be re-run", m.cfg.instance)}
}

// stop waits for the last task goroutines, then releases the inbox waiters:
// every final event is delivered by now.
func (m *Manager) stop() {
	m.wg.Wait()
	m.workers.close()
	m.stopOnce.Do(func() { close(m.stopped) })
}

// ShutdownError is returned by Shutdown when its context ends before every
// task stopped, and by Stop when its context ended before every running
// task ended on its own. It wraps the context's error.
type ShutdownError struct {
	Running     []string // Shutdown: ids of the tasks whose function has not returned
	Finishing   int      // Shutdown: tasks that returned and are still recording their end
	Interrupted []string // Stop: ids of the tasks it cut at its deadline, now interrupted
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
