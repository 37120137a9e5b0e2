package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Plugin connects a Manager to an agent loop, for one owner (a thread or an
// agent). The loop calls it at its phase boundaries (D7):
//
//	RunStart        bind a fresh inbox for the run, restore the owner's records (D11)
//	BeforeInference deliver events as prompt messages, and the prompt view
//	AfterToolCall   note that the tasks may have changed
//	StepEnd         report whether work is pending
//	Deliver         deliver events at any other boundary (natural end, suspension)
//	WaitEvent       block until something can be delivered (a sub-agent's natural end)
//	RunEnd          close the run's inbox; cancel the run's tasks if it was cancelled
//
// Events that arrive between runs (a completion racing the end of a run
// included) are kept, handed to the OnWake callback once each, and
// delivered first by the next run, so none is lost or delivered twice.
//
// A Plugin outlives runs: make one per owner and reuse it. Its methods are
// meant to be called by one loop at a time; the OnWake callback may run on
// any goroutine. The zero value is not usable: call NewPlugin.
type Plugin struct {
	m      *Manager
	owner  Owner
	fixed  *Inbox // a sub-agent's own inbox (PluginInbox); never bound or closed here
	onWake func(Event)

	run       RunInfo
	inbox     *Inbox   // the inbox of the current run
	older     []*Inbox // inboxes replaced at RunStart that may still receive a send in flight
	viewStale bool
	view      []TaskMeta
	running   bool
	shared    SharedStore
	drained   map[string]struct{} // tasks whose terminal event Deliver handed out, until they retire

	mu   sync.Mutex // guards late
	late []Event    // events that reached a closed inbox of this owner
}

// RunInfo identifies an agent run. RunID is required; it is the lineage of
// every task the run's tools spawn (see WithToolCall) and the key of
// CancelRun. AgentID is optional.
type RunInfo struct {
	RunID   string
	AgentID string
}

// PromptMessage is what the Plugin gives the loop to show the model.
// Role is "user" for events and direct messages, "system" for the prompt
// view. Internal marks a message the user did not write (background events,
// the view). Ephemeral marks context for one inference only (the prompt
// view): the loop shows it and does not keep it in the conversation.
type PromptMessage struct {
	Role      string
	Content   string
	From      string // a direct message's sender
	Internal  bool
	Ephemeral bool
	Event     *Event // the event it renders, if any
}

// PluginOption configures a Plugin.
type PluginOption func(*Plugin)

// PluginInbox makes the plugin read ib, a sub-agent's own inbox
// (Task.Inbox), instead of binding one per run. The Manager closes it when
// the sub-agent ends.
func PluginInbox(ib *Inbox) PluginOption { return func(p *Plugin) { p.fixed = ib } }

// OnWake sets the callback that hears of each event arriving while no run
// of the owner is open, so the host can start one (awaken's mailbox wake).
// Quiet events (Event.Quiet) are kept for the next run without waking it.
// The event itself is delivered by the next run's first boundary; f must
// not block for long.
func OnWake(f func(Event)) PluginOption { return func(p *Plugin) { p.onWake = f } }

// noticePoll is how often WaitEvent looks for a SharedStore's notices.
const noticePoll = time.Second

// ErrNoRun is returned by a Plugin phase called outside RunStart...RunEnd.
var ErrNoRun = errors.New("bgtask: plugin: no run started")

// NewPlugin returns the Plugin of owner on m. Errors: ErrClosed,
// ErrInvalidOwner.
func NewPlugin(m *Manager, owner string, opts ...PluginOption) (*Plugin, error) {
	switch {
	case m.closed.Load():
		return nil, ErrClosed
	case !validOwner(owner):
		return nil, ErrInvalidOwner
	}
	p := &Plugin{m: m, owner: m.Owner(owner), viewStale: true, drained: make(map[string]struct{})}
	for _, o := range opts {
		o(p)
	}
	p.shared, _ = m.store.(SharedStore)
	return p, nil
}

// Owner returns the owner view the plugin works for; its Tools are the
// model-facing tools of the loop.
func (p *Plugin) Owner() Owner { return p.owner }

// RunStart opens a run: it binds a fresh inbox (unless the plugin reads a
// sub-agent's own), then restores the owner's records, so the events of
// tasks that a gone runtime left running reach this run. Errors: ErrNoRun
// for an empty RunID, ErrClosed, or the Store's; after an error no run is
// open, and events are kept for the next RunStart.
func (p *Plugin) RunStart(ctx context.Context, run RunInfo) error {
	if run.RunID == "" {
		return fmt.Errorf("%w: empty run id", ErrNoRun)
	}
	p.run, p.running, p.viewStale = run, true, true
	if p.fixed != nil {
		p.inbox = p.fixed
	} else {
		ib := p.m.newInbox(OnClosed(p.keepLate))
		prev, err := p.m.BindInbox(p.owner.id, ib)
		if err != nil {
			return err
		}
		p.inbox = ib
		if prev != nil && !prev.Closed() {
			p.older = append(p.older, prev) // the lazily made inbox may hold events already
		}
	}
	if _, err := p.m.Restore(ctx, p.owner.id); err != nil {
		_ = p.RunEnd(ctx, RunOutcome{}) // no run: what arrives is kept for the next one
		return fmt.Errorf("bgtask: plugin: restore: %w", err)
	}
	return nil
}

// keepLate is the fallback of a run's inbox: an event that missed the run is
// kept for the next one, and wakes the owner unless it is quiet.
func (p *Plugin) keepLate(ev Event) {
	p.mu.Lock()
	p.late = append(p.late, ev)
	wake := p.onWake
	p.mu.Unlock()
	if wake != nil && !ev.Quiet {
		wake(ev)
	}
}

// Deliver claims everything waiting for the owner, in order: events kept
// from between runs, notices of a SharedStore (tasks its reaper
// interrupted), then the inbox. Each event becomes one PromptMessage; each
// is delivered once. Deliver is the step-boundary drain; the loop also calls
// it at a natural end and while suspended.
func (p *Plugin) Deliver(ctx context.Context) ([]PromptMessage, error) {
	if !p.running {
		return nil, ErrNoRun
	}
	var notices []Event
	if p.shared != nil {
		var err error
		if notices, err = p.shared.TakeNotices(ctx, p.owner.id); err != nil {
			return nil, fmt.Errorf("bgtask: plugin: notices: %w", err) // nothing claimed: all stays for the next call
		}
	}
	p.mu.Lock()
	evs := append(p.late, notices...)
	p.late = nil
	p.mu.Unlock()
	for _, ib := range p.older {
		evs = ib.AppendDrain(evs)
	}
	evs = p.inbox.AppendDrain(evs)
	if len(evs) == 0 {
		return nil, nil
	}
	p.viewStale = true
	msgs := make([]PromptMessage, 0, len(evs))
	for i := range evs {
		if evs[i].Kind.IsTerminal() {
			p.drained[evs[i].TaskID] = struct{}{}
		}
		msgs = append(msgs, renderEvent(&evs[i]))
	}
	return msgs, nil
}

// BeforeInference delivers what is waiting (see Deliver) and appends the
// prompt view, an ephemeral system message listing the owner's
// non-terminal tasks, omitted when there are none.
func (p *Plugin) BeforeInference(ctx context.Context) ([]PromptMessage, error) {
	msgs, err := p.Deliver(ctx)
	if err != nil {
		return nil, err
	}
	if p.viewStale {
		if p.view, err = p.liveTasks(ctx); err != nil {
			return nil, err
		}
		p.viewStale = false
	}
	if len(p.view) > 0 {
		msgs = append(msgs, PromptMessage{Role: "system", Content: RenderTaskView(p.view), Internal: true, Ephemeral: true})
	}
	return msgs, nil
}

// AfterToolCall notes that a tool ran, so the next prompt view is read
// again: the tool may have spawned, cancelled or messaged tasks.
func (p *Plugin) AfterToolCall(ctx context.Context, call ToolCall) error {
	if !p.running {
		return ErrNoRun
	}
	p.viewStale = true
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
	if !p.running {
		return false, ErrNoRun
	}
	return p.m.reporting(p.owner.id, p.drained), nil
}

// WaitEvent blocks until Deliver has something that wakes (quiet progress
// alone does not: see Event.Quiet), or ctx ends (it returns ctx's cause
// then). Once the Manager has shut down it returns nil while anything is
// left to deliver, then ErrClosed.
func (p *Plugin) WaitEvent(ctx context.Context) error {
	if !p.running {
		return ErrNoRun
	}
	for stopped := false; ; {
		size := (*Inbox).loudLen
		if stopped {
			size = (*Inbox).Len
		}
		p.mu.Lock()
		late := slices.ContainsFunc(p.late, func(ev Event) bool { return stopped || !ev.Quiet })
		p.mu.Unlock()
		if late || size(p.inbox) > 0 || slices.ContainsFunc(p.older, func(ib *Inbox) bool { return size(ib) > 0 }) {
			return nil
		}
		if stopped {
			return ErrClosed
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if p.shared != nil {
			// Notices come from the store, not the inbox: look again now and then.
			wctx, cancel = context.WithTimeout(ctx, noticePoll)
		}
		err := p.inbox.Wait(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, ErrClosed): // look once more at what arrived elsewhere
			stopped = true
			continue
		case err != nil: // the notice poll's timer
			return nil
		}
		if p.inbox.Closed() && p.inbox.Len() == 0 {
			return fmt.Errorf("%w: the sub-agent's inbox closed", ErrInboxClosed)
		}
	}
}

// RunOutcome is how a run ended, as the loop tells RunEnd.
type RunOutcome struct {
	// Cancelled: the run was cancelled; its tasks and their attached
	// descendants are cancelled too (CancelRun), and later spawns into it fail.
	Cancelled bool
}

// RunEnd closes the run. Its inbox is closed: what was not delivered, and
// every later event of the owner's tasks until the next RunStart, is kept
// for the next run and handed to OnWake. A cancelled run cancels its tasks
// (D8: top-level runs included).
func (p *Plugin) RunEnd(ctx context.Context, out RunOutcome) error {
	if !p.running {
		return ErrNoRun
	}
	p.running = false
	var err error
	if out.Cancelled {
		if _, cerr := p.m.CancelRun(p.run.RunID); cerr != nil && !errors.Is(cerr, ErrClosed) {
			err = cerr
		}
	}
	if p.fixed == nil {
		p.inbox.Close()
		for _, ib := range p.older {
			for _, ev := range ib.Drain() {
				p.keepLate(ev)
			}
		}
		p.older = nil
	}
	return err
}

// liveTasks lists the owner's non-terminal tasks, oldest first.
func (p *Plugin) liveTasks(ctx context.Context) ([]TaskMeta, error) {
	seq, err := p.owner.List(ctx, StatusQueued, StatusRunning, StatusAwaitingInput)
	if err != nil {
		return nil, err
	}
	return slices.Collect(seq), nil
}

// The phases an agent loop calls, one small interface each, so a loop can
// take exactly what it uses; *Plugin implements them all.
type (
	// RunStartHook opens a run.
	RunStartHook interface {
		RunStart(ctx context.Context, run RunInfo) error
	}
	// BeforeInferenceHook gives the messages to show the model before each
	// inference.
	BeforeInferenceHook interface {
		BeforeInference(ctx context.Context) ([]PromptMessage, error)
	}
	// AfterToolCallHook hears of each tool call the loop ran.
	AfterToolCallHook interface {
		AfterToolCall(ctx context.Context, call ToolCall) error
	}
	// StepEndHook says, at the end of a step, whether work is pending.
	StepEndHook interface {
		StepEnd(ctx context.Context) (pending bool, err error)
	}
	// RunEndHook closes a run.
	RunEndHook interface {
		RunEnd(ctx context.Context, out RunOutcome) error
	}
	// BoundaryHook delivers events at boundaries other than a step's start
	// (a natural end, a suspension) and waits for them.
	BoundaryHook interface {
		Deliver(ctx context.Context) ([]PromptMessage, error)
		WaitEvent(ctx context.Context) error
	}
)

// LoopHooks is every phase together: what agentloop.Run takes.
type LoopHooks interface {
	RunStartHook
	BeforeInferenceHook
	AfterToolCallHook
	StepEndHook
	BoundaryHook
	RunEndHook
}

var _ LoopHooks = (*Plugin)(nil)
