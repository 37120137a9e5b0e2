package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Receiver is an owner's one live receiver of events on a Manager, across
// the owner's runs: the part of an agent loop that is not about the model.
// A host that writes its own loop uses it directly; the agent package's
// Plugin holds one and adds what the model sees (rendering, the prompt
// view) and the tools. The loop calls it at its boundaries:
//
//	RunStart   bind a fresh inbox for the run, restore the owner's records
//	Deliver    claim the events waiting for the owner, each once
//	Pending    report whether a task of the owner will still report
//	WaitEvent  block until something can be delivered (a sub-agent's natural end)
//	RunEnd     close the run's inbox; cancel the run's tasks if it was cancelled
//
// Events that arrive between runs (a completion racing the end of a run, or
// of a task the host spawned while no run was open) are kept, handed to the
// OnWake callback once each, and delivered first by the next run, so none
// is lost or delivered twice. Quiet progress kept between runs is coalesced
// as in an inbox: one event per task and type, with the latest payload.
//
// A Receiver outlives runs: make one per owner and reuse it; a Manager has
// at most one live Receiver per owner (NewReceiver refuses a second with
// ErrReceiverExists). A host that forgets an owner (a server that drops a
// conversation) calls Close; the owner's next Receiver, made later, gets
// every event the closed one did not deliver. A run is a value: RunStart
// refuses to open a second one while one is open (ErrRunOpen), and RunEnd
// ends only the run it names.
//
// Every method is safe for concurrent use. A loop calls the boundaries in
// order, one at a time. WaitEvent does not hold the Receiver while it
// waits, so RunEnd from another goroutine ends it with ErrNoRun. The
// OnWake callback runs on the Manager's callback goroutine and
// OnRunCanceled on the cancel's, both with no lock held. The zero value is not usable: call
// Manager.NewReceiver.
type Receiver struct {
	// An idle owner's Receiver is most of what the Manager holds for it,
	// so the struct stays small: the Manager is owner.m, a SharedStore is
	// looked up when needed (sharedStore), and the closed inbox of idle is
	// made on first use (idleInbox).
	owner         Owner  // owner.m is the Manager
	fixed         *Inbox // a sub-agent's own inbox (ReceiverConfig.Inbox); never bound or closed here
	onWake        func(bgtype.Event)
	onRunCanceled func(runID, reason string) // ReceiverConfig.OnRunCanceled
	keepMax       int                        // ReceiverConfig.KeepLimit
	idle          atomic.Pointer[Inbox]      // the closed inbox that takes the owner's events while no run is open; nil until first needed

	running atomic.Bool   // written with mu held
	runSeq  atomic.Uint64 // how many runs opened: names the open run without mu (answer.go)

	mu      sync.Mutex          // guards the fields below; held by a boundary, never while calling OnWake
	runID   string              // the open run's id (RunInfo.RunID)
	inbox   *Inbox              // the inbox of the current run
	older   []*Inbox            // inboxes replaced at RunStart that may still receive a send in flight
	drained map[string]struct{} // tasks whose terminal event Deliver handed out, until they retire; nil when none
	heard   *hearing            // what was handed out and not marked heard (heard.go); nil when nothing
	closed  bool                // Close was called

	lateMu sync.Mutex // guards late and gone; nothing is locked under it
	late   eventKeep  // events that reached a closed inbox of this owner
	gone   bool       // Close let go of the owner: late events go to the Manager
}

