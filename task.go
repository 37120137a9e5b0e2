package bgtask

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// Func is the work of a task. ctx is cancelled when the task is cancelled,
// with a cause that says why (ErrCanceled, ErrCanceled (parent),
// ErrCanceled (run), ErrShutdown; read it with context.Cause). The returned
// values decide the terminal status:
//
//   - (v, nil): completed, with v encoded as JSON as the result (cut to
//     Caps.MaxResultBytes);
//   - (_, err) after ctx was cancelled, with err matching context.Canceled
//     or the cause: cancelled;
//   - (_, err) otherwise: failed, with err's text (cut to Caps.MaxErrorBytes).
//
// A cancel asks, it does not force: a function that returns a value after
// being cancelled completes. A panic is recovered: the task fails with the
// panic value and the stack.
//
// The goroutine that runs the function may run other tasks of the Manager
// after it returns: a function that locks its OS thread
// (runtime.LockOSThread) unlocks it before it returns.
type Func func(ctx context.Context, t *Task) (any, error)

// The concurrency map of a task. Each field of Task (and of taskRare,
// made on first use) is guarded as below; "set at spawn" fields are
// written before the task is registered and never again, so they are read
// without a lock.
//
//	field                        guarded by           written by
//	m, fn, cctx, vals, stop      set at spawn         spawn
//	rare.inbox (a sub-agent's)   set at spawn         spawn (with the taskRare)
//	rec, ent (pointers), queued  set at spawn         spawn (newTaskRecord)
//	rec's identity fields        set at spawn         spawn, register (the parent's run); never
//	(id, owner, wake, typ,                            changed after (memRec.setMutable skips them,
//	detached, noTags, ident)                          the terminal copy shares ident)
//	rec's other fields           the lock of its      the task's commits (promote, finish, the input
//	                             memstore shard       path, the progress writer), one at a time:
//	                             when shared, else
//	                             the commit order     finish waits for the input path's (busy) and
//	                                                  the progress writer's in-flight commit
//	rare (the pointer)           atomic               the first user (rareState)
//	end                          atomic               run and finish (the task's goroutine), Stop's cut
//	fg                           atomic, written      spawn (a call held in the foreground),
//	                             with m.mu held       endForeground, toBackground (promote.go)
//	ended                        emitMu               finish
//	rare.inboxGen, rare.ownerBox emitMu               Emit (the cached owner inbox)
//	rare.inputs, rare.inputSig   emitMu               openInput, closeInput, answer, waitSettled
//	rare.latestEvent             emitMu               Emit
//	rare.busy                    emitMu               openInput, closeInput (beginCommit/endCommit)
//	rare.prog                    emitMu               ReportProgress and its writer (progress.go)
//	rare.done                    m.mu                 waitable (made), retire (closed)
//	rare.output                  atomic, set with     the first write or WaitOutput (output.go)
//	                             emitMu held
//	rare.outputFunc, promote,    emitMu               spawn, stopStream, Foreground, ToBackground
//	promoteAsked
//	phase (phase.go), signaled   m.mu                 register (a task admitted there is running
//	                                                  at once), admit, release, signal, spawn (a
//	                                                  waiting task), unregister, retire; run reads
//	                                                  phase unlocked
//	depth                        m.mu                 register
//	parent, children             m.mu                 register, pruneNode
//	ownerPrev/Next, runPrev/Next m.mu                 register, unregister, retire (intrusive lists)
//
// Lock order. These are every mutex of the runtime, of the agent package
// (over the Receiver) and of the in-memory store and the worker pool. Where
// a goroutine holds two of them it takes them in this order, and never the
// other way round; a change that nests locks must keep it so:
//
//	Manager.restoreMu      serializes Restore
//	→ agent's Plugin.mu    guards the prompt view
//	→ Receiver.mu          guards the open run and its inboxes
//	→ Task.emitMu          guards the emitMu fields above
//	→ Manager.mu           guards the m.mu fields above, the indexes, queue, counts
//	→ Manager.inboxMu      guards the owners' inboxes, bound and idle
//	→ Inbox.mu             guards an inbox's queue and waiters
//	→ Manager.keepMu       guards the Receivers' sinks and kept events
//	→ Receiver.lateMu      guards the events that reached a closed inbox
//	→ Manager.sent's mu    guards the delivered, unmarked terminal events
//	→ Manager.msgs's mu    guards the message history
//	→ memstore shard locks guard one shard's records each (all: in index order)
//	→ memstore.term's mu   guards the index of terminal records
//
//	Manager.answers' mu    guards the foreground ends held for their calls
//	                       (answer.go); a leaf, taken under Manager.mu
//
//	Manager.calls' mu      guards the queued host callbacks (callbacks.go);
//	                       a leaf, taken under any of the above, so every
//	                       callback is queued there and called with none held
//
//	outputBuf.streamMu     serializes a streamed task's writes with its
//	                       WithOutputFunc (held while that host code runs)
//	→ Task.emitMu, then Manager.outputs' mu → outputBuf.mu
//	                       the outputs by task id; one output's ring
//
//	workpool.Pool.mu       guards the parked workers; alone
//
// What each is held across (read in the code, and seen by running the
// tests with every lock instrumented):
//
//   - Manager.restoreMu: a Restore's interrupts and reports: Manager.mu,
//     the inbox locks, the sent list and the store's locks; no lock is
//     held when it is taken.
//   - Plugin.mu: BeforeInference, which delivers (Receiver.Deliver: the
//     Receiver's locks and all they take) and reads the task list and
//     progress (Task.emitMu, Manager.mu, the store's locks).
//   - Receiver.mu: a boundary: RunStart binds the run's inbox
//     (Manager.inboxMu, Inbox.mu), Deliver takes lateMu and marks events
//     announced (the sent list, the store's locks), Pending reads
//     Manager.mu. It is released before Close lets go of the owner
//     (Manager.keepMu) and never held while OnWake is called.
//   - Task.emitMu: Emit looks up the owner's inbox (Manager.inboxMu) and
//     sends to it (Inbox.mu); a closed inbox's fallback then takes
//     Receiver.lateMu, or Manager.keepMu and the sent list; a message is
//     recorded (Manager.msgs); waitSettled reads the record (a shard's read
//     lock).
//   - Manager.mu: Manager.inboxMu and Inbox.mu, to queue events in open
//     inboxes; a shard's read lock, to read a record.
//   - Manager.inboxMu: Inbox.mu.
//   - Inbox.mu: alone. It is released before an OnClosed fallback or an
//     onClose hook runs, so those may take any lock above it.
//   - Manager.keepMu: Receiver.lateMu (a new Receiver adopts the kept
//     events; Close marks it gone) and the sent list (a durable store's
//     terminal event nobody holds).
//   - Receiver.lateMu, the sent list's and the message history's locks:
//     alone, nothing is locked under them.
//   - the shard locks: other shards' (only in shard index order) and the
//     terminal index's; the terminal index's lock: alone.
//   - workpool.Pool.mu: alone; of the finished goroutines that find it
//     taken (TryLock), one waits, the others exit.
//
// No lock guards the list of ends (Manager.ends, atomic): one goroutine at
// a time (Manager.endsBusy) takes it and records its ends, committing a
// in-memory store's terminal records under the store's locks, then, per 64
// ends, taking Manager.mu (and under it Manager.inboxMu and Inbox.mu, to
// queue the events in open inboxes); an end whose inbox is closed is told
// after Manager.mu is released, its fallback may take any lock after
// Inbox.mu.
//
// Inside the in-memory store: a task's commit takes its record's shard lock
// and, if the record turns terminal, the terminal index's lock inside it; a
// Commit, or a record with an idempotency key, takes every shard lock; the
// records retention forgot leave their shards after the commit's shard
// locks are released, one shard lock at a time. A record that turns
// terminal leaves the shared entry for a compact copy under its shard
// lock: the Task keeps reading its identity fields. No lock of the runtime
// is held across a Store's Commit but the in-memory store's own, and the
// boundary and restore locks above: a slow Store delays only the task that
// commits, or the caller of that boundary.

