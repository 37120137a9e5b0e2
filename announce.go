package bgtask

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
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
// they wait in an inbox or a Receiver. Each id is kept with the owner it was
// delivered to and the owner of its record (another one for a forwarded
// event: a gone sub-agent's task reported to the sub-agent's owner), so
// that an owner's marks forget only what was delivered to it, and mark a
// forwarded record under its own owner. Only a Manager whose records
// outlive it (any Store but the default in-memory store) keeps it. It
// remembers at most maxUnmarked ids, forgetting the oldest first: a host
// that drains its inbox and never calls MarkAnnounced cannot make it grow
// without bound (a forgotten, still unmarked event may then be announced
// again at the owner's next Restore).
type announced struct {
	mu    sync.Mutex // guards the fields below; nothing is locked under it
	sent  map[string]sentTo
	order []string // ids in the order they were added; may hold ids already done
	head  int      // index of the oldest id in order once it is full
}

// sentTo says where a delivered terminal event went: to, the owner whose
// inbox got it, and owner, the owner of its record.
type sentTo struct{ to, owner string }

// maxUnmarked bounds announced: far more terminal events than a loop takes
// between two step boundaries.
const maxUnmarked = 1 << 16

// add notes that the terminal event of id, a record of owner, was
// delivered to the owner to.
func (a *announced) add(to, owner, id string) {
	a.mu.Lock()
	if a.sent == nil {
		a.sent = make(map[string]sentTo)
	}
	if len(a.order) < maxUnmarked {
		a.order = append(a.order, id)
	} else {
		delete(a.sent, a.order[a.head])
		a.order[a.head] = id
		a.head = (a.head + 1) % maxUnmarked
	}
	a.sent[id] = sentTo{to: to, owner: owner}
	a.mu.Unlock()
}

// forward notes that the terminal event of id went on from a sub-agent's
// inbox to the owner to: a record already noted keeps its own owner (an
// event forwarded again, up a lineage of ended sub-agents); one not noted
// is a record of owner, the ended sub-agent.
func (a *announced) forward(to, owner, id string) {
	a.mu.Lock()
	s, ok := a.sent[id]
	a.mu.Unlock()
	if ok {
		owner = s.owner
	}
	a.add(to, owner, id)
}

// has reports whether the terminal event of id was delivered and not marked.
func (a *announced) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.sent[id]
	return ok
}

// forwarded returns those of ids whose events were delivered to the owner
// to but whose records are another owner's, grouped by that owner.
func (a *announced) forwarded(to string, ids []string) map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var by map[string][]string
	for _, id := range ids {
		if s, ok := a.sent[id]; ok && s.to == to && s.owner != to {
			if by == nil {
				by = make(map[string][]string)
			}
			by[s.owner] = append(by[s.owner], id)
		}
	}
	return by
}

// done forgets those of ids that were delivered to the owner to: their
// mark is committed, or (a Receiver closed before handing them out) the next
// Restore must announce them again. Ids delivered to another owner stay.
func (a *announced) done(to string, ids []string) {
	a.mu.Lock()
	for _, id := range ids {
		if s, ok := a.sent[id]; ok && s.to == to {
			delete(a.sent, id)
		}
	}
	if len(a.sent) == 0 { // every id is done: drop the ring too
		a.sent, a.order, a.head = nil, nil, 0
	}
	a.mu.Unlock()
}

// durable reports whether the Manager's records outlive it, so that
// announcements are tracked.
func (m *Manager) durable() bool { return m.mem == nil }

// noteDelivered records that the terminal event of id, a record of owner,
// reached the owner to.
func (m *Manager) noteDelivered(to, owner, id string) {
	if m.durable() {
		m.sent.add(to, owner, id)
	}
}

// MarkAnnounced records that the owner's loop has taken the terminal
// events of the tasks ids, so that a restart does not announce them again.
// A Receiver does it by itself at each boundary; a host that drains the
// owner's Inbox itself calls it with the ids of the terminal events
// (Event.Kind.IsTerminal) it takes, before it hands them to the model.
//
// Besides the owner's own records, it marks those that this Manager
// forwarded to the owner (the tasks of a gone sub-agent of the owner, which
// Restore reports to it), under their own owner, the sub-agent. Ids of
// tasks that are not terminal, unknown, or of any other owner are
// ignored: nothing about them changes, in the Store or in the Manager. It
// is one Commit per record owner, the forwarded records' first; nothing
// is committed for no ids. Errors: ErrInvalidArgument (blank owner), or the Store's (ctx's
// error if ctx ends first); after an error the call may be repeated.
func (o Owner) MarkAnnounced(ctx context.Context, ids ...string) error {
	if !bgtype.ValidOwner(o.id) {
		return bgtype.ErrInvalidOwner
	}
	if len(ids) == 0 {
		return nil
	}
	own := ids
	if fwd := o.m.sent.forwarded(o.id, ids); fwd != nil {
		// The forwarded records first: once the owner's own are marked, a
		// Restore no longer follows its gone sub-agent to them.
		for _, owner := range slices.Sorted(maps.Keys(fwd)) {
			if err := o.m.store.Commit(ctx, owner, store.AnnounceAction(fwd[owner]...)); err != nil {
				return fmt.Errorf("bgtask: mark announced: %w", err)
			}
		}
		own = slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
			for _, f := range fwd {
				if slices.Contains(f, id) {
					return true
				}
			}
			return false
		})
	}
	if len(own) > 0 {
		if err := o.m.store.Commit(ctx, o.id, store.AnnounceAction(own...)); err != nil {
			return fmt.Errorf("bgtask: mark announced: %w", err)
		}
	}
	o.m.sent.done(o.id, ids)
	return nil
}

// reannounce delivers to report, once, the terminal event of each of
// owner's terminal records that is not announced, is not silent, and whose
// event this Manager has not delivered already, oldest first, and returns
// those records. When report is not owner (the tasks of a gone sub-agent,
// forwarded to its owner), nothing is marked here: the records are marked,
// under their own owner, by the commit that hands their events to the
// model (Owner.MarkAnnounced), so a crash before that announces them
// again. A record that another live instance of an InstanceLiveness store
// ended is left to that instance, which delivered its event itself: it is
// announced here once that instance is gone. A corrupt record is skipped
// and reported in the returned error; the others are delivered.
func (m *Manager) reannounce(ctx context.Context, owner, report string) ([]bgtype.TaskMeta, error) {
	if !m.durable() {
		return nil, nil // every record is this Manager's, and every event was delivered
	}
	var (
		errs  []error
		due   []bgtype.TaskMeta
		known = make(map[string]bool)
	)
	live, _ := m.store.(store.InstanceLiveness)
	for meta, err := range m.store.List(ctx, owner, bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Announced || meta.Wake == bgtype.WakeSilent || m.sent.has(meta.ID) {
			continue
		}
		alive, err := m.aliveElsewhere(ctx, live, known, &meta)
		if err != nil {
			return nil, fmt.Errorf("bgtask: re-announce: is instance %q alive: %w", meta.Instance, err)
		}
		if !alive {
			due = append(due, meta)
		}
	}
	if len(errs) > 0 && !errors.Is(errors.Join(errs...), bgtype.ErrCorrupt) {
		return nil, errors.Join(errs...)
	}
	for i := range due {
		m.sent.add(report, owner, due[i].ID)
		_ = m.deliver(report, terminalEvent(&due[i]))
	}
	if err := errors.Join(errs...); err != nil {
		m.log.Error("bgtask: re-announce skipped records", "owner", owner, "err", err)
		return due, fmt.Errorf("bgtask: re-announce: %w", err)
	}
	return due, nil
}