// ReceiverConfig configures a Receiver. The zero value is the default:
// one inbox per run, no wake callback, 1,024 kept events.
type ReceiverConfig struct {
	// Inbox, when set, is a sub-agent's own inbox (Task.Inbox) that the
	// Receiver reads instead of binding one per run. The Manager closes it
	// when the sub-agent ends. Defaults to nil: a fresh inbox per run.
	Inbox *Inbox
	// OnWake hears of each event arriving while no run of the owner is
	// open, so the host can start one. Quiet events (Event.Quiet) are kept
	// for the next run without waking it. The event itself is delivered by
	// the next run's first Deliver. It is called on the Manager's callback
	// goroutine (see WithObserver), in order, with no lock of bgtask held:
	// it may call the Receiver, a Plugin over it, or the Manager, even
	// start the run itself; a call that blocks delays every later callback.
	// It may come after a run opened meanwhile, which delivers the event:
	// a RunStart then returns ErrRunOpen.
	// A panic in it is recovered and logged with its name. With a store
	// that tells every instance of settled records (store.ChangeNotifier:
	// pgstore), an end (or an input request) of a task of the owner that
	// another instance ran wakes this Receiver too, with the event made
	// from the record; the run the host starts delivers it from the store.
	// Defaults to nil: nothing is called.
	OnWake func(bgtype.Event)
	// KeepLimit bounds the events kept for the owner while no run is open:
	// by the Receiver between runs, and by the Manager after Close until
	// the owner's next Receiver. Quiet progress is coalesced (one event per
	// task and type, the latest payload), so it counts once per task. At
	// the limit the oldest event that does not end a task is dropped, with
	// a warning in the Manager's log; when every kept event ends a task,
	// the oldest is dropped with an error in the log: with a durable Store
	// its record, still unannounced, is announced again by the owner's next
	// RunStart, so it is not lost; with the in-memory store the record still
	// tells the end. Defaults to 1,024 when 0; a negative value
	// makes NewReceiver fail.
	KeepLimit int
	// OnRunCanceled hears that the open run was cancelled (Owner.CancelRun
	// or Owner.StopRun, on this Manager or, with a store that keeps runs
	// across instances, store.RunLeaser, on another instance), with the
	// cancel's reason: the host ends the run's turn, as for a user's stop
	// (the agent package's Threads cancels the turn's context with a
	// *RunStoppedError). It is not called for a run already ended, nor by
	// RunEnd's own cancel. Unlike the other callbacks it is not queued: it
	// is called on the goroutine of the cancel's caller (or of the store),
	// after the run's tasks were cancelled and before that call returns,
	// so a stop returns once the turn heard it; no lock of bgtask is held,
	// so it may call the Receiver, RunEnd included. A panic in it is
	// recovered and logged with its name. Defaults to nil: nothing is
	// called, and the turn goes on (its tasks are cancelled, later spawns
	// into it fail).
	OnRunCanceled func(runID, reason string)
}

// RunInfo identifies an agent run. RunID is required; it is the lineage of
// every task the run's tools spawn (see WithToolCall) and the key of
// CancelRun. AgentID is optional.
type RunInfo struct {
	RunID   string
	AgentID string
}

// noticePoll is how often WaitEvent looks for a SharedStore's notices.
const noticePoll = time.Second

// ErrNoRun is returned by a Receiver's (or an agent Plugin's) boundary called
// outside RunStart...RunEnd, by RunStart for an empty run id, and by RunEnd
// for a run id that is not the open run's.
var ErrNoRun = errors.New("bgtask: no run started")

// NewReceiver returns the Receiver of owner on m, the owner's only live
// one: it gets the events that the owner's previous Receiver, closed, left
// behind. Errors: ErrClosed, ErrInvalidArgument (blank owner), ErrReceiverExists while
// another Receiver of owner is live (not closed) on m, and an error for a
// negative KeepLimit; after an error nothing changed.
func (m *Manager) NewReceiver(owner string, cfg ReceiverConfig) (*Receiver, error) {
	switch {
	case m.closed.Load():
		return nil, ErrClosed
	case !bgtype.ValidOwner(owner):
		return nil, bgtype.ErrInvalidOwner
	case cfg.KeepLimit < 0:
		return nil, fmt.Errorf("bgtask: NewReceiver: keep limit %d events, want at least 1 (0 for the default)", cfg.KeepLimit)
	}
	r := &Receiver{owner: m.Owner(owner), fixed: cfg.Inbox, onWake: cfg.OnWake, onRunCanceled: cfg.OnRunCanceled, keepMax: cfg.KeepLimit}
	if r.keepMax == 0 {
		r.keepMax = defaultKeepLimit
	}
	adopt := func(ev bgtype.Event) { // no event reaches r yet: only the Manager's lock is held
		r.lateMu.Lock()
		dropped, full := r.late.add(ev, r.keepMax)
		r.lateMu.Unlock()
		if full {
			m.dropKept(owner, dropped)
		}
	}
	if !m.claimOwner(owner, r, adopt) {
		return nil, ErrReceiverExists
	}
	if r.fixed == nil {
		// While no run's inbox is bound, the owner's events go to
		// r.idleInbox, so they wake the owner and wait for the next run.
		m.setIdleReceiver(owner, r)
	}
	m.watchSettled(r)
	return r, nil
}