// Task is the handle a task function receives. Its methods are safe for
// concurrent use, including after the function has returned.
type Task struct {
	m    *Manager
	rec  *memstore.Rec   // the record: shared with an in-memory store, or private (see record.go)
	ent  *memstore.Entry // the in-memory store's entry holding rec; nil with any other Store
	fn   Func
	cctx context.Context // the task's cancellable context; its function gets the Task as one (taskContext)
	vals valuesOnly      // the parent of ctx: the spawner's values only
	stop context.CancelCauseFunc
	rare atomic.Pointer[taskRare] // what few tasks need, made on first use (see rare)

	emitMu sync.Mutex // serializes Emit with the end of the task; guards the emitMu fields of the map above

	// Small fields together, so the struct stays in a smaller size class.
	end    atomic.Uint32 // who ends the task, and whether its function runs: endOpen, ... (shutdown.go)
	fg     atomic.Int32  // fgBackground, fgHeld or fgEnded (promote.go); written with m.mu held
	depth  int32         // lineage depth
	ended  bool          // the function has returned
	queued bool          // its first record was queued: run promotes it; set at spawn

	// Guarded by m.mu.
	phase    taskPhase // where it is in registration, slot, start and end (phase.go)
	signaled bool      // cancel was requested

	parent               *Task              // attached parent node, for cascades
	children             map[*Task]struct{} // attached live children
	ownerPrev, ownerNext *Task
	runPrev, runNext     *Task
}

