package bgtask

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// settledWaits are the waits for tasks that another instance runs: each
// waiter's channel, by task id, signalled when the store's ChangeNotifier
// tells that the task's record may have settled. The Manager registers
// with the store at the first such wait, once, for its life.
type settledWaits struct {
	once    sync.Once
	mu      sync.Mutex                            // guards waiters; taken under no other lock of the Manager
	waiters map[string]map[chan struct{}]struct{} // by task id
}

// notify signals every waiter of id without blocking: the store calls it on
// its own goroutine.
func (s *settledWaits) notify(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.waiters[id] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// add registers a waiter of id and returns its channel.
func (s *settledWaits) add(id string) chan struct{} {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = make(map[string]map[chan struct{}]struct{})
	}
	if s.waiters[id] == nil {
		s.waiters[id] = make(map[chan struct{}]struct{})
	}
	s.waiters[id][c] = struct{}{}
	return c
}

// remove unregisters the waiter c of id.
func (s *settledWaits) remove(id string, c chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters[id], c)
	if len(s.waiters[id]) == 0 {
		delete(s.waiters, id)
	}
}

// listenSettled registers the Manager with the store's notifications of
// settled records, once for its life: they end waits (settledWaits) and
// wake idle receivers (fleetwake.go).
func (m *Manager) listenSettled(cn store.ChangeNotifier) {
	m.settled.once.Do(func() {
		cn.OnSettled(func(id, owner string) {
			m.settled.notify(id)
			m.wakeElsewhere(id, owner)
		})
	})
}

// waitElsewhere waits for the record of id, a task another instance runs,
// to be terminal (or awaiting input, when inputSettles) and returns it:
// woken by the store's notifications, and reading the record every
// SettledPollInterval in case one was lost. meta is the record as first
// read. ctx's end returns ctx's error.
func (m *Manager) waitElsewhere(ctx context.Context, cn store.ChangeNotifier, meta bgtype.TaskMeta, inputSettles bool) (bgtype.TaskMeta, error) {
	m.listenSettled(cn)
	c := m.settled.add(meta.ID)
	defer m.settled.remove(meta.ID, c)
	poll := time.NewTicker(cn.SettledPollInterval())
	defer poll.Stop()
	for {
		// Read after registering: a commit between the first read and the
		// registration is seen here.
		got, err := m.store.Get(ctx, meta.ID)
		switch {
		case err != nil:
			return bgtype.TaskMeta{}, err
		case settles(got.Status, inputSettles):
			return got, nil
		}
		select {
		case <-c:
		case <-poll.C:
		case <-ctx.Done():
			return bgtype.TaskMeta{}, ctx.Err()
		}
	}
}

// settles reports whether a wait ends at status.
func settles(s bgtype.Status, inputSettles bool) bool {
	return s.IsTerminal() || inputSettles && s == bgtype.StatusAwaitingInput
}

// runsElsewhere reports whether meta, a live record that this Manager
// does not hold, is a task that another live runtime instance runs: one
// of a SharedStore's other instances, or one that an InstanceLiveness
// store reports alive (a store error counts as alive, as Restore takes
// it). A record of this instance, or of one known gone, is not.
func (m *Manager) runsElsewhere(ctx context.Context, meta *bgtype.TaskMeta) bool {
	if meta.Instance == m.cfg.instance || meta.Instance == "" {
		return false
	}
	if _, ok := m.store.(store.SharedStore); ok {
		return true
	}
	l, ok := m.store.(store.InstanceLiveness)
	if !ok {
		return false
	}
	alive, err := l.InstanceAlive(ctx, meta.Instance)
	return alive || err != nil
}

// elsewhereError is the error of a call on meta's task, which another
// process runs, that the store cannot carry there; it matches ErrElsewhere
// and also.
func elsewhereError(meta *bgtype.TaskMeta, also error) error {
	return &folded{fmt.Sprintf("%s: %s runs on instance %q", ErrElsewhere, meta.ID, meta.Instance), []error{ErrElsewhere, also}}
}