// idleInbox returns the closed inbox whose fallback is keepLate: the
// owner's inbox while no run's is bound. It is made on the first call, so
// an owner that gets no event between runs costs no inbox. Safe for
// concurrent use: concurrent first calls return the same inbox.
func (r *Receiver) idleInbox() *Inbox {
	if ib := r.idle.Load(); ib != nil {
		return ib
	}
	ib := r.owner.m.newInbox(r.keepLate)
	ib.Close()
	if !r.idle.CompareAndSwap(nil, ib) {
		return r.idle.Load() // another call made it first
	}
	return ib
}

// sharedStore returns the Manager's Store if it is a SharedStore, else nil.
func (r *Receiver) sharedStore() store.SharedStore {
	s, _ := r.owner.m.store.(store.SharedStore)
	return s
}

// Owner returns the owner view the Receiver works for.
func (r *Receiver) Owner() Owner { return r.owner }

// Running reports whether a run is open (between RunStart and RunEnd).
func (r *Receiver) Running() bool { return r.running.Load() }

// RunStart opens a run: it binds a fresh inbox (unless the Receiver reads
// a sub-agent's own), then restores the owner's records, so the events of
// tasks that a gone runtime left running reach this run. Errors: ErrNoRun
// for an empty RunID, ErrRunOpen while a run of the owner is open
// (nothing changes: the open run goes on), here or, with a store that
// keeps runs across instances (store.RunLeaser), on another live
// instance; ErrClosed (the Manager's, or this Receiver's after Close), or
// the Store's; after another error no run is open (the other boundaries
// return ErrNoRun), and events are kept for the next RunStart. RunStart
// works with ctx's values only, as the other boundaries but WaitEvent.
func (r *Receiver) RunStart(ctx context.Context, run RunInfo) error {
	ctx = context.WithoutCancel(ctx) // a request that ended still opens the run it asked for
	if run.RunID == "" {
		return fmt.Errorf("%w: empty run id", ErrNoRun)
	}
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return fmt.Errorf("bgtask: receiver: closed: %w", ErrClosed)
	case r.running.Load():
		r.mu.Unlock()
		return ErrRunOpen
	}
	if err := r.openLease(ctx, run.RunID); err != nil {
		r.mu.Unlock()
		return err
	}
	inbox := r.fixed
	if inbox == nil {
		ib := r.owner.m.newInbox(r.keepLate)
		prev, err := r.owner.m.BindInbox(r.owner.id, ib)
		if err != nil {
			carried := r.carriedIDs()
			r.mu.Unlock()
			r.closeLease(ctx, run.RunID, carried)
			return err
		}
		inbox = ib
		if prev != nil && !prev.Closed() {
			r.older = append(r.older, prev) // the lazily made inbox may hold events already
		}
	}
	r.runID, r.inbox = run.RunID, inbox
	r.runSeq.Add(1)
	r.running.Store(true)
	r.mu.Unlock()
	if _, err := r.owner.m.Restore(ctx, r.owner.id); err != nil && !errors.Is(err, bgtype.ErrCorrupt) { // corrupt records are logged and skipped
		_ = r.RunEnd(ctx, RunOutcome{RunID: run.RunID, Aborted: true}) // no run: what arrives is kept for the next one, what was carried stays carried
		return fmt.Errorf("bgtask: receiver: restore: %w", err)
	}
	return nil
}

// keepLate is the fallback of the owner's closed inboxes: an event that
// missed a run is kept for the next one (see ReceiverConfig.KeepLimit), and wakes the
// owner unless it is quiet; quiet progress replaces the kept one of its
// task and type. Once the Receiver is closed, the Manager takes it.
func (r *Receiver) keepLate(ev bgtype.Event) {
	r.lateMu.Lock()
	if r.gone {
		r.lateMu.Unlock()
		r.owner.m.orphanEvent(r.owner.id, ev, r.keepMax)
		return
	}
	wake := r.onWake
	r.lateMu.Unlock()
	// The store keeps it, when it can, for whichever instance runs the
	// owner next; else this Receiver does.
	if !r.owner.m.postNotice(r.owner.id, ev) && !r.keep(ev) {
		return // let go meanwhile: the Manager took it
	}
	if wake != nil && !ev.Quiet {
		r.owner.m.calls.call("OnWake", r.owner.id, func() { wake(ev) })
	}
}

