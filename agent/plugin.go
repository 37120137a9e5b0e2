package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// Plugin connects a Manager to an agent loop, for one owner (a thread or an
// agent), and renders what the model sees. The loop calls it at its phase
// boundaries:
//
//	RunStart        bind a fresh inbox for the run, restore the owner's records
//	BeforeInference deliver events as prompt messages, and the prompt view
//	AfterToolCall   note that the tasks may have changed
//	StepEnd         report whether work is pending
//	Deliver         deliver events at any other boundary (natural end, suspension)
//	WaitEvent       block until something can be delivered (a sub-agent's natural end)
//	RunEnd          close the run's inbox; cancel the run's tasks if it was cancelled
//
// The events themselves come from the owner's [bgtask.Receiver], which the
// Plugin holds: events that arrive between runs are kept, handed to the
// Config.Receiver.OnWake callback once each, and delivered first by the next run, so
// none is lost or delivered twice.
//
// What the model sees is rendered in envelopes that carry a random nonce
// made by NewPlugin; text written by tasks is escaped and cut to a display
// limit, so it can neither forge nor alter an envelope, and ParseEvent
// accepts only this Plugin's envelopes.
//
// A Plugin outlives runs: make one per owner and reuse it; a Manager has at
// most one live Plugin (one Receiver) per owner: NewPlugin refuses a second
// with bgtask.ErrReceiverExists. A host that forgets an owner (a server
// that drops a conversation) calls Close; the owner's next Plugin, made
// later, gets every event the closed one did not deliver. A run is a value:
// RunStart refuses to open a second one while one is open
// (bgtask.ErrRunOpen), and RunEnd ends only the run it names.
//
// Every method is safe for concurrent use. A loop calls the phases in
// order, one at a time; AfterToolCall and the owner's tools may run
// concurrently with each other (a framework runs a step's tool calls in
// parallel) and with the phases. WaitEvent does not hold the Plugin while
// it waits, so RunEnd from another goroutine ends it with bgtask.ErrNoRun.
// The OnWake callback runs on the Manager's callback goroutine, with no
// lock held. The zero value is not usable: call NewPlugin.
type Plugin struct {
	// An idle owner's Plugin and its Receiver are most of what a server
	// holds for a thread: 64 bytes here (a size class), the owner's id is
	// the Receiver's, and the caps are int32.
	r         *bgtask.Receiver
	nonce     string
	display   int32 // Config.Display
	viewLines int32 // Config.ViewLines
	viewBytes int32 // Config.ViewBytes
	viewStale atomic.Bool

	mu   sync.Mutex // guards view; taken before the Receiver's lock
	view string     // the rendered prompt view, "" for no live tasks
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

// Config configures a Plugin (NewPlugin). The zero value is the default:
// one inbox per run, no callbacks, 1,024 events kept between runs, texts
// cut at 4 KiB, a prompt view of 50 tasks in 8 KiB. A negative field, or
// one above math.MaxInt32, makes NewPlugin fail.
type Config struct {
	// Receiver configures the owner's bgtask.Receiver, which the Plugin
	// holds: Inbox (a sub-agent's own inbox, Task.Inbox, read instead of
	// one per run), OnWake (hears of each event arriving while no run is
	// open, so the host starts one; the event itself is delivered by the
	// next run's first boundary), KeepLimit (the events kept while no run
	// is open) and OnRunCanceled (hears that the open run was stopped, here
	// or on another instance). The callbacks are called with no lock of
	// bgtask held (OnWake on the Manager's callback goroutine, in order;
	// OnRunCanceled before the cancel returns), so they may call the Plugin
	// or the Manager; a panic in one is recovered and logged. See
	// bgtask.ReceiverConfig for each field's rules. [Threads] sets
	// OnRunCanceled (Turn.Context) and, with ThreadsConfig.OnWake, OnWake.
	Receiver bgtask.ReceiverConfig
	// Display is the size in bytes past which a text a task wrote (a
	// result, error, payload, message or input prompt) is cut, at a rune
	// boundary, before the model sees it; a marker ends it with the
	// original size and points to get_task. Defaults to 4096 when 0.
	Display int
	// ViewLines is how many tasks the prompt view lists at most; a last
	// line says how many were left out. Defaults to 50 when 0.
	ViewLines int
	// ViewBytes is how many bytes the prompt view's task lines take at
	// most. Defaults to 8192 when 0.
	ViewBytes int
}

// Defaults of Config.
const (
	defaultDisplay   = 4 << 10
	defaultViewLines = 50
	defaultViewBytes = 8 << 10
)

// NewPlugin returns the Plugin of owner on m, the owner's only live one:
// it gets the events that the owner's previous Plugin, closed, left
// behind. Errors: bgtask.ErrClosed, bgtype.ErrInvalidOwner,
// bgtask.ErrReceiverExists while another Plugin (or Receiver) of owner is
// live (not closed) on m, and an error for a nil m or a negative limit;
// after an error nothing changed.
func NewPlugin(m *bgtask.Manager, owner string, cfg Config) (*Plugin, error) {
	if m == nil {
		return nil, errors.New("agent: NewPlugin: nil manager")
	}
	l := cfg
	for _, f := range []struct {
		name string
		v    int
	}{{"Display", l.Display}, {"ViewLines", l.ViewLines}, {"ViewBytes", l.ViewBytes}, {"Receiver.KeepLimit", l.Receiver.KeepLimit}} {
		if f.v < 0 || f.v > math.MaxInt32 {
			return nil, fmt.Errorf("agent: NewPlugin: Config.%s is %d, want 1 to %d (0 for the default)", f.name, f.v, math.MaxInt32)
		}
	}
	if l.Display == 0 {
		l.Display = defaultDisplay
	}
	if l.ViewLines == 0 {
		l.ViewLines = defaultViewLines
	}
	if l.ViewBytes == 0 {
		l.ViewBytes = defaultViewBytes
	}
	r, err := m.NewReceiver(owner, cfg.Receiver)
	if err != nil {
		return nil, err
	}
	p := &Plugin{r: r, nonce: rand.Text(), display: int32(l.Display), viewLines: int32(l.ViewLines), viewBytes: int32(l.ViewBytes)}
	p.viewStale.Store(true)
	return p, nil
}

// Owner returns the owner view the plugin works for; Tools(p.Owner()) are
// the model-facing tools of the loop.
func (p *Plugin) Owner() bgtask.Owner { return p.r.Owner() }

// Receiver returns the Receiver the Plugin takes the owner's events from.
// A host that delivers events itself at some boundary (and renders them
// with Render) calls its Deliver; the Plugin's other phases go through it
// as well.
func (p *Plugin) Receiver() *bgtask.Receiver { return p.r }

// RunStart opens a run: it binds a fresh inbox (unless the plugin reads a
// sub-agent's own), then restores the owner's records, so the events of
// tasks that a gone runtime left running reach this run. Errors:
// bgtask.ErrNoRun for an empty RunID, bgtask.ErrRunOpen while a run is
// open (nothing changes: the open run goes on), bgtask.ErrClosed (the
// Manager's, or this Plugin's after Close), or the Store's; after another
// error no run is open (the other phases return bgtask.ErrNoRun), and
// events are kept for the next RunStart.
func (p *Plugin) RunStart(ctx context.Context, run bgtask.RunInfo) error {
	p.viewStale.Store(true)
	return p.r.RunStart(ctx, run)
}

// Deliver claims everything waiting for the owner, in order: events kept
// from between runs, notices of a SharedStore (tasks its reaper
// interrupted), then the inbox. Each event becomes one PromptMessage; each
// is delivered once. Deliver is the step-boundary drain; the loop also calls
// it at a natural end and while suspended.
//
// The terminal events it hands out are marked heard (announced, in the
// Store) once the model answered them: at the next boundary, or at a
// RunEnd that is not aborted (see bgtask.Receiver.Deliver and
// bgtask.RunOutcome.Aborted). A crash before that hands them out again.
func (p *Plugin) Deliver(ctx context.Context) ([]PromptMessage, error) {
	evs, err := p.r.Deliver(ctx)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	p.viewStale.Store(true)
	msgs := make([]PromptMessage, 0, len(evs))
	for i := range evs {
		msgs = append(msgs, p.render(&evs[i]))
	}
	return msgs, nil
}

// BeforeInference delivers what is waiting (see Deliver) and appends the
// prompt view when the owner has non-terminal tasks: the Plugin's
// instructions as an ephemeral system message, then the list of tasks as an
// ephemeral internal user message (task text is never in the system role).
// The list is bounded (Config.ViewLines, Config.ViewBytes) and ends saying
// how many tasks it left out.
//
// BeforeInference works with ctx's values only: a request context that
// ended does not make it fail. When it fails after taking the events (the
// Store cannot list the tasks), it gives them back (Receiver.Undeliver):
// nothing is marked heard that the caller was not handed.
func (p *Plugin) BeforeInference(ctx context.Context) ([]PromptMessage, error) {
	ctx = context.WithoutCancel(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs, err := p.Deliver(ctx)
	if err != nil {
		return nil, err
	}
	if p.viewStale.Swap(false) {
		live, err := listed(p.Owner().List(ctx, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput))
		if err != nil {
			p.viewStale.Store(true)
			if len(msgs) > 0 {
				_, _ = p.r.Undeliver() // the run is open: Deliver just succeeded
			}
			return nil, err
		}
		p.view = p.renderView(live)
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
// called concurrently, by tool calls running in parallel. It returns
// bgtask.ErrNoRun when no run is open.
func (p *Plugin) AfterToolCall(ctx context.Context, call bgtask.ToolCall) error {
	if !p.r.Running() {
		return bgtask.ErrNoRun
	}
	p.viewStale.Store(true)
	return nil
}

// StepEnd reports whether work is pending: whether a task of the owner that
// this Manager runs will still report its end to the inbox (see
// bgtask.Receiver.Pending). At a natural end with work pending, a top-level
// run ends waiting (reason "awaiting_tasks") and a sub-agent waits with
// WaitEvent.
func (p *Plugin) StepEnd(ctx context.Context) (pending bool, err error) {
	return p.r.Pending(ctx)
}

// WaitEvent blocks until Deliver has something that wakes (quiet progress
// alone does not: see Event.Quiet), or ctx ends (it returns ctx's cause
// then), or the run ends (bgtask.ErrNoRun). Once the Manager has shut down
// it returns nil while anything is left to deliver, then bgtask.ErrClosed.
func (p *Plugin) WaitEvent(ctx context.Context) error { return p.r.WaitEvent(ctx) }

// RunEnd closes the run out.RunID. Its inbox is closed: what was not
// delivered, and every later event of the owner's tasks until the next
// RunStart, is kept for the next run and handed to Config.Receiver.OnWake. A cancelled
// run cancels its tasks (top-level runs included), with out.Reason (or
// bgtask.StopReason) as their cancel reason, which the model reads in each
// cancelled event. RunEnd does not depend
// on ctx's end: call it with the request's context even after the client
// went away. Errors: bgtask.ErrNoRun when no run is open, or (wrapped) when
// out.RunID is not the open run's: then nothing changes, and the open run
// goes on; the error of cancelling the run's tasks.
func (p *Plugin) RunEnd(ctx context.Context, out bgtask.RunOutcome) error {
	return p.r.RunEnd(ctx, out)
}

// Close ends the Plugin, for a host that forgets a thread (see
// bgtask.Receiver.Close): an open run ends as RunEnd without Canceled
// would end it, and the events the Plugin did not deliver go to the
// owner's next Plugin, once each. It is idempotent; the only error is the
// Store's.
func (p *Plugin) Close(ctx context.Context) error { return p.r.Close(ctx) }
