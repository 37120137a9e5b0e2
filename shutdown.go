package bgtask

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Shutdown stops the Manager like net/http's Server.Shutdown: it refuses new
// spawns (ErrClosed), cancels every task with cause ErrShutdown (queued ones
// end cancelled without running), and waits until every task goroutine has
// returned, its terminal record committed and its event delivered. Then it
// returns nil, and no goroutine of the Manager is left. From then on,
// Inbox.Wait on every inbox the Manager made or bound (and Plugin.WaitEvent)
// returns ErrClosed once its events are drained, so a host's consumer
// goroutine blocked there ends instead of waiting forever.
//
// If ctx ends first, Shutdown returns a *ShutdownError that names the tasks
// still running and wraps ctx's error; those tasks keep their cancelled
// context, and a later Shutdown call can wait for them again. Shutdown is
// safe to call more than once and concurrently.
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

// stop waits for the last task goroutines, then releases the inbox waiters:
// every final event is delivered by now.
func (m *Manager) stop() {
	m.wg.Wait()
	m.workers.close()
	m.stopOnce.Do(func() { close(m.stopped) })
}

// ShutdownError is returned by Shutdown when its context ends before every
// task stopped. It wraps the context's error.
type ShutdownError struct {
	Running   []string // ids of the tasks whose function has not returned
	Finishing int      // tasks that returned and are still recording their end
	Err       error
}

func (e *ShutdownError) Error() string {
	const show = 10
	ids := e.Running
	more := ""
	if len(ids) > show {
		ids, more = ids[:show], fmt.Sprintf(" and %d more", len(e.Running)-show)
	}
	return fmt.Sprintf("bgtask: shutdown: %d task(s) did not stop (%s%s), %d finishing: %v",
		len(e.Running), strings.Join(ids, ", "), more, e.Finishing, e.Err)
}

// Unwrap returns the context's error.
func (e *ShutdownError) Unwrap() error { return e.Err }
