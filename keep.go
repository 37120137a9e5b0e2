package bgtask

import (
	"context"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/fifo"
	"github.com/bgtask/bgtask/store"
)

// What the Manager keeps for an owner while no run of it is open: the one
// holder of the owner's events between runs (a Receiver), and the events an
// owner's closed holder left behind, for the next one.

// defaultKeepLimit is how many events are kept for an owner while no run
// of it is open (see ReceiverConfig.KeepLimit).
const defaultKeepLimit = 1024

// ownerSink holds an owner's events while no run of it is open: the
// owner's live Receiver. idleInbox returns the closed inbox whose fallback
// is keepLate, made on first use.
type ownerSink interface {
	keepLate(bgtype.Event)
	idleInbox() *Inbox
}

// eventKeep holds an owner's events while no run is open.
type eventKeep struct{ evs []bgtype.Event }

// add keeps ev under limit events. Quiet progress replaces the kept event
// of its task and type. At the limit one event goes (see ReceiverConfig.KeepLimit),
// and add returns it.
func (k *eventKeep) add(ev bgtype.Event, limit int) (dropped bgtype.Event, full bool) {
	_, _, dropped, full = k.put(ev, limit)
	return dropped, full
}

// put is add that also reports whether ev was kept as an event of its own
// (not when it replaced kept quiet progress or was itself the one
// dropped), and the index of the kept event it dropped, -1 for none.
func (k *eventKeep) put(ev bgtype.Event, limit int) (added bool, removed int, dropped bgtype.Event, full bool) {
	if ev.Kind == bgtype.EventCustom && ev.Quiet {
		i := slices.IndexFunc(k.evs, func(old bgtype.Event) bool {
			return old.Kind == bgtype.EventCustom && old.Quiet && old.TaskID == ev.TaskID && old.EventType == ev.EventType
		})
		if i >= 0 {
			k.evs[i].Payload = ev.Payload // keeps its place in the order
			return false, -1, bgtype.Event{}, false
		}
	}
	removed = -1
	if len(k.evs) >= limit {
		i := slices.IndexFunc(k.evs, func(old bgtype.Event) bool { return !old.Kind.IsTerminal() })
		switch {
		case i < 0 && !ev.Kind.IsTerminal():
			return false, -1, ev, true // the kept ones all end a task: they matter more
		case i < 0:
			i = 0
		}
		dropped, removed, full = k.evs[i], i, true
		k.evs = slices.Delete(k.evs, i, i+1)
	}
	k.evs = append(k.evs, ev)
	return true, removed, dropped, full
}

// ownerKeep is the Manager's keep of an owner whose holder let go: its
// events, and beside each its place in the order of every such owner's
// events (seqs, increasing), for Tuning.KeptEventsTotal.
type ownerKeep struct {
	eventKeep
	seqs []uint64
}

// put is eventKeep.put that keeps seq beside ev.
func (k *ownerKeep) put(ev bgtype.Event, limit int, seq uint64) (added bool, dropped bgtype.Event, full bool) {
	added, removed, dropped, full := k.eventKeep.put(ev, limit)
	if removed >= 0 {
		k.seqs = slices.Delete(k.seqs, removed, removed+1)
	}
	if added {
		k.seqs = append(k.seqs, seq)
	}
	return added, dropped, full
}

// remove forgets the kept event at index i.
func (k *ownerKeep) remove(i int) {
	k.evs = slices.Delete(k.evs, i, i+1)
	k.seqs = slices.Delete(k.seqs, i, i+1)
}

// keptRef names one event of the Manager's keep, in the Manager-wide
// order: the event k holds at seq, while k is still owner's keep. A ref
// whose event went otherwise (the owner's next Receiver took it, or the
// owner's own limit dropped it) is stale: it is skipped, and compacted
// away.
type keptRef struct {
	owner string
	k     *ownerKeep
	seq   uint64
}

// keptOrder is the Manager-wide order of the events kept for owners whose
// holder let go, so Tuning.KeptEventsTotal drops the oldest first: one
// queue for the events that end a task and one for the others, which go
// first. Guarded by Manager.keepMu.
type keptOrder struct {
	total    int // events kept across owners
	next     uint64
	progress fifo.Queue[keptRef]
	ends     fifo.Queue[keptRef]
}