// taskRare holds the state that only a waited-for task, or one that asks
// for input, needs. Keeping it out of Task keeps every parked task in a
// smaller size class; each field keeps its own lock.
type taskRare struct {
	done         chan struct{}             // made by the first Wait, closed after the terminal event was sent; guarded by m.mu
	inputs       []*inputWait              // the open input requests, oldest first; guarded by emitMu
	inputSig     chan struct{}             // made by a waiter (waitSettled), closed when an input request opens; guarded by emitMu
	latestEvent  LatestEvent               // the latest custom event (Owner.LatestEvent); guarded by emitMu
	prog         *progressState            // the progress writer (ReportProgress); guarded by emitMu
	busy         chan struct{}             // an input-path commit is in flight (beginCommit); closed when it is done; guarded by emitMu
	opening      *inputWait                // the request openInput is committing: an answer to it waits for busy; guarded by emitMu
	inboxGen     uint64                    // m.inboxGen when ownerBox was looked up; guarded by emitMu
	ownerBox     *Inbox                    // the owner's inbox, cached for Emit; guarded by emitMu
	inbox        *Inbox                    // a sub-agent's own inbox; set at spawn (with the taskRare), before the task is registered
	output       atomic.Pointer[outputBuf] // the output (Task.Output); set once, with emitMu held
	outputFunc   func(int64, []byte)       // WithOutputFunc, while held in the foreground; set at spawn, cleared with emitMu held
	promote      context.CancelCauseFunc   // ends the wait of the Foreground call that holds it (Owner.ToBackground); guarded by emitMu
	promoteAsked bool                      // ToBackground came before that wait began; guarded by emitMu
	kind         bool                      // a resumable task's (Kind): a stop requeues it; set at spawn, before the task is registered
	callGone     bool                      // the Foreground call that held it returned (answer.go); guarded by m.mu
	answerHeld   bool                      // it ended in the foreground, its end held for that call's run (answer.go); set under m.mu by the task's goroutine, which alone reads it after
}

// isKind reports whether t is a resumable task (spawned from a Kind).
func (t *Task) isKind() bool {
	r := t.rare.Load()
	return r != nil && r.kind
}

// agentInbox returns a sub-agent's own inbox; nil for a plain task.
func (t *Task) agentInbox() *Inbox {
	if r := t.rare.Load(); r != nil {
		return r.inbox
	}
	return nil
}

// rareState returns t's taskRare, making it on first use.
func (t *Task) rareState() *taskRare {
	if r := t.rare.Load(); r != nil {
		return r
	}
	t.rare.CompareAndSwap(nil, new(taskRare))
	return t.rare.Load()
}

// openInputWait returns the task's open input request of that id, or nil.
// Called with emitMu held.
func (t *Task) openInputWait(id string) *inputWait {
	if r := t.rare.Load(); r != nil {
		for _, w := range r.inputs {
			if w.req.ID == id {
				return w
			}
		}
	}
	return nil
}

// awaitsInput reports whether the task has an open input request. Called
// with emitMu held.
func (t *Task) awaitsInput() bool {
	r := t.rare.Load()
	return r != nil && len(r.inputs) > 0
}

// ID returns the task id ("task_" and 32 hex digits).
func (t *Task) ID() string { return t.rec.ID }

// Owner returns the id of the agent that owns the task.
func (t *Task) Owner() string { return t.rec.Owner }

// Name returns the task's short name, or "".
func (t *Task) Name() string { return t.rec.Name() }

// Parent returns the task's lineage.
func (t *Task) Parent() bgtype.Parent { return t.rec.Parent() }

// Inbox returns a sub-agent's own inbox, where messages sent to it
// (Owner.Send) and events of the tasks it owns arrive. It is nil for a plain
// task. The Manager closes it when the task ends.
func (t *Task) Inbox() *Inbox { return t.agentInbox() }

// Agent returns the Owner view of the tasks a sub-agent starts as an
// agent: their owner is the sub-agent's id, so their events reach its
// Inbox. A plain task has no inbox to read those events, so for it Agent
// returns an error matching ErrNotSubAgent and a zero Owner; a plain task
// starts subtasks for its own owner instead (Manager.Owner(t.Owner())),
// linked to it as their parent.
func (t *Task) Agent() (Owner, error) {
	if t.agentInbox() == nil {
		return Owner{}, fmt.Errorf("%w: %s cannot own tasks", ErrNotSubAgent, t.rec.ID)
	}
	return t.m.Owner(t.rec.ID), nil
}

