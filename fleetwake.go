package bgtask

import (
	"context"
	"strings"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Waking across a fleet. A task's end wakes its owner's idle Receiver in
// the process that ran it (its OnWake). With a store that tells of settled
// records in every process (store.ChangeNotifier: pgstore's LISTEN/NOTIFY),
// the owner's idle Receiver in another instance is woken too: a thread
// whose turns land on any instance learns of an end wherever its task ran,
// without polling the database per thread. The event OnWake is given is
// made from the record; the run the host starts delivers it from the store
// (RunStart's Restore), and the store decides which run hands it out.

// fleetWakeQueue bounds the wakes waiting for their record to be read; a
// wake is a hint (the owner's next run delivers the end anyway), so past
// it the oldest is dropped.
const fleetWakeQueue = 4096

// fleetWakes are the wakes of idle receivers that wait for the read of
// their task's record, and whether a goroutine works through them.
type fleetWakes struct {
	mu      sync.Mutex // guards the fields below; taken under no other lock of the Manager
	queue   []fleetWake
	working bool
}

// fleetWake is one settled record of owner that may wake its Receiver.
type fleetWake struct{ id, owner string }

// watchSettled makes r's owner wake from ends in other instances, when
// the store tells of them.
func (m *Manager) watchSettled(r *Receiver) {
	if r.onWake == nil || r.fixed != nil {
		return
	}
	if cn, ok := m.store.(store.ChangeNotifier); ok {
		m.listenSettled(cn)
	}
}

// wakeElsewhere is called on the store's goroutine for each record that
// settled, in any instance: if owner has an idle Receiver here that hears
// wakes, the record is read (off the store's goroutine) and the Receiver
// woken unless this instance ran the task (it woke it itself).
func (m *Manager) wakeElsewhere(id, owner string) {
	if owner == "" || id == "-"+m.cfg.instance {
		return // no owner named, or a notice this instance posted (it woke the owner itself)
	}
	if r := m.idleReceiver(owner); r == nil {
		return
	}
	w := &m.fleetWakes
	w.mu.Lock()
	if len(w.queue) == fleetWakeQueue {
		w.queue = w.queue[1:]
	}
	w.queue = append(w.queue, fleetWake{id, owner})
	start := !w.working
	w.working = true
	w.mu.Unlock()
	if start && !m.startHelper(m.fleetWakeLoop) {
		w.mu.Lock()
		w.queue, w.working = nil, false // shut down: nobody to wake
		w.mu.Unlock()
	}
}

// idleReceiver returns owner's live Receiver on this Manager if it hears
// wakes and no run of it is open, else nil.
func (m *Manager) idleReceiver(owner string) *Receiver {
	if r := m.liveReceiver(owner); r != nil && r.onWake != nil && !r.Running() {
		return r
	}
	return nil
}

// fleetWakeLoop reads the record of each queued wake and wakes its
// owner's idle Receiver, until the queue is empty.
func (m *Manager) fleetWakeLoop() {
	w := &m.fleetWakes
	for {
		w.mu.Lock()
		if len(w.queue) == 0 || m.closed.Load() {
			w.queue, w.working = nil, false
			w.mu.Unlock()
			return
		}
		fw := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		if strings.HasPrefix(fw.id, "-") { // a notice another instance posted for the owner
			if r := m.idleReceiver(fw.owner); r != nil {
				m.callWake(r, bgtype.Event{Kind: bgtype.EventCustom, EventType: noticeEventType})
			}
			continue
		}
		meta, err := m.store.Get(context.Background(), fw.id)
		if err != nil || meta.Owner != fw.owner || meta.Instance == m.cfg.instance ||
			meta.Wake == bgtype.WakeSilent || meta.Announced {
			continue // gone, another owner's, told here, silent, or heard already
		}
		var ev bgtype.Event
		switch {
		case meta.Status.IsTerminal():
			ev = terminalEvent(&meta)
		case meta.Status == bgtype.StatusAwaitingInput:
			ev = bgtype.Event{Kind: bgtype.EventInputRequested, TaskID: meta.ID, Name: meta.Name}
		default:
			continue
		}
		if r := m.idleReceiver(fw.owner); r != nil {
			m.callWake(r, ev)
		}
	}
}

// callWake queues the call of r's OnWake with ev.
func (m *Manager) callWake(r *Receiver, ev bgtype.Event) {
	wake := r.onWake
	m.calls.call("OnWake", r.owner.id, func() { wake(ev) })
}

// startHelper runs f on a goroutine of the Manager's own that Shutdown
// waits for, unless shutdown began (it returns false then).
func (m *Manager) startHelper(f func()) bool {
	m.mu.Lock()
	if m.closed.Load() {
		m.mu.Unlock()
		return false
	}
	m.helpers++
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer func() {
			m.mu.Lock()
			m.helpers--
			m.checkIdle()
			m.mu.Unlock()
			m.wg.Done()
		}()
		f()
	}()
	return true
}

// noticeEventType is the EventType of the event OnWake is given when
// another instance posted a notice for the owner (a message or an input
// request of a task that runs there): it names no task; the run the host
// starts takes the notice from the store.
const noticeEventType = "notice"

// postNotice hands ev, an event for owner that no run of owner in this
// process will deliver, to the store as a notice, when the store keeps
// such (store.NoticePoster): any instance's next run of owner takes it.
// Ends (their records tell them) and quiet progress (the record keeps the
// latest) stay in memory. It reports whether the store took ev; on a
// failure ev stays in this process's memory, as without such a store.
func (m *Manager) postNotice(owner string, ev bgtype.Event) bool {
	p, ok := m.store.(store.NoticePoster)
	if !ok || ev.Kind.IsTerminal() || ev.Quiet {
		return false
	}
	if err := p.PostNotices(context.Background(), owner, m.cfg.instance, []bgtype.Event{ev}); err != nil {
		m.log.Warn("bgtask: an event for an owner with no run here kept in memory: the store did not take it", "owner", owner, "task_id", ev.TaskID, "err", err)
		return false
	}
	return true
}
