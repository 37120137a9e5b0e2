package bgtask

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Plugin connects a Manager to an agent loop, for one owner (a thread or an
// agent). The loop calls it at its phase boundaries:
//
//	RunStart        bind a fresh inbox for the run, restore the owner's records
//	BeforeInference deliver events as prompt messages, and the prompt view
//	AfterToolCall   note that the tasks may have changed
//	StepEnd         report whether work is pending
//	Deliver         deliver events at any other boundary (natural end, suspension)
//	WaitEvent       block until something can be delivered (a sub-agent's natural end)
//	RunEnd          close the run's inbox; cancel the run's tasks if it was cancelled
//
// Events that arrive between runs (a completion racing the end of a run, or
// of a task the host spawned while no run was open) are kept, handed to the
// WithOnWake callback once each, and delivered first by the next run, so none
// is lost or delivered twice. Quiet progress kept between runs is coalesced
// as in an inbox: one event per task and type, with the latest payload.
//
// What the model sees is rendered in envelopes that carry a random nonce
// made by NewPlugin; text written by tasks is escaped and cut to a display
// limit, so it can neither forge nor alter an envelope, and ParseEvent
// accepts only this Plugin's envelopes.
//
// A Plugin outlives runs: make one per owner and reuse it; a Manager has at
// most one live Plugin per owner (NewPlugin refuses a second with
// ErrPluginExists). A host that forgets an owner (a server that drops a
// conversation) calls Close; the owner's next Plugin, made later, gets every
// event the closed one did not deliver. A run is a value: RunStart refuses
// to open a second one while one is open (ErrRunOpen), and RunEnd ends only
// the run it names. Every method is
// safe for concurrent use. A loop calls the phases in order, one at a time;
// AfterToolCall and the owner's tools may run concurrently with each other
// (a framework runs a step's tool calls in parallel) and with the phases.
// WaitEvent does not hold the Plugin while it waits, so RunEnd from another
// goroutine ends it with ErrNoRun. The WithOnWake callback may run on any
// goroutine, never while the Plugin's lock is held. The zero value is not
// usable: call NewPlugin.
type Plugin struct {
	// An idle owner's Plugin is most of what the Manager holds for it, so
	// the struct stays small: the Manager is owner.m, a SharedStore is
	// looked up when needed (sharedStore), and the closed inbox of idle is
	// made on first use (idleInbox).
	owner      Owner  // owner.m is the Manager
	fixed      *Inbox // a sub-agent's own inbox (WithInbox); never bound or closed here
	onWake     func(bgtype.Event)
	nonce      string
	displayMax int
	viewLines  int
	viewBytes  int
	keepMax    int                   // WithKeepLimit
	idle       atomic.Pointer[Inbox] // the closed inbox that takes the owner's events while no run is open; nil until first needed

	running   atomic.Bool // written with mu held
	viewStale atomic.Bool

	mu       sync.Mutex          // guards the fields below; held by a phase, never while calling WithOnWake
	runID    string              // the open run's id (RunInfo.RunID)
	inbox    *Inbox              // the inbox of the current run
	older    []*Inbox            // inboxes replaced at RunStart that may still receive a send in flight
	view     string              // the rendered prompt view, "" for no live tasks
	drained  map[string]struct{} // tasks whose terminal event Deliver handed out, until they retire; nil when none
	unmarked []string            // tasks whose terminal event Deliver handed out but could not mark announced
	closed   bool                // Close was called

	lateMu sync.Mutex // guards late and gone; the only lock an inbox's fallback takes
	late   eventKeep  // events that reached a closed inbox of this owner
	gone   bool       // Close let go of the owner: late events go to the Manager
}

// RunInfo identifies an agent run. RunID is required; it is the lineage of
// every task the run's tools spawn (see WithToolCall) and the key of
// CancelRun. AgentID is optional.
type RunInfo struct {
	RunID   string
	AgentID string
}

// PromptMessage is what the Plugin gives the loop to show the model.
//
// Role is "system" only for the Plugin's own instructions, which hold no
// text a task wrote; everything tasks report is in "user" messages: events,
// a task's messages to its owner, and the prompt view's task list. A
// message the owner sent to this agent (to a sub-agent, from its parent)
// keeps its sender in From and is not Internal. Internal marks a message
// the user did not write. Ephemeral marks context for one inference only
// (the prompt view and its instructions): the loop shows it and does not
// keep it in the conversation. Event points to the event a message renders,
// whole (the Content may be cut for display): a host should read it rather
// than parse the Content.
type PromptMessage struct {
	Role      string
	Content   string
	From      string // the sender: a direct message's, or the id of the task that sent a message
	Internal  bool
	Ephemeral bool
	Event     *bgtype.Event // the event it renders, if any
}

// PluginOption configures a Plugin. NewPlugin applies the options in order,
// then refuses bad values with an error.
type PluginOption func(*Plugin)

// WithInbox makes the plugin read ib, a sub-agent's own inbox
// (Task.Inbox), instead of binding one per run. The Manager closes it when
// the sub-agent ends.
func WithInbox(ib *Inbox) PluginOption { return func(p *Plugin) { p.fixed = ib } }

// WithOnWake sets the callback that hears of each event arriving while no run
// of the owner is open, so the host can start one. Quiet events
// (Event.Quiet) are kept for the next run without waking it. The event
// itself is delivered by the next run's first boundary; f must not block
// for long.
func WithOnWake(f func(bgtype.Event)) PluginOption { return func(p *Plugin) { p.onWake = f } }

// Defaults of the display limits.
const (
	// DefaultDisplayLimit is the size, in bytes, past which a result, an
	// error, a payload, a message or an input prompt is cut for the model.
	DefaultDisplayLimit = 4 << 10
	// DefaultViewLines is how many tasks the prompt view lists at most.
	DefaultViewLines = 50
	// DefaultViewBytes is how many bytes the prompt view's task lines take
	// at most.
	DefaultViewBytes = 8 << 10
)

// WithDisplayLimit sets the size in bytes past which a text a task wrote (a
// result, error, payload, message or input prompt) is cut, at a rune
// boundary, before the model sees it; a marker ends it with the original
// size and points to get_task. Default DefaultDisplayLimit; n < 1 makes
// NewPlugin fail.
func WithDisplayLimit(n int) PluginOption { return func(p *Plugin) { p.displayMax = n } }

// WithViewLimit bounds the prompt view: at most lines tasks and bytes bytes
// of their lines; a last line says how many tasks were left out. Defaults
// DefaultViewLines and DefaultViewBytes; a value < 1 makes NewPlugin fail.
func WithViewLimit(lines, bytes int) PluginOption {
	return func(p *Plugin) { p.viewLines, p.viewBytes = lines, bytes }
}

// noticePoll is how often WaitEvent looks for a SharedStore's notices.
const noticePoll = time.Second

// ErrNoRun is returned by a Plugin phase called outside RunStart...RunEnd,
// by RunStart for an empty run id, and by RunEnd for a run id that is not
// the open run's.
var ErrNoRun = errors.New("bgtask: plugin: no run started")

// NewPlugin returns the Plugin of owner on m, the owner's only live one:
// it gets the events that the owner's previous Plugin, closed, left
// behind. Errors: ErrClosed, ErrInvalidOwner, ErrPluginExists while
// another Plugin of owner is live (not closed) on m, and an error for a
// nil m or a bad option value; after an error nothing changed.
func NewPlugin(m *Manager, owner string, opts ...PluginOption) (*Plugin, error) {
	switch {
	case m == nil:
		return nil, errors.New("bgtask: NewPlugin: nil manager")
	case m.closed.Load():
		return nil, ErrClosed
	case !validOwner(owner):
		return nil, ErrInvalidOwner
	}
	p := &Plugin{
		owner: m.Owner(owner), nonce: rand.Text(),
		displayMax: DefaultDisplayLimit, viewLines: DefaultViewLines, viewBytes: DefaultViewBytes,
		keepMax: DefaultKeepLimit,
	}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	switch {
	case p.displayMax < 1:
		return nil, fmt.Errorf("bgtask: WithDisplayLimit: %d bytes, want at least 1", p.displayMax)
	case p.viewLines < 1 || p.viewBytes < 1:
		return nil, fmt.Errorf("bgtask: WithViewLimit: %d lines, %d bytes, want at least 1 each", p.viewLines, p.viewBytes)
	case p.keepMax < 1:
		return nil, fmt.Errorf("bgtask: WithKeepLimit: %d events, want at least 1", p.keepMax)
	}
	p.viewStale.Store(true)
	adopt := func(ev bgtype.Event) { // no event reaches p yet: only the Manager's lock is held
		p.lateMu.Lock()
		dropped, full := p.late.add(ev, p.keepMax)
		p.lateMu.Unlock()
		if full {
			m.dropKept(owner, dropped)
		}
	}
	if !m.claimOwner(owner, p, adopt) {
		return nil, ErrPluginExists
	}
	if p.fixed == nil {
		// While no run's inbox is bound, the owner's events go to
		// p.idleInbox, so they wake the owner and wait for the next run.
		m.setIdlePlugin(owner, p)
	}
	return p, nil
}

// idleInbox returns the closed inbox whose fallback is keepLate: the
// owner's inbox while no run's is bound. It is made on the first call, so
// an owner that gets no event between runs costs no inbox. Safe for
// concurrent use: concurrent first calls return the same inbox.
func (p *Plugin) idleInbox() *Inbox {
	if ib := p.idle.Load(); ib != nil {
		return ib
	}
	ib := p.owner.m.newInbox(WithOnClosed(p.keepLate))
	ib.Close()
	if !p.idle.CompareAndSwap(nil, ib) {
		return p.idle.Load() // another call made it first
	}
	return ib
}

// sharedStore returns the Manager's Store if it is a SharedStore, else nil.
func (p *Plugin) sharedStore() store.SharedStore {
	s, _ := p.owner.m.store.(store.SharedStore)
	return s
}

// Owner returns the owner view the plugin works for; its Tools are the
// model-facing tools of the loop.
func (p *Plugin) Owner() Owner { return p.owner }

// RunStart opens a run: it binds a fresh inbox (unless the plugin reads a
// sub-agent's own), then restores the owner's records, so the events of
// tasks that a gone runtime left running reach this run. Errors: ErrNoRun
// for an empty RunID, ErrRunOpen while a run is open (nothing changes: the
// open run goes on), ErrClosed (the Manager's, or this Plugin's after
// Close), or the Store's; after another error no run is open (the other
// phases return ErrNoRun), and events are kept for the next RunStart.
func (p *Plugin) RunStart(ctx context.Context, run RunInfo) error {
	if run.RunID == "" {
		return fmt.Errorf("%w: empty run id", ErrNoRun)
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return fmt.Errorf("bgtask: plugin: closed: %w", ErrClosed)
	case p.running.Load():
		p.mu.Unlock()
		return ErrRunOpen
	}
	inbox := p.fixed
	if inbox == nil {
		ib := p.owner.m.newInbox(WithOnClosed(p.keepLate))
		prev, err := p.owner.m.BindInbox(p.owner.id, ib)
		if err != nil {
			p.mu.Unlock()
			return err
		}
		inbox = ib
		if prev != nil && !prev.Closed() {
			p.older = append(p.older, prev) // the lazily made inbox may hold events already
		}
	}
	p.runID, p.inbox = run.RunID, inbox
	p.viewStale.Store(true)
	p.running.Store(true)
	p.mu.Unlock()
	if _, err := p.owner.m.Restore(ctx, p.owner.id); err != nil && !errors.Is(err, bgtype.ErrCorrupt) { // corrupt records are logged and skipped
		_ = p.RunEnd(ctx, RunOutcome{RunID: run.RunID}) // no run: what arrives is kept for the next one
		return fmt.Errorf("bgtask: plugin: restore: %w", err)
	}
	return nil
}

// keepLate is the fallback of the owner's closed inboxes: an event that
// missed a run is kept for the next one (see WithKeepLimit), and wakes the
// owner unless it is quiet; quiet progress replaces the kept one of its
// task and type. Once the Plugin is closed, the Manager takes it.
func (p *Plugin) keepLate(ev bgtype.Event) {
	p.lateMu.Lock()
	if p.gone {
		p.lateMu.Unlock()
		p.owner.m.orphanEvent(p.owner.id, ev, p.keepMax)
		return
	}
	dropped, full := p.late.add(ev, p.keepMax)
	wake := p.onWake
	p.lateMu.Unlock()
	if full {
		p.owner.m.dropKept(p.owner.id, dropped)
	}
	if wake != nil && !ev.Quiet {
		wake(ev)
	}
}

// Deliver claims everything waiting for the owner, in order: events kept
// from between runs, notices of a SharedStore (tasks its reaper
// interrupted), then the inbox. Each event becomes one PromptMessage; each
// is delivered once. Deliver is the step-boundary drain; the loop also calls
// it at a natural end and while suspended.
//
// Before it returns terminal events, Deliver marks them announced in the
// Store, in one Commit (none when it hands out no terminal event), so that
// after a crash the next run announces only what was never handed out. If
// the mark fails, the events are returned all the same and the mark is
// retried at the next call. A store's notice of a task already handed out
// is dropped.
func (p *Plugin) Deliver(ctx context.Context) ([]PromptMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deliver(ctx)
}

// deliver is Deliver with p.mu held.
func (p *Plugin) deliver(ctx context.Context) ([]PromptMessage, error) {
	if !p.running.Load() {
		return nil, ErrNoRun
	}
	var notices []bgtype.Event
	if shared := p.sharedStore(); shared != nil {
		var err error
		if notices, err = shared.TakeNotices(ctx, p.owner.id); err != nil {
			return nil, fmt.Errorf("bgtask: plugin: notices: %w", err) // nothing claimed: all stays for the next call
		}
	}
	p.lateMu.Lock()
	evs := p.late.evs
	p.late.evs = nil
	p.lateMu.Unlock()
	if len(notices) == 0 {
		for _, ib := range p.older {
			evs = ib.AppendDrain(evs)
		}
		evs = p.inbox.AppendDrain(evs)
	} else {
		var rest []bgtype.Event
		for _, ib := range p.older {
			rest = ib.AppendDrain(rest)
		}
		rest = p.inbox.AppendDrain(rest)
		var gone []string
		notices, gone = p.newNotices(ctx, notices, evs, rest)
		if len(gone) > 0 {
			// A gone sub-agent's tasks that ended before it and were never
			// told: forwarded to this owner, now, as Restore does for the
			// sub-agents it finds gone itself.
			if _, err := p.owner.m.restoreTree(ctx, gone, p.owner.id); err != nil {
				p.owner.m.log.Warn("bgtask: plugin: forwarding a gone sub-agent's tasks; the next RunStart tries again", "owner", p.owner.id, "err", err)
			}
			rest = p.inbox.AppendDrain(rest)
		}
		evs = append(append(evs, notices...), rest...)
	}
	p.markAnnounced(ctx, evs)
	if len(evs) == 0 {
		return nil, nil
	}
	p.viewStale.Store(true)
	msgs := make([]PromptMessage, 0, len(evs))
	for i := range evs {
		if evs[i].Kind.IsTerminal() {
			if p.drained == nil {
				p.drained = make(map[string]struct{})
			}
			p.drained[evs[i].TaskID] = struct{}{}
		}
		msgs = append(msgs, p.render(&evs[i]))
	}
	return msgs, nil
}

// markAnnounced commits, before evs are handed out, that the owner took
// the terminal events among them, with the marks a previous boundary could
// not commit: one Commit (and one per other owner of forwarded records),
// none when there is nothing to mark. A forwarded record (a gone
// sub-agent's task) is marked under its own owner. When it fails the
// events are handed out all the same (losing them would be worse than
// announcing them again after a crash) and the marks are retried at the
// next boundary. The commit does not depend on ctx's end: a request that
// ended must not leave handed-out events unmarked. Called with p.mu held.
func (p *Plugin) markAnnounced(ctx context.Context, evs []bgtype.Event) {
	ids := p.unmarked
	for i := range evs {
		if evs[i].Kind.IsTerminal() {
			ids = append(ids, evs[i].TaskID)
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := p.owner.MarkAnnounced(context.WithoutCancel(ctx), ids...); err != nil {
		p.owner.m.log.Warn("bgtask: plugin: announcement marks not committed; retried at the next boundary", "owner", p.owner.id, "tasks", len(ids), "err", err)
		p.unmarked = ids
		return
	}
	p.unmarked = nil
}

// newNotices returns those of a SharedStore's notices that were not
// handed out already: a terminal notice is dropped when the same task's
// end is among the events this Manager delivered (late and rest, a
// Restore's included), was handed out by this Plugin, or its record is
// marked announced (an earlier hand-out committed it). A notice of a
// record of another owner is kept only for a gone descendant of the owner
// (the store reports a dead sub-agent's tasks to its owner): its mark is
// then committed under the record's own owner, as for the events Restore
// forwards. gone lists the sub-agents whose notices say they were
// interrupted: what their tasks ended before them was never told, and the
// caller forwards it. Notices are rare (a reaper made them), so the Get
// per notice costs nothing in the common path. Called with p.mu held.
func (p *Plugin) newNotices(ctx context.Context, notices, late, rest []bgtype.Event) (_ []bgtype.Event, gone []string) {
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
		if _, handed := p.drained[ev.TaskID]; handed || slices.Contains(p.unmarked, ev.TaskID) {
			return true
		}
		meta, err := p.owner.m.store.Get(ctx, ev.TaskID)
		switch {
		case err != nil:
			return false // gone (retention): hand it out, nothing to mark
		case meta.Announced:
			return true
		case meta.Owner != p.owner.id:
			if !p.owner.m.descendant(ctx, p.owner.id, meta) {
				p.owner.m.log.Warn("bgtask: plugin: notice of a task the owner does not own dropped", "owner", p.owner.id, "task_id", ev.TaskID)
				return true
			}
			p.owner.m.noteDelivered(p.owner.id, meta.Owner, ev.TaskID) // its mark goes under its own owner
		}
		if meta.Type == bgtype.TypeSubAgent && meta.Status == bgtype.StatusInterrupted {
			gone = append(gone, meta.ID)
		}
		return false
	})
	return notices, gone
}

// BeforeInference delivers what is waiting (see Deliver) and appends the
// prompt view when the owner has non-terminal tasks: the Plugin's
// instructions as an ephemeral system message, then the list of tasks as an
// ephemeral internal user message (task text is never in the system role).
// The list is bounded (WithViewLimit) and ends saying how many tasks it
// left out.
func (p *Plugin) BeforeInference(ctx context.Context) ([]PromptMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs, err := p.deliver(ctx)
	if err != nil {
		return nil, err
	}
	if p.viewStale.Swap(false) {
		seq, err := p.owner.List(ctx, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput)
		if err != nil {
			p.viewStale.Store(true)
			return nil, err
		}
		p.view = p.renderView(seq)
	}
	if p.view != "" {
		msgs = append(msgs,
			PromptMessage{Role: "system", Content: p.instructions(), Internal: true, Ephemeral: true},
			PromptMessage{Role: "user", Content: p.view, Internal: true, Ephemeral: true})
	}
	return msgs, nil
}

// AfterToolCall notes that a tool ran, so the next prompt view is read
// again: the tool may have spawned, cancelled or messaged tasks. It may be
// called concurrently, by tool calls running in parallel.
func (p *Plugin) AfterToolCall(ctx context.Context, call ToolCall) error {
	if !p.running.Load() {
		return ErrNoRun
	}
	p.viewStale.Store(true)
	return nil
}

// StepEnd reports whether work is pending: whether a task of the owner that
// this Manager runs will still report its end to the inbox (it is not
// silent, and Deliver has not handed out its terminal event yet, even if its
// record is already terminal). At a natural end with work pending, a
// top-level run ends waiting (reason "awaiting_tasks") and a sub-agent waits
// with WaitEvent. Tasks of other instances of a SharedStore report through
// notices, not through this.
func (p *Plugin) StepEnd(ctx context.Context) (pending bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running.Load() {
		return false, ErrNoRun
	}
	pending = p.owner.m.reporting(p.owner.id, p.drained)
	if len(p.drained) == 0 {
		p.drained = nil // a map keeps its memory: an idle owner holds none
	}
	return pending, nil
}

// WaitEvent blocks until Deliver has something that wakes (quiet progress
// alone does not: see Event.Quiet), or ctx ends (it returns ctx's cause
// then), or the run ends (ErrNoRun). Once the Manager has shut down it
// returns nil while anything is left to deliver, then ErrClosed.
func (p *Plugin) WaitEvent(ctx context.Context) error {
	p.mu.Lock()
	running, inbox, older := p.running.Load(), p.inbox, slices.Clone(p.older)
	p.mu.Unlock()
	if !running {
		return ErrNoRun
	}
	for stopped := false; ; {
		size := (*Inbox).loudLen
		if stopped {
			size = (*Inbox).Len
		}
		p.lateMu.Lock()
		late := slices.ContainsFunc(p.late.evs, func(ev bgtype.Event) bool { return stopped || !ev.Quiet })
		p.lateMu.Unlock()
		if late || size(inbox) > 0 || slices.ContainsFunc(older, func(ib *Inbox) bool { return size(ib) > 0 }) {
			return nil
		}
		if stopped {
			return ErrClosed
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if p.sharedStore() != nil {
			// Notices come from the store, not the inbox: look again now and then.
			wctx, cancel = context.WithTimeout(ctx, noticePoll)
		}
		err := inbox.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case !p.running.Load():
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
	// Cancelled: the user stopped the run; its tasks and their attached
	// descendants are cancelled too (CancelRun), and later spawns into it
	// fail. A server sets it from RunStopped(ctx), never from ctx.Err():
	// a request context also ends when the client goes away, and that must
	// not cancel the background work the run started.
	Cancelled bool
}

// RunEnd closes the run out.RunID. Its inbox is closed: what was not
// delivered, and every later event of the owner's tasks until the next
// RunStart, is kept for the next run and handed to WithOnWake. A cancelled
// run cancels its tasks (top-level runs included). RunEnd does not depend
// on ctx's end: call it with the request's context even after the client
// went away. Errors: ErrNoRun when no run is open, or (wrapped) when
// out.RunID is not the open run's: then nothing changes, and the open run
// goes on; the error of cancelling the run's tasks.
func (p *Plugin) RunEnd(ctx context.Context, out RunOutcome) error {
	p.mu.Lock()
	if !p.running.Load() {
		p.mu.Unlock()
		return ErrNoRun
	}
	if out.RunID != p.runID {
		p.mu.Unlock()
		return fmt.Errorf("%w: the run id is not the open run's", ErrNoRun)
	}
	p.running.Store(false)
	runID, inbox, older := p.runID, p.inbox, p.older
	p.runID, p.inbox, p.older = "", nil, nil // an idle owner keeps no closed inbox
	p.mu.Unlock()
	var err error
	if out.Cancelled {
		if _, cerr := p.owner.CancelRun(runID); cerr != nil && !errors.Is(cerr, ErrClosed) {
			err = cerr
		}
	}
	if p.fixed == nil { // outside the lock: the fallback calls WithOnWake
		inbox.Close()
		for _, ib := range older {
			for _, ev := range ib.Drain() {
				p.keepLate(ev)
			}
		}
	}
	return err
}