// Emit reports a custom event to the task's owner. No event is dropped
// silently: every one but a message is kept as the task's latest event
// (Owner.LatestEvent), and the wake policy decides whether it also goes to the
// owner's inbox and whether it wakes the owner there:
//
//   - WakeOnTerminal (the default): to the inbox, quiet (Event.Quiet), so
//     it waits for the owner's next drain without waking it, and replaces
//     an undrained event of the same type from this task;
//   - WakeOnActivity: to the inbox, waking the owner;
//   - WakeSilent: kept as progress only.
//
// An EventTypeMessage (best a Message) always goes to the inbox and wakes
// the owner, and is kept in the task's message history (Owner.Messages).
//
// The payload is encoded as JSON now, so the caller may change it
// afterwards; one larger than Caps.MaxPayloadBytes is replaced by an object
// that says so (a Message's fields are cut to Caps.MaxMessageBytes instead).
// A payload that cannot be encoded returns an error matching
// ErrInvalidArgument and sends nothing. An empty eventType returns
// ErrInvalidArgument. Once the function has returned, Emit returns
// ErrTerminal, so every custom event precedes the terminal one. If the
// owner's inbox is closed the event goes to its OnClosed fallback (a Receiver
// keeps it for the owner's next run) and Emit returns nil; an inbox without
// a fallback refuses it and Emit returns ErrInboxClosed (a progress event
// is still kept as progress then).
func (t *Task) Emit(eventType string, payload any) error {
	_, err := t.emit(eventType, payload)
	return err
}

// emit is Emit that also returns the id of a delivered message in the
// task's history ("" for other events).
func (t *Task) emit(eventType string, payload any) (string, error) {
	if eventType == "" {
		return "", errEmptyEvent
	}
	limit := t.m.cfg.caps.MaxPayloadBytes
	if eventType == bgtype.EventTypeMessage {
		limit = t.m.cfg.caps.MaxMessageBytes
		switch msg := payload.(type) {
		case bgtype.Message:
			payload, limit = t.m.capMessage(msg), -1 // its fields are capped
		case *bgtype.Message:
			if msg != nil {
				payload, limit = t.m.capMessage(*msg), -1
			}
		}
	}
	p, err := jsoncap.Encode(payload)
	if err != nil {
		return "", fmt.Errorf("%w: event %q: payload is not JSON-encodable: %w", ErrInvalidArgument, eventType, err)
	}
	if limit >= 0 {
		p, _ = jsoncap.JSON(p, limit)
	}
	t.emitMu.Lock()
	id, quiet, kept, err := t.emitLocked(eventType, p)
	t.emitMu.Unlock()
	if kept && t.m.cfg.eventObserver != nil { // no lock held: the observer may call the task
		t.m.observeEvent(bgtype.Event{Kind: bgtype.EventCustom, TaskID: t.rec.ID, Name: t.rec.Name(), EventType: eventType, Payload: p, Quiet: quiet})
	}
	return id, err
}

// emitLocked keeps and sends the encoded event p, as emit says, and
// reports whether it was quiet and whether it was kept (false once the
// function has returned). Called with emitMu held.
func (t *Task) emitLocked(eventType string, p []byte) (id string, quiet, kept bool, err error) {
	if t.ended {
		return "", false, false, errTaskEnded
	}
	r := t.rareState() // a task that emits has one: its latest event, its cached inbox
	if eventType != bgtype.EventTypeMessage {
		r.latestEvent = LatestEvent{EventType: eventType, Payload: p, At: clock.Now(), Count: r.latestEvent.Count + 1}
	}
	send, quiet := route(t.wake(), bgtype.EventCustom, eventType)
	if !send {
		return "", quiet, true, nil // kept as progress
	}
	if gen := t.m.inboxGen.Load(); r.ownerBox == nil || gen != r.inboxGen {
		r.ownerBox, r.inboxGen = t.m.inboxFor(t.rec.Owner), gen
	}
	err = r.ownerBox.Send(bgtype.Event{Kind: bgtype.EventCustom, TaskID: t.rec.ID, Name: t.rec.Name(), EventType: eventType, Payload: p, Quiet: quiet})
	if err != nil && r.ownerBox.onClosed == nil {
		return "", quiet, true, err // dropped; with a fallback it was taken (a Receiver keeps it for the next run): not lost
	}
	if eventType == bgtype.EventTypeMessage {
		return t.m.msgs.emitted(t, p), quiet, true, nil
	}
	return "", quiet, true, nil
}
