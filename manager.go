package bgtask

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/fifo"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/workpool"
	"github.com/bgtask/bgtask/store"
)

// Manager runs background tasks for agents and keeps their metadata in a
// Store.
//
// Create it with New; the zero value is not usable. A Manager must not be
// copied. All methods are safe for concurrent use. Every goroutine it starts
// runs tasks (a finished task's goroutine waits a second or two for the
// next task before it exits, and exits at once once Shutdown has begun),
// lists, with WithOnPendingOwner, the owners to call at start, or calls
// the host's callbacks (one goroutine, while calls are queued); Shutdown
// (or Stop) waits for all of them. A Manager is not reused after Shutdown.
//
// Every host callback is called with no lock of bgtask held, a panic
// recovered and logged with the callback's name (callbacks.go): the
// observers (WithObserver, WithEventObserver) and a Receiver's
// OnRunCanceled on the goroutine of the fact, before it goes on; a
// Receiver's OnWake and WithOnPendingOwner, due where bgtask holds a lock
// or on its own goroutines, on that callback goroutine, one at a time, in
// the order they were due. A callback may call the Manager; it must not
// wait for Shutdown or Stop, which wait for it (as a net/http handler
// must not wait for its Server's Shutdown).
//
// Calls that change something (spawn, cancel, send, bind an inbox) return
// ErrClosed once Shutdown (or Stop) has begun. Reads (Get, List, Wait,
// Inbox) keep working, so a host can collect the final records and events.
//
// The Manager's own calls that take a task id (Get, Cancel, CancelTree,
// Wait) and CancelAll and Stats reach every owner's tasks: they are for the
// host. Code that acts for one owner, a model's tools above all, gets an
// Owner view (Manager.Owner), which reaches only that owner's tasks and
// runs. No owner id means "every owner": an empty or blank one is refused
// with ErrInvalidArgument (blank owner).
type Manager struct {
	cfg             config
	store           store.Store
	mem             *memstore.Store // store, when it is exactly a Store: records are shared (record.go)
	log             *slog.Logger
	closed          atomic.Bool
	wg              sync.WaitGroup      // every task goroutine
	workers         workpool.Pool[Task] // goroutines of finished tasks, parked for the next (workers.go)
	restoreMu       sync.Mutex          // serializes Restore; taken first, under no other lock; guards restoreObserved
	restoreObserved []Transition        // the transitions a Restore committed, observed once it releases restoreMu
	counters        counters
	ends            atomic.Pointer[endNode] // ends waiting to be recorded, newest first (retireEnds)
	endsBusy        atomic.Bool             // a goroutine is recording the ends
	endEvents       []bgtype.Event          // recordEnds' buffer (endChunk events); guarded by endsBusy: its holder alone uses it

	mu         sync.Mutex       // guards the fields below and the m.mu fields of Task
	nodes      map[string]*Task // live tasks, and ended ones with live attached children
	owners     map[string]*ownerState
	spareOwner *ownerState // an owner's state left by its last task, reused by the next new owner
	runs       map[runKey]*runState
	deadRuns   fifo.Queue[runKey] // cancelled runs without live tasks, oldest first
	queue      []*Task            // queued tasks waiting for a slot, first in first out
	running    int                // tasks holding a slot
	active     int                // registered tasks whose goroutine has not exited
	live       int                // registered tasks not yet unregistered
	idle       chan struct{}
	idleShut   bool               // idle was closed
	helpers    int                // goroutines of the Manager's own that Shutdown waits for, besides tasks (WithOnPendingOwner)
	cutRunning map[*Task]struct{} // tasks Stop ended whose function has not returned; still counted in active

	phaseHook func(t *Task, from, to taskPhase) // tests only: sees every phase move, under m.mu

	stopped  chan struct{} // closed once Shutdown saw every task end: inbox waiters return ErrClosed
	closing  chan struct{} // closed when Shutdown or Stop begins (markClosed)
	stopOnce sync.Once

	inboxMu  sync.RWMutex // guards inboxes and idleBox
	inboxes  map[string]*Inbox
	idleBox  map[string]ownerSink // the Receiver whose idleInbox takes its owner's events while no inbox is bound for it
	inboxGen atomic.Uint64        // bumped on every change of inboxes, to invalidate Task caches

	msgs    messageLog // recent messages per task, for Owner.Messages (history.go)
	outputs outputLog  // the tasks' outputs, for Owner.ReadOutput (output.go)

	settled settledWaits // waits for tasks other instances run (elsewhere.go)

	keys    map[keyRef]*keyClaim // live keyed spawns (WithIdempotencyKey); guarded by mu
	sent    announced            // terminal events delivered and not yet marked announced (announce.go)
	answers heldAnswers          // foreground ends committed unannounced for their calls' runs (answer.go)

	deletes deletes // deletes from the maps above since each was last made (keep.go: shrunk)

	keepMu     sync.Mutex            // guards sinks, kept and keptOrder; taken before a Receiver's lateMu (keep.go)
	sinks      map[string]ownerSink  // the one holder (a live Receiver) of each owner's events between runs; nil when none
	fleetWakes fleetWakes            // wakes of idle receivers by other instances' ends (fleetwake.go)
	kept       map[string]*ownerKeep // events of owners whose holder let go, for the next one; nil when none
	keptOrder  keptOrder             // kept's events across owners, oldest first (Tuning.KeptEventsTotal)

	kinds     map[string]Runner // WithKinds, by name; read-only after New
	drain     chan struct{}     // closed when Stop or Shutdown begins (Task.Draining)
	drainOnce sync.Once
	claims    kindClaims // resumable tasks this Manager is claiming (claim.go)
	slots     kindSlots  // the process limit of kinds with MaxRunning (kindlimit.go)

	calls hostCalls // makes every call of a host callback, in order, with no lock held (callbacks.go)
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

// Transition reports a committed status change to the WithObserver
// function. From is empty for the first record of a task.
type Transition struct {
	From bgtype.Status
	To   bgtype.Status
	Task bgtype.TaskMeta
}

// New returns a Manager configured by opts; with none it keeps its records
// in a new in-memory store and limits nothing. An invalid option makes it fail
// with an error matching ErrInvalidArgument that names the first invalid
// option or field, and no Manager.
func New(opts ...Option) (*Manager, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.store == nil {
		cfg.store = memoryStore(cfg.retention)
	} else if cfg.retention != nil {
		return nil, invalidArgument("WithRetention configures the in-memory store; the store given with WithStore has its own retention options")
	}
	if cfg.instance == "" {
		cfg.instance = idgen.New("inst_", time.Now())
	}
	mem, _ := cfg.store.(*memstore.Store)
	m := &Manager{
		cfg:     cfg,
		store:   cfg.store,
		mem:     mem,
		log:     cfg.logger,
		nodes:   make(map[string]*Task),
		owners:  make(map[string]*ownerState),
		runs:    make(map[runKey]*runState),
		idle:    make(chan struct{}),
		stopped: make(chan struct{}),
		closing: make(chan struct{}),
		inboxes: make(map[string]*Inbox),
		keys:    make(map[keyRef]*keyClaim),
		drain:   make(chan struct{}),
	}
	m.calls.log = cfg.logger
	if len(cfg.kinds) > 0 {
		m.kinds = make(map[string]Runner, len(cfg.kinds))
		for _, k := range cfg.kinds {
			m.kinds[k.KindName()] = k
		}
	}
	m.workers.SetMax(workpool.DefaultMax())
	if cfg.onPendingOwner != nil {
		m.startPendingOwners()
	}
	if q, ok := cfg.store.(store.KindQueue); ok && m.kinds != nil && m.mem == nil {
		m.startClaims(q)
	}
	return m, nil
}

// Store returns the Store the Manager commits to.
func (m *Manager) Store() store.Store { return m.store }

// Instance returns this runtime instance's id, recorded on every task.
func (m *Manager) Instance() string { return m.cfg.instance }

// Get returns a task's record, whoever owns it; ErrNotFound if the Store
// has none. It is an administrator's call: code acting for one owner (a
// model's tools, a plugin) uses an Owner view, which sees only that owner's
// tasks.
func (m *Manager) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	return m.store.Get(ctx, id)
}