// keep keeps ev for the next run, and reports false if the Receiver let
// go of the owner meanwhile (Close): the Manager took ev then.
func (r *Receiver) keep(ev bgtype.Event) bool {
	r.lateMu.Lock()
	if r.gone {
		r.lateMu.Unlock()
		r.owner.m.orphanEvent(r.owner.id, ev, r.keepMax)
		return false
	}
	dropped, full := r.late.add(ev, r.keepMax)
	r.lateMu.Unlock()
	if full {
		r.owner.m.dropKept(r.owner.id, dropped)
	}
	return true
}

// Deliver claims everything waiting for the owner, in order: events kept
// from between runs, notices of a SharedStore (tasks its reaper
// interrupted), then the inbox. Each event is delivered once. Deliver is
// the step-boundary drain; the loop also calls it at a natural end and
// while suspended. It returns nil, nil when nothing waits.
//
// The events are the tasks' own words: a host shows them to a model only
// escaped and cut (the agent package's Plugin renders them so).
//
// An event is heard when the model's answer to it is kept, not when the
// host is handed it: each Deliver first marks heard (announced, in the
// Store) the terminal events the previous Deliver handed out, since the
// loop made a model call with them in between; RunEnd marks those of the
// last step, unless the run was aborted (see RunOutcome.Aborted). What is
// handed out and not yet heard is handed out again after a crash, or by
// the owner's next Receiver after Close (see heard.go). One Commit per
// boundary at most; if the mark fails it is retried at the next boundary.
// With a SharedStore, an end kept in this process's memory whose record
// says another instance already announced it is dropped, and so is a
// store's notice of a task already handed out.
//
// Deliver does its work with ctx's values only: a request context that
// ended does not make it fail or lose what it claimed.
func (r *Receiver) Deliver(ctx context.Context) ([]bgtype.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliver(context.WithoutCancel(ctx))
}

