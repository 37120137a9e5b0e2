package bgtask

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Durable announcements. A terminal record carries Announced once its
// owner's loop has taken its terminal event; the loop commits the mark
// before it hands the event out (commit, then hand out), so a crash loses
// at most the batch being handed out and never announces one twice. When
// an owner's run starts (Restore), every terminal record of the owner that
// is not announced, and whose event this Manager has not itself delivered
// since it started, is announced again, once.

// announced tracks the terminal events this Manager delivered to an owner
// and that are not marked yet: Restore must not deliver them again while
// they wait in an inbox or a Plugin. Only a Manager whose records outlive
// it (any Store but the default MemoryStore) keeps it. It remembers at most
// maxUnmarked ids, forgetting the oldest first: a host that drains its
// inbox and never calls MarkAnnounced cannot make it grow without bound
// (a forgotten, still unmarked event may then be announced again at the
// owner's next Restore).
type announced struct {
	mu    sync.Mutex
	sent  map[string]struct{}
	order []string // ids in the order they were added; may hold ids already done
	head  int      // index of the oldest id in order once it is full
}

// maxUnmarked bounds announced: far more terminal events than a loop takes
// between two step boundaries.
const maxUnmarked = 1 << 16

// add notes that the terminal event of id was delivered.
func (a *announced) add(id string) {
	a.mu.Lock()
	if a.sent == nil {
		a.sent = make(map[string]struct{})
	}
	if len(a.order) < maxUnmarked {
		a.order = append(a.order, id)
	} else {
		delete(a.sent, a.order[a.head])
		a.order[a.head] = id
		a.head = (a.head + 1) % maxUnmarked
	}
	a.sent[id] = struct{}{}
	a.mu.Unlock()
}

// has reports whether the terminal event of id was delivered and not marked.
func (a *announced) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.sent[id]
	return ok
}

// done forgets ids, whose mark is committed.
func (a *announced) done(ids []string) {
	a.mu.Lock()
	for _, id := range ids {
		delete(a.sent, id)
	}
	a.mu.Unlock()
}

// durable reports whether the Manager's records outlive it, so that
// announcements are tracked.
func (m *Manager) durable() bool { return m.mem == nil }

// noteDelivered records that the terminal event of id reached its owner.
func (m *Manager) noteDelivered(id string) {
	if m.durable() {
		m.sent.add(id)
	}
}

// MarkAnnounced records that the owner's loop has taken the terminal
// events of the tasks ids, so that a restart does not announce them again.
// A Plugin does it by itself at each boundary; a host that drains the
// owner's Inbox itself calls it with the ids of the terminal events
// (Event.Kind.IsTerminal) it takes, before it hands them to the model. Ids
// of tasks that are not terminal, unknown, or another owner's are ignored.
// It is one Commit; nothing is committed for no ids. Errors:
// ErrInvalidOwner, or the Store's (ctx's error if ctx ends first); after
// an error nothing is marked and the call may be repeated.
func (o Owner) MarkAnnounced(ctx context.Context, ids ...string) error {
	if !validOwner(o.id) {
		return ErrInvalidOwner
	}
	if len(ids) == 0 {
		return nil
	}
	if err := o.m.store.Commit(ctx, o.id, Announce(ids...)); err != nil {
		return fmt.Errorf("bgtask: mark announced: %w", err)
	}
	o.m.sent.done(ids)
	return nil
}

// reannounce delivers to report, once, the terminal event of each of
// owner's terminal records that is not announced, is not silent, and whose
// event this Manager has not delivered already, oldest first, and returns
// those records. When report is not owner (the tasks of a gone sub-agent,
// forwarded to its owner), nothing is marked here: a record is marked
// announced only by the loop that hands its event out, so a crash before
// that hand-out loses nothing. A corrupt record is skipped and reported in
// the returned error; the others are delivered.
func (m *Manager) reannounce(ctx context.Context, owner, report string) ([]TaskMeta, error) {
	if !m.durable() {
		return nil, nil // every record is this Manager's, and every event was delivered
	}
	var (
		errs []error
		due  []TaskMeta
	)
	for meta, err := range m.store.List(ctx, owner, StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Announced || meta.Wake == WakeSilent || m.sent.has(meta.ID) {
			continue
		}
		due = append(due, meta)
	}
	if len(errs) > 0 && !errors.Is(errors.Join(errs...), ErrCorrupt) {
		return nil, errors.Join(errs...)
	}
	for i := range due {
		m.sent.add(due[i].ID)
		_ = m.deliver(report, terminalEvent(&due[i]))
	}
	if err := errors.Join(errs...); err != nil {
		m.log.Error("bgtask: re-announce skipped records", "owner", owner, "err", err)
		return due, fmt.Errorf("bgtask: re-announce: %w", err)
	}
	return due, nil
}
