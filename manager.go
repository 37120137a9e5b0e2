package bgtask

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Manager runs background tasks for agents and keeps their metadata in a
// Store.
//
// Create it with New; the zero value is not usable. A Manager must not be
// copied. All methods are safe for concurrent use. Every goroutine it starts
// is a task's, and Shutdown waits for all of them; a Manager is not reused
// after Shutdown.
//
// Calls that change something (spawn, cancel, send, bind an inbox) return
// ErrClosed once Shutdown has begun. Reads (Get, List, Wait, Inbox) keep
// working, so a host can collect the final records and events.
type Manager struct {
	cfg       config
	store     Store
	mem       *MemoryStore // store, when it is exactly a MemoryStore: records are shared (record.go)
	log       *slog.Logger
	closed    atomic.Bool
	wg        sync.WaitGroup // every task goroutine
	restoreMu sync.Mutex     // serialises Restore
	counters  counters

	mu       sync.Mutex       // guards the fields below and the m.mu fields of Task
	nodes    map[string]*Task // live tasks, and ended ones with live attached children
	owners   map[string]*ownerState
	runs     map[string]*runState
	deadRuns fifo[string] // cancelled runs without live tasks, oldest first
	queue    []*Task      // queued tasks waiting for a slot, first in first out
	running  int          // tasks holding a slot
	active   int          // registered tasks whose goroutine has not exited
	live     int          // registered tasks not yet unregistered
	idle     chan struct{}
	idleShut bool // idle was closed

	stopped  chan struct{} // closed once Shutdown saw every task end: inbox waiters return ErrClosed
	stopOnce sync.Once

	inboxMu  sync.RWMutex // guards inboxes
	inboxes  map[string]*Inbox
	inboxGen atomic.Uint64 // bumped on every change of inboxes, to invalidate Task caches

	msgs messageLog // recent messages per task, for Owner.Messages (messages.go)
}

type ownerState struct {
	live      int   // tasks not yet retired: their terminal event may still be on its way
	reporting int   // those of them whose terminal event reaches the inbox (not silent)
	ending    *Task // reporting tasks unregistered, not yet retired, linked by their owner links
	endingN   int
	running   int
	head      *Task // intrusive list of live tasks
	names     map[string]*Task
}

type runState struct {
	cancelled bool
	live      int
	head      *Task // intrusive list of live tasks of the run
}

// Transition reports a committed status change to the WithObserver
// function. From is empty for the first record of a task.
type Transition struct {
	From TaskStatus
	To   TaskStatus
	Task TaskMeta
}

// New returns a Manager configured by opts, or the first option's error.
func New(opts ...Option) (*Manager, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.store == nil {
		cfg.store = NewMemoryStore()
	}
	if cfg.instance == "" {
		cfg.instance = "inst_" + newTaskID(time.Now())[len(IDPrefix):]
	}
	mem, _ := cfg.store.(*MemoryStore)
	return &Manager{
		cfg:     cfg,
		store:   cfg.store,
		mem:     mem,
		log:     cfg.logger,
		nodes:   make(map[string]*Task),
		owners:  make(map[string]*ownerState),
		runs:    make(map[string]*runState),
		idle:    make(chan struct{}),
		stopped: make(chan struct{}),
		inboxes: make(map[string]*Inbox),
	}, nil
}

// Store returns the Store the Manager commits to.
func (m *Manager) Store() Store { return m.store }

// Instance returns this runtime instance's id, recorded on every task.
func (m *Manager) Instance() string { return m.cfg.instance }

// Get returns a task's record, whoever owns it; ErrNotFound if the Store
// has none. Use an Owner view to read only one owner's tasks.
func (m *Manager) Get(ctx context.Context, id string) (TaskMeta, error) {
	return m.store.Get(ctx, id)
}

// Inbox returns the owner's inbox, making an open one the first time. Task
// events for the owner are delivered to whatever inbox is bound at the time
// they are sent. It returns ErrInvalidOwner for an empty owner.
func (m *Manager) Inbox(owner string) (*Inbox, error) {
	if !validOwner(owner) {
		return nil, ErrInvalidOwner
	}
	return m.inboxFor(owner), nil
}

// BindInbox makes ib the owner's inbox (an agent run binds a fresh one with
// its OnClosed fallback at start) and returns the one it replaces, or nil.
// Events already queued in the previous inbox stay there.
func (m *Manager) BindInbox(owner string, ib *Inbox) (*Inbox, error) {
	switch {
	case m.closed.Load():
		return nil, ErrClosed
	case !validOwner(owner):
		return nil, ErrInvalidOwner
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
	m.inboxMu.RUnlock()
	if ib != nil {
		return ib
	}
	m.inboxMu.Lock()
	if ib = m.inboxes[owner]; ib == nil {
		ib = m.newInbox()
		m.inboxes[owner] = ib
	}
	m.inboxMu.Unlock()
	m.watchInbox(owner, ib)
	return ib
}

func (m *Manager) newInbox(extra ...InboxOption) *Inbox {
	opts := append([]InboxOption{InboxLogger(m.log)}, m.cfg.inboxOpts...)
	ib := NewInbox(append(opts, extra...)...)
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
	m.unbindInbox(owner, (*Inbox).Closed)
}

// unbindInbox removes the owner's inbox if drop says so.
func (m *Manager) unbindInbox(owner string, drop func(*Inbox) bool) {
	m.inboxMu.Lock()
	if ib := m.inboxes[owner]; ib != nil && drop(ib) {
		delete(m.inboxes, owner)
		m.inboxGen.Add(1)
	}
	m.inboxMu.Unlock()
}

// deliver sends ev to the owner's current inbox.
func (m *Manager) deliver(owner string, ev Event) error {
	return m.inboxFor(owner).Send(ev)
}

// notify reports a committed transition to the log and the observer. It is
// on every task's path, so the work lives in notifySlow and this frame stays
// small.
func (m *Manager) notify(from TaskStatus, meta *TaskMeta) {
	if m.cfg.observer != nil || m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.notifySlow(from, meta)
	}
}

//go:noinline
func (m *Manager) notifySlow(from TaskStatus, meta *TaskMeta) {
	m.log.Debug("bgtask: task status", "task_id", meta.ID, "owner", meta.Owner, "from", from, "to", meta.Status)
	if m.cfg.observer == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("bgtask: observer panicked", "panic", r, "task_id", meta.ID)
		}
	}()
	m.cfg.observer(Transition{From: from, To: meta.Status, Task: cloneMeta(*meta)})
}

//go:noinline
func (m *Manager) logCommitFailure(meta *TaskMeta, attempt int, err error) {
	m.log.Warn("bgtask: commit failed", "task_id", meta.ID, "status", meta.Status, "attempt", attempt+1, "err", err)
}

func validOwner(owner string) bool {
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}