// deliver is Deliver with r.mu held.
func (r *Receiver) deliver(ctx context.Context) ([]bgtype.Event, error) {
	if !r.running.Load() {
		return nil, ErrNoRun
	}
	if r.heard != nil && r.heard.carried {
		r.heard.carried = false // an aborted run's last step: the model has not answered it yet
	} else {
		r.markHeard(ctx)
	}
	r.answersHeardNext()
	var notices []bgtype.Event
	if shared := r.sharedStore(); shared != nil {
		var err error
		if notices, err = shared.TakeNotices(ctx, r.owner.id); err != nil {
			return nil, fmt.Errorf("bgtask: receiver: notices: %w", err) // nothing claimed: all stays for the next call
		}
	}
	r.lateMu.Lock()
	evs := r.late.evs
	r.late.evs = nil
	r.lateMu.Unlock()
	if len(notices) == 0 {
		for _, ib := range r.older {
			evs = ib.AppendDrain(evs)
		}
		evs = r.inbox.AppendDrain(evs)
	} else {
		var rest []bgtype.Event
		for _, ib := range r.older {
			rest = ib.AppendDrain(rest)
		}
		rest = r.inbox.AppendDrain(rest)
		var gone []string
		notices, gone = r.newNotices(ctx, notices, evs, rest)
		if len(gone) > 0 {
			// A gone sub-agent's tasks that ended before it and were never
			// told: forwarded to this owner, now, as Restore does for the
			// sub-agents it finds gone itself.
			if _, err := r.owner.m.restoreTree(ctx, gone, r.owner.id); err != nil {
				r.owner.m.log.Warn("bgtask: receiver: forwarding a gone sub-agent's tasks; the next RunStart tries again", "owner", r.owner.id, "err", err)
			}
			rest = r.inbox.AppendDrain(rest)
		}
		evs = append(append(evs, notices...), rest...)
	}
	if r.sharedStore() != nil {
		evs = r.dropHeardElsewhere(ctx, evs)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	if r.heard == nil {
		r.heard = new(hearing)
	}
	r.heard.unheard = append(r.heard.unheard, evs...)
	for i := range evs {
		if evs[i].Kind.IsTerminal() {
			if r.drained == nil {
				r.drained = make(map[string]struct{})
			}
			r.drained[evs[i].TaskID] = struct{}{}
		}
	}
	return evs, nil
}

// newNotices returns those of a SharedStore's notices that were not
// handed out already: a terminal notice is dropped when the same task's
// end is among the events this Manager delivered (late and rest, a
// Restore's included), was handed out by this Receiver, or its record is
// marked announced (an earlier hand-out committed it). A notice of a
// record of another owner is kept only for a gone descendant of the owner
// (the store reports a dead sub-agent's tasks to its owner): its mark is
// then committed under the record's own owner, as for the events Restore
// forwards. gone lists the sub-agents whose notices say they were
// interrupted: what their tasks ended before them was never told, and the
// caller forwards it. Notices are rare (a reaper made them), so the Get
// per notice costs nothing in the common path. Called with r.mu held.
func (r *Receiver) newNotices(ctx context.Context, notices, late, rest []bgtype.Event) (_ []bgtype.Event, gone []string) {
	seen := make(map[string]bool)
	for _, evs := range [][]bgtype.Event{late, rest} {
		for i := range evs {
			if evs[i].Kind.IsTerminal() {
				seen[evs[i].TaskID] = true
			}
		}
	}
	notices = slices.DeleteFunc(notices, func(ev bgtype.Event) bool {
		if !ev.Kind.IsTerminal() {
			return false
		}
		if seen[ev.TaskID] {
			return true // this Manager delivers it too, in this batch
		}
		seen[ev.TaskID] = true
		if _, handed := r.drained[ev.TaskID]; handed || r.heard.has(ev.TaskID) {
			return true
		}
		meta, err := r.owner.m.store.Get(ctx, ev.TaskID)
		switch {
		case err != nil:
			return false // gone (retention): hand it out, nothing to mark
		case meta.Announced:
			return true
		case meta.Owner != r.owner.id:
			if !r.owner.m.descendant(ctx, r.owner.id, meta) {
				r.owner.m.log.Warn("bgtask: receiver: notice of a task the owner does not own dropped", "owner", r.owner.id, "task_id", ev.TaskID)
				return true
			}
			r.owner.m.noteDelivered(r.owner.id, meta.Owner, ev.TaskID) // its mark goes under its own owner
		}
		if meta.Type == bgtype.TypeSubAgent && meta.Status == bgtype.StatusInterrupted {
			gone = append(gone, meta.ID)
		}
		return false
	})
	return notices, gone
}

// Pending reports whether work is pending: whether a task of the owner that
// this Manager runs will still report its end to the inbox (it is not
// silent, and Deliver has not handed out its terminal event yet, even if its
// record is already terminal). At a natural end with work pending, a
// top-level run ends waiting (reason "awaiting_tasks") and a sub-agent waits
// with WaitEvent. Tasks of other instances of a SharedStore report through
// notices, not through this.
func (r *Receiver) Pending(ctx context.Context) (pending bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running.Load() {
		return false, ErrNoRun
	}
	pending = r.owner.m.reporting(r.owner.id, r.drained)
	if len(r.drained) == 0 {
		r.drained = nil // a map keeps its memory: an idle owner holds none
	}
	return pending, nil
}

// WaitEvent blocks until Deliver has something that wakes (quiet progress
// alone does not: see Event.Quiet), or ctx ends (it returns ctx's cause
// then), or the run ends (ErrNoRun). Once the Manager has shut down it
// returns nil while anything is left to deliver, then ErrClosed.
func (r *Receiver) WaitEvent(ctx context.Context) error {
	r.mu.Lock()
	running, inbox, older := r.running.Load(), r.inbox, slices.Clone(r.older)
	r.mu.Unlock()
	if !running {
		return ErrNoRun
	}
	for stopped := false; ; {
		size := (*Inbox).loudLen
		if stopped {
			size = (*Inbox).Len
		}
		r.lateMu.Lock()
		late := slices.ContainsFunc(r.late.evs, func(ev bgtype.Event) bool { return stopped || !ev.Quiet })
		r.lateMu.Unlock()
		if late || size(inbox) > 0 || slices.ContainsFunc(older, func(ib *Inbox) bool { return size(ib) > 0 }) {
			return nil
		}
		if stopped {
			return ErrClosed
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if r.sharedStore() != nil {
			// Notices come from the store, not the inbox: look again now and then.
			wctx, cancel = context.WithTimeout(ctx, noticePoll)
		}
		err := inbox.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case !r.running.Load():
			return ErrNoRun
		case errors.Is(err, ErrClosed): // look once more at what arrived elsewhere
			stopped = true
			continue
		case err != nil && !errors.Is(err, ErrInboxClosed): // the notice poll's timer
			return nil
		}
		if inbox.Closed() { // nothing more will arrive: hand over what is left, quiet or not
			if inbox.Len() > 0 {
				return nil
			}
			return fmt.Errorf("%w: the sub-agent's inbox closed", ErrInboxClosed)
		}
	}
}

// RunOutcome is how a run ended, as the loop tells RunEnd.
type RunOutcome struct {
	// RunID is the run that ends: the RunID given to RunStart. Required: a
	// RunEnd for another run (an old request's, late) ends nothing.
	RunID string
	// Canceled: the user stopped the run; its tasks and their attached
	// descendants are cancelled too (CancelRun), and later spawns into it
	// fail. A server sets it from RunStopped(ctx), never from ctx.Err():
	// a request context also ends when the client goes away, and that must
	// not cancel the background work the run started.
	Canceled bool
	// Reason says why the run was stopped, as WithReason does for a
	// cancel: it is the cancel reason of each task the stop cancels (on
	// its record, TaskMeta.CancelReason, and in its cancelled event), so
	// the model can tell a user's stop from a shutdown. Only read when
	// Canceled; empty means StopReason. It is cut to
	// MaxCancelReasonBytes.
	Reason string
	// Aborted: the run ended before the model answered its last step (the
	// model call failed or was cancelled, the client went away). The
	// events that step was handed are not marked heard: the host keeps
	// them in the conversation, and the model answers them at the owner's
	// next run, whose second step marks them; if the Receiver is closed
	// first (the host forgot the thread and its conversation) or the
	// process dies, the owner's next run is handed them again. A host that
	// drops an aborted run's conversation calls Undeliver before RunEnd
	// instead, so they come again at the next run. False (a run that ended
	// with the model's answer) marks them heard.
	Aborted bool
}

// RunEnd closes the run out.RunID. Its inbox is closed: what was not
// delivered, and every later event of the owner's tasks until the next
// RunStart, is kept for the next run and handed to OnWake. The ends its
// last step was handed are marked heard, unless out.Aborted. A cancelled
// run cancels its tasks (top-level runs included), with out.Reason (or
// StopReason) as their cancel reason. RunEnd does not depend
// on ctx's end: call it with the request's context even after the client
// went away. Errors: ErrNoRun when no run is open, or (wrapped) when
// out.RunID is not the open run's: then nothing changes, and the open run
// goes on; the error of cancelling the run's tasks.
func (r *Receiver) RunEnd(ctx context.Context, out RunOutcome) error {
	r.mu.Lock()
	if !r.running.Load() {
		r.mu.Unlock()
		return ErrNoRun
	}
	if out.RunID != r.runID {
		r.mu.Unlock()
		return fmt.Errorf("%w: the run id is not the open run's", ErrNoRun)
	}
	if !out.Aborted {
		r.markHeard(context.WithoutCancel(ctx))
	}
	// Answers returned after the last model call (and, aborted, the last
	// step's events) reach a model only in the owner's next run, if the
	// host keeps the conversation: carried, as an aborted run's.
	r.answersHeardNext()
	if h := r.heard; h != nil {
		h.carried, h.run = len(h.unheard) > 0, r.runID
	}
	r.running.Store(false)
	runID, inbox, older := r.runID, r.inbox, r.older
	r.runID, r.inbox, r.older = "", nil, nil // an idle owner keeps no closed inbox
	carried := r.carriedIDs()
	r.mu.Unlock()
	r.closeLease(ctx, runID, carried)
	var err error
	if out.Canceled {
		reason := out.Reason
		if reason == "" {
			reason = StopReason
		}
		if _, cerr := r.owner.CancelRun(runID, WithReason(reason)); cerr != nil && !errors.Is(cerr, ErrClosed) {
			err = cerr
		}
	}
	if r.fixed == nil { // outside the lock: the fallback calls OnWake
		inbox.Close()
		for _, ib := range older {
			for _, ev := range ib.Drain() {
				r.keepLate(ev)
			}
		}
	}
	return err
}

// Errors of a Receiver's lifecycle and runs.
var (
	// ErrReceiverExists is returned by Manager.NewReceiver (and the agent
	// package's NewPlugin) for an owner that already has a live (not
	// closed) Receiver on the Manager: two receivers of one owner would
	// take each other's events. Close the first one, or reuse it.
	ErrReceiverExists = errors.New("bgtask: the owner has a live receiver on this Manager")
	// ErrRunOpen is returned by RunStart while a run is open: end it with
	// RunEnd first. Nothing was changed.
	ErrRunOpen = errors.New("bgtask: a run is already open")
	// ErrRunStopped is the cause a host cancels a run's context with when
	// the user stopped the run (context.WithCancelCause): RunStopped then
	// reports true, and the host ends the run with RunOutcome.Canceled,
	// which cancels the tasks the run started. Any other end of the
	// context (an HTTP client that went away, a request deadline) ends
	// the run without cancelling them: their events reach the owner's next
	// run.
	ErrRunStopped = errors.New("bgtask: run stopped by the user")
)

// RunStopped reports whether ctx was cancelled because the user stopped
// the run: its cause (context.Cause) matches ErrRunStopped. It is what a
// host passes as RunOutcome.Canceled; a context that ended for any other
// reason (the request's client hung up, a deadline) is not a stop.
func RunStopped(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrRunStopped)
}