// dropKept reports an event of owner dropped at the keep limit. A durable
// terminal event is forgotten as delivered, so the next Restore announces
// its record again.
func (m *Manager) dropKept(owner string, ev bgtype.Event) {
	if !ev.Kind.IsTerminal() {
		m.log.Warn("bgtask: receiver: keep limit reached: event dropped", "owner", owner, "task_id", ev.TaskID, "kind", ev.Kind)
		return
	}
	if m.durable() {
		m.sent.done(owner, []string{ev.TaskID})
		m.log.Error("bgtask: receiver: keep limit reached: terminal event dropped; the next run announces it again", "owner", owner, "task_id", ev.TaskID)
		return
	}
	m.log.Error("bgtask: receiver: keep limit reached: terminal event dropped", "owner", owner, "task_id", ev.TaskID, "kind", ev.Kind)
}

// claimOwner makes s the one holder of owner's events between runs, and
// hands adopt, in order and before any later event reaches s, the events
// the Manager kept since the owner's previous holder let go. It reports
// false, changing nothing, while another holder has the owner.
func (m *Manager) claimOwner(owner string, s ownerSink, adopt func(bgtype.Event)) bool {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	if m.sinks[owner] != nil {
		return false
	}
	if m.sinks == nil {
		m.sinks = make(map[string]ownerSink)
	}
	m.sinks[owner] = s
	if k := m.kept[owner]; k != nil {
		for _, ev := range k.evs {
			adopt(ev)
		}
		m.keptOrder.total -= len(k.evs)
		k.evs, k.seqs = nil, nil // its refs are stale now: they must not hold the events
		delete(m.kept, owner)
		if len(m.kept) == 0 {
			m.kept = nil // a map keeps its memory: let it go with its last owner
			m.keptOrder.reset()
		}
	}
	return true
}

// releaseOwner lets go of owner for s, its holder, and runs done while no
// other holder can claim the owner, so done can stop s taking events.
func (m *Manager) releaseOwner(owner string, s ownerSink, done func()) {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	if m.sinks[owner] == s {
		delete(m.sinks, owner)
		if len(m.sinks) == 0 {
			m.sinks = nil // a map keeps its memory: let it go with its last owner
		}
	}
	done()
}

// orphanEvent takes an event of owner that reached a closed Receiver of it
// (or the closed inbox Close left bound): the owner's live Receiver, if it
// has one now, keeps it for its next run. Otherwise a terminal event of a
// durable Store is forgotten as delivered, so that the owner's next
// RunStart announces its record, still unannounced, once; any other event
// is kept for the owner's next Receiver, under limit events for the owner
// and Tuning.KeptEventsTotal across owners (see dropOldestKept).
func (m *Manager) orphanEvent(owner string, ev bgtype.Event, limit int) {
	m.keepMu.Lock()
	if s := m.sinks[owner]; s != nil {
		m.keepMu.Unlock()
		s.keepLate(ev) // hands it back here if s is letting go meanwhile
		return
	}
	if m.durable() && ev.Kind.IsTerminal() {
		m.sent.done(owner, []string{ev.TaskID})
		m.keepMu.Unlock()
		return
	}
	if !ev.Kind.IsTerminal() && !ev.Quiet {
		if _, ok := m.store.(store.NoticePoster); ok {
			m.keepMu.Unlock()
			if m.postNotice(owner, ev) { // a Receiver made meanwhile takes it from the store
				return
			}
			m.keepMu.Lock()
			if s := m.sinks[owner]; s != nil { // made meanwhile
				m.keepMu.Unlock()
				s.keepLate(ev)
				return
			}
		}
	}
	k := m.kept[owner]
	if k == nil {
		if m.kept == nil {
			m.kept = make(map[string]*ownerKeep)
		}
		k = &ownerKeep{}
		m.kept[owner] = k
	}
	o := &m.keptOrder
	o.next++
	before := len(k.evs)
	added, dropped, full := k.put(ev, limit, o.next)
	o.total += len(k.evs) - before
	if added {
		ref := keptRef{owner: owner, k: k, seq: o.next}
		if ev.Kind.IsTerminal() {
			o.ends.Push(ref)
		} else {
			o.progress.Push(ref)
		}
	}
	var over keptRef
	var overEv bgtype.Event
	overFull := false
	if o.total > m.cfg.tuning.KeptEventsTotal {
		over, overEv, overFull = m.dropOldestKept()
	}
	m.compactKept()
	m.keepMu.Unlock()
	if full {
		m.dropKept(owner, dropped)
	}
	if overFull {
		m.dropKeptTotal(over.owner, overEv)
	}
}