// notify reports a committed transition to the log and the observer, on
// this goroutine: called with no lock of bgtask held. It is on every
// task's path, so the work lives in notifySlow (docs/internals.md).
func (m *Manager) notify(from bgtype.Status, meta *bgtype.TaskMeta) {
	if m.cfg.observer != nil || m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.notifySlow(from, meta, false)
	}
}

// notifyLater is notify for a Restore, which holds restoreMu: the
// transition is observed once the Restore released it (restoreTree).
func (m *Manager) notifyLater(from bgtype.Status, meta *bgtype.TaskMeta) {
	if m.cfg.observer != nil || m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.notifySlow(from, meta, true)
	}
}

// notifyRec is notify of a Task's record.
func (m *Manager) notifyRec(from bgtype.Status, r *memstore.Rec) {
	if m.cfg.observer != nil || m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.notifyRecSlow(from, r)
	}
}

//go:noinline
func (m *Manager) notifyRecSlow(from bgtype.Status, r *memstore.Rec) {
	meta := r.Expand()
	m.notifySlow(from, &meta, false)
}

//go:noinline
func (m *Manager) notifySlow(from bgtype.Status, meta *bgtype.TaskMeta, later bool) {
	m.log.Debug("bgtask: task status", "task_id", meta.ID, "owner", meta.Owner, "from", from, "to", meta.Status)
	if m.cfg.observer == nil {
		return
	}
	tr := Transition{From: from, To: meta.Status, Task: meta.Clone()}
	if later {
		m.restoreObserved = append(m.restoreObserved, tr)
		return
	}
	m.observe(tr)
}