// Close ends the Receiver, for a host that forgets a thread (a server drops
// the receiver of a conversation it no longer holds in memory). An open run
// ends as RunEnd without Canceled would end it: its tasks go on. The
// Receiver lets go of the owner, so that the Manager keeps nothing for it
// once its tasks have ended, and NewReceiver may make the owner's next
// Receiver.
//
// No event is lost: those the Receiver held undelivered, and those the
// owner's tasks send after Close, go to the owner's next Receiver, once
// each, at its first run. With a durable Store a task's end is not kept
// in memory: its record, still unannounced, is announced by the next
// Receiver's RunStart (Restore). Other events (and every event with the
// in-memory store) are kept by the Manager under the Receiver's keep limit
// (ReceiverConfig.KeepLimit). Events handed out but not yet proven heard
// (see Deliver) count as undelivered: the next Receiver gets them again.
// Marks of events heard that a boundary could not commit are committed
// now.
//
// Close works on ctx's values only: a cancelled request context does not
// keep it from committing. It is idempotent: a second Close returns nil.
// After Close, RunStart returns an error matching ErrClosed and the other
// boundaries ErrNoRun. The only error is the Store's, for the marks (the
// Receiver is closed all the same; the events stay announced again at the
// next Restore).
func (r *Receiver) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	running, runID := r.running.Load(), r.runID
	if !running && r.heard != nil && r.heard.carried {
		runID = r.heard.run // the aborted run whose lease carries them: they are handed out again
	}
	r.running.Store(false)
	r.giveBack() // handed out, never proven heard: the owner's next Receiver gets them
	var unmarked []string
	if r.heard != nil {
		unmarked = r.heard.unmarked
	}
	inbox, older := r.inbox, r.older
	r.inbox, r.older, r.heard = nil, nil, nil
	clear(r.drained)
	r.mu.Unlock()
	if runID != "" {
		r.closeLease(ctx, runID, nil)
	}
	var err error
	if len(unmarked) > 0 {
		if merr := r.owner.MarkAnnounced(ctx, unmarked...); merr != nil {
			err = fmt.Errorf("bgtask: receiver: close: %w", merr)
		}
	}
	m, owner := r.owner.m, r.owner.id
	var late []bgtype.Event
	m.releaseOwner(owner, r, func() {
		r.lateMu.Lock()
		r.gone = true // from now on keepLate hands every event to orphanEvent
		late = r.late.evs
		r.late.evs = nil
		r.lateMu.Unlock()
	})
	for _, ev := range late {
		m.orphanEvent(owner, ev, r.keepMax)
	}
	if r.fixed != nil {
		return err // a sub-agent's own inbox: the Manager closes it when the sub-agent ends
	}
	if running {
		inbox.Close() // what is undrained goes to keepLate, then orphanEvent
	}
	for _, ib := range older {
		for _, ev := range ib.Drain() {
			m.orphanEvent(owner, ev, r.keepMax)
		}
	}
	// While the owner has live tasks, their events go through a closed
	// inbox to orphanEvent; it is forgotten with the owner's last task.
	m.unbindOwnerIdle(owner, r, r.keepMax)
	return err
}