// dropOldestKept makes room under Tuning.KeptEventsTotal: it forgets the
// oldest kept event, across owners, that does not end a task, or when
// every kept event ends one, the oldest of those. It returns the event and
// its owner's ref, false when nothing is kept. Called with keepMu held.
func (m *Manager) dropOldestKept() (keptRef, bgtype.Event, bool) {
	o := &m.keptOrder
	for _, q := range []*fifo.Queue[keptRef]{&o.progress, &o.ends} {
		for q.Len() > 0 {
			ref := q.Pop()
			i, ok := m.keptIndex(ref)
			if !ok {
				continue // stale
			}
			ev := ref.k.evs[i]
			ref.k.remove(i)
			o.total--
			if len(ref.k.evs) == 0 {
				delete(m.kept, ref.owner)
				if len(m.kept) == 0 {
					m.kept = nil
					o.reset()
				}
			}
			return ref, ev, true
		}
	}
	return keptRef{}, bgtype.Event{}, false
}

// reset empties the order once nothing is kept: its stale refs go with
// the queues' arrays.
func (o *keptOrder) reset() { *o = keptOrder{next: o.next} }

// keptIndex returns the index of ref's event in its owner's keep, false
// for a stale ref. Called with keepMu held.
func (m *Manager) keptIndex(ref keptRef) (int, bool) {
	if m.kept[ref.owner] != ref.k {
		return 0, false
	}
	return slices.BinarySearch(ref.k.seqs, ref.seq)
}

// compactKept drops the stale refs of the keep's order once they
// outnumber the live ones (and a floor), so the order stays within twice
// what is kept: the cost is the size of the queues, paid once per as
// many stale refs. Called with keepMu held.
func (m *Manager) compactKept() {
	o := &m.keptOrder
	if o.progress.Len()+o.ends.Len() <= 2*o.total+keptCompactFloor {
		return
	}
	for _, q := range []*fifo.Queue[keptRef]{&o.progress, &o.ends} {
		var live fifo.Queue[keptRef]
		for _, ref := range q.All() {
			if _, ok := m.keptIndex(ref); ok {
				live.Push(ref)
			}
		}
		*q = live
	}
}

// keptCompactFloor is how many stale refs the keep's order may hold
// beyond its live ones before compactKept runs: a few owners coming and
// going do not make every event pay a pass.
const keptCompactFloor = 1024

// dropKeptTotal reports an event of owner dropped at Tuning.KeptEventsTotal.
// A durable terminal event is forgotten as delivered, so the next Restore
// announces its record again.
func (m *Manager) dropKeptTotal(owner string, ev bgtype.Event) {
	limit := m.cfg.tuning.KeptEventsTotal
	if !ev.Kind.IsTerminal() {
		m.log.Warn("bgtask: kept events of closed owners: total limit reached: oldest event dropped", "owner", owner, "task_id", ev.TaskID, "kind", ev.Kind, "limit", limit)
		return
	}
	if m.durable() {
		m.sent.done(owner, []string{ev.TaskID})
		m.log.Error("bgtask: kept events of closed owners: total limit reached: terminal event dropped; the next run announces it again", "owner", owner, "task_id", ev.TaskID, "limit", limit)
		return
	}
	m.log.Error("bgtask: kept events of closed owners: total limit reached: terminal event dropped", "owner", owner, "task_id", ev.TaskID, "kind", ev.Kind, "limit", limit)
}

// unbindOwnerIdle drops idle, owner's holder between runs (its
// idleInbox), and leaves a closed inbox whose fallback is orphanEvent bound for
// owner while its tasks live (unless an open inbox, a host's, is bound):
// it is forgotten with the owner's last task.
func (m *Manager) unbindOwnerIdle(owner string, idle ownerSink, limit int) {
	orphan := m.newInbox(func(ev bgtype.Event) { m.orphanEvent(owner, ev, limit) })
	orphan.Close()
	m.inboxMu.Lock()
	if m.idleBox[owner] == idle {
		delete(m.idleBox, owner)
		if len(m.idleBox) == 0 {
			m.idleBox = nil
		}
	}
	cur := m.inboxes[owner]
	bind := cur == nil || cur.Closed()
	if bind {
		m.inboxes[owner] = orphan
	}
	m.inboxGen.Add(1)
	m.inboxMu.Unlock()
	if bind {
		m.watchInbox(owner, orphan) // forgets it at once if the owner has no live task
	}
}

// descendant reports whether meta, a record of another owner than owner,
// belongs to a gone descendant of owner: its owner is a task that ended,
// owned by owner or (the same way) by such a task. A store's notice of it
// is then owner's to hand out and mark.
func (m *Manager) descendant(ctx context.Context, owner string, meta bgtype.TaskMeta) bool {
	cur := meta.Owner
	for range maxForwardHops {
		a, err := m.store.Get(ctx, cur)
		if err != nil || !a.Status.IsTerminal() {
			return false
		}
		if a.Owner == owner {
			return true
		}
		cur = a.Owner
	}
	return false
}

// maxForwardHops bounds the walk up a notice's lineage: far deeper than
// agents nest.
const maxForwardHops = 64