// observe calls the WithObserver function with tr, on this goroutine.
func (m *Manager) observe(tr Transition) {
	obs := m.cfg.observer
	m.calls.callNow("WithObserver", tr.Task.ID, func() { obs(tr) })
}

// observeEvent calls the WithEventObserver function with ev, on this
// goroutine: called with no lock of bgtask held. Out of line: few
// Managers have one.
//
//go:noinline
func (m *Manager) observeEvent(ev bgtype.Event) {
	f := m.cfg.eventObserver
	m.calls.callNow("WithEventObserver", ev.TaskID, func() { f(ev) })
}

//go:noinline
func (m *Manager) logCommitFailure(meta *bgtype.TaskMeta, attempt int, err error) {
	m.log.Warn("bgtask: commit failed", "task_id", meta.ID, "status", meta.Status, "attempt", attempt+1, "err", err)
}

// deletes counts the deletes from the Manager's per-owner and per-task maps
// since each was last made: owners, nodes and runs guarded by Manager.mu,
// inboxes by Manager.inboxMu.
type deletes struct{ owners, nodes, runs, inboxes int }

// shrinkAfter is how many deletes an emptied map has seen before shrunk
// makes it anew: enough that a Manager whose only task comes and goes
// allocates a map once per this many tasks, not per task.
const shrinkAfter = 1024

// shrunk returns mp after a delete, or a new empty map in its place when mp
// is empty and has seen shrinkAfter deletes: a Go map keeps the memory of
// the most entries it ever held, so a server that once had ten thousand
// threads open would hold their slots for good.
func shrunk[K comparable, V any](mp map[K]V, deleted *int) map[K]V {
	*deleted++
	if len(mp) > 0 || *deleted < shrinkAfter {
		return mp
	}
	*deleted = 0
	return make(map[K]V)
}
