package bgtask

import (
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// Inbox returns the owner's inbox, making an open one the first time. Task
// events for the owner are delivered to whatever inbox is bound at the time
// they are sent. While the owner has a Receiver and no inbox is bound (no run
// is open), it is a closed inbox that hands each event to the Receiver. It returns
// ErrInvalidArgument (blank owner) for an empty or blank owner.
//
// Inbox reads nothing from the Store. A loop that drains the inbox without a
// Receiver calls Restore for the owner when it starts: with a durable Store
// that delivers, once, the ends the owner has not taken yet (those of tasks
// a dead process ran included); and it marks what it takes with
// Owner.MarkAnnounced.
func (m *Manager) Inbox(owner string) (*Inbox, error) {
	if !bgtype.ValidOwner(owner) {
		return nil, bgtype.ErrInvalidOwner
	}
	return m.inboxFor(owner), nil
}

// BindInbox makes ib the owner's inbox (an agent run binds a fresh one with
// its OnClosed fallback at start) and returns the one it replaces, or nil.
// Events already queued in the previous inbox stay there. Errors, in this
// order: ErrInvalidArgument (blank owner), ErrClosed, a nil inbox.
func (m *Manager) BindInbox(owner string, ib *Inbox) (*Inbox, error) {
	switch {
	case !bgtype.ValidOwner(owner):
		return nil, bgtype.ErrInvalidOwner
	case m.closed.Load():
		return nil, ErrClosed
	case ib == nil:
		return nil, fmt.Errorf("bgtask: BindInbox: nil inbox")
	}
	return m.bindInbox(owner, ib), nil
}

func (m *Manager) bindInbox(owner string, ib *Inbox) (prev *Inbox) {
	m.inboxMu.Lock()
	prev = m.inboxes[owner]
	m.inboxes[owner] = ib
	m.inboxGen.Add(1)
	m.inboxMu.Unlock()
	m.watchInbox(owner, ib)
	return prev
}

// inboxFor returns the owner's inbox, creating it when there is none.
func (m *Manager) inboxFor(owner string) *Inbox {
	m.inboxMu.RLock()
	ib := m.inboxes[owner]
	if ib == nil {
		if p := m.idleBox[owner]; p != nil {
			ib = p.idleInbox() // between runs: straight to the plugin, which wakes the owner
		}
	}
	m.inboxMu.RUnlock()
	if ib != nil {
		return ib
	}
	m.inboxMu.Lock()
	if ib = m.inboxes[owner]; ib == nil && m.idleBox[owner] != nil {
		ib = m.idleBox[owner].idleInbox()
		m.inboxMu.Unlock()
		return ib
	}
	if ib == nil {
		ib = m.newInbox(nil)
		m.inboxes[owner] = ib
	}
	m.inboxMu.Unlock()
	m.watchInbox(owner, ib)
	return ib
}

// setIdleReceiver makes the idleInbox of p (the owner's Receiver), a closed
// inbox whose OnClosed fallback is p's, receive the owner's events
// while no inbox is bound for it.
func (m *Manager) setIdleReceiver(owner string, p ownerSink) {
	m.inboxMu.Lock()
	if m.idleBox == nil {
		m.idleBox = make(map[string]ownerSink)
	}
	m.idleBox[owner] = p
	m.inboxGen.Add(1)
	m.inboxMu.Unlock()
}

// newInbox makes an inbox as WithInboxConfig says, with onClosed as its
// fallback when not nil.
func (m *Manager) newInbox(onClosed func(bgtype.Event)) *Inbox {
	cfg := m.cfg.inbox
	if cfg.Logger == nil {
		cfg.Logger = m.log
	}
	if onClosed != nil {
		cfg.OnClosed = onClosed
	}
	ib := NewInbox(cfg)
	ib.stopped = m.stopped
	return ib
}

// watchInbox makes a closed owner inbox forgotten once the owner has no live
// task left to deliver to it, so the map does not grow with history.
func (m *Manager) watchInbox(owner string, ib *Inbox) {
	ib.mu.Lock()
	ib.onClose = func(ib *Inbox) { m.forgetInbox(owner, ib) }
	ib.stopped = m.stopped
	closed := ib.closed
	ib.mu.Unlock()
	if closed {
		m.forgetInbox(owner, ib)
	}
}

func (m *Manager) forgetInbox(owner string, ib *Inbox) {
	m.mu.Lock() // held throughout, so no spawn for owner slips in between
	defer m.mu.Unlock()
	if m.owners[owner] == nil { // otherwise retire forgets it when the last task ends
		m.unbindInbox(owner, func(cur *Inbox) bool { return cur == ib })
	}
}

// forgetClosedInbox drops the owner's inbox if it is closed; called with
// m.mu held when the owner's last task retires.
func (m *Manager) forgetClosedInbox(owner string) {
	m.inboxMu.RLock()
	ib := m.inboxes[owner]
	m.inboxMu.RUnlock()
	if ib != nil && ib.Closed() { // rare: most owners' inboxes stay open
		m.unbindInbox(owner, (*Inbox).Closed)
	}
}

// unbindInbox removes the owner's inbox if drop says so.
func (m *Manager) unbindInbox(owner string, drop func(*Inbox) bool) {
	m.inboxMu.Lock()
	if ib := m.inboxes[owner]; ib != nil && drop(ib) {
		delete(m.inboxes, owner)
		m.inboxes = shrunk(m.inboxes, &m.deletes.inboxes)
		m.inboxGen.Add(1)
	}
	m.inboxMu.Unlock()
}

// deliver sends ev to the owner's current inbox.
func (m *Manager) deliver(owner string, ev bgtype.Event) error {
	return m.inboxFor(owner).Send(ev)
}
