// Package bgtask runs background work inside LLM agent loops: sub-agents,
// slow tool calls, monitors. The model starts work and keeps talking; the
// work reports back through the owning agent's inbox, and the events reach
// the model at the next step boundary.
//
// # Tasks
//
// A [Manager] runs each task as a goroutine with its own cancellable
// context and a [Task] handle to [Task.Emit] events (progress, data). Every
// task has an owner, the agent (or thread) it reports to; [Manager.Owner]
// returns the [Owner] view through which that agent spawns, lists, waits
// for, messages and cancels its own tasks, and sees no one else's.
//
//	m, _ := bgtask.New()
//	thread := m.Owner("thread-1")
//	id, err := thread.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
//		t.ReportProgress(1, 2, "halfway")
//		return "done", nil
//	}, bgtask.WithName("research"), bgtask.WithWake(bgtype.WakeOnActivity))
//
// What the function returns decides the terminal status (completed, failed,
// cancelled); a panic becomes failed with the stack. A sub-agent, started
// with [Owner.SpawnAgent], also has its own [Inbox] for the messages sent to
// it ([Owner.Send]) and the events of the tasks it starts ([Task.Agent]).
//
// # Foreground calls and output
//
// [Owner.Foreground] runs a tool's work as a task and waits for it a while:
// its result if it ends in time, else it is promoted to the background (at
// once with [Owner.ToBackground]). What a task writes to [Task.Output]
// ([OutputFrom] in a tool) is kept in a bounded buffer with offsets that
// never change, read piece by piece with [Owner.ReadOutput], [Owner.TailOutput]
// and [Owner.WaitOutput], and streamed to the caller of a foreground call
// with [WithOutputFunc]; a promotion notice carries its last part.
//
// # Lineage and cancellation
//
// A spawn inside a task links to it; a spawn inside a tool call
// ([WithToolCall]) links to the call and its run. [Owner.CancelTree]
// cancels a task with its attached descendants, [Owner.CancelRun] one of the
// owner's runs (a run is the pair of owner and run id: another owner's run
// with the same id is untouched) and refuses later spawns into it,
// [Owner.CancelAll] an agent's tasks. The cause ([ErrCanceled], whatever canceled it,
// [ErrShutdown]) is read with [context.Cause].
//
// # Inbox
//
// An [Inbox] is an unbounded FIFO: sending never blocks, [Inbox.Drain] takes
// everything at once, and a closed inbox hands every later or undrained
// event to its [InboxConfig.OnClosed] fallback, so a completion that races the end of a
// run is never lost. A task's custom events arrive before its terminal
// event, and the terminal record is committed before that event is sent.
//
// # Events and waking
//
// An event exists whatever the task's [bgtype.WakePolicy]; the policy only decides
// whether it wakes the owner. [Task.Emit] never drops an event silently:
//
//   - every custom event but a message is kept as the task's latest
//     event while it runs ([Owner.LatestEvent]);
//   - by default ([bgtype.WakeOnTerminal]) custom events also reach the inbox, but
//     quiet ([Event.Quiet]): coalesced per task and type, delivered with the
//     next drain, and never waking a waiting owner ([Inbox.Wait],
//     [Receiver.WaitEvent], [ReceiverConfig].OnWake), so a model call is never spent on
//     progress alone; the terminal event, input requests
//     ([Task.RequestInput]) and messages wake it;
//   - with [bgtype.WakeOnActivity] every event reaches the inbox and wakes;
//   - with [bgtype.WakeSilent] nothing reaches the inbox but messages and commit
//     failures: progress is kept on the task only, and the model polls.
//
// When an event cannot go where its policy sends it (an inbox closed
// without a fallback), Emit returns an error instead of nil.
//
// # Sizes
//
// What a task hands its owner is capped where it enters, in the record and
// the events alike: results ([Caps.MaxResultBytes]), error texts and stacks
// ([Caps.MaxErrorBytes]), event payloads ([Caps.MaxPayloadBytes]), input
// prompts ([Caps.MaxPromptBytes]) and messages ([Caps.MaxMessageBytes]), each
// with a default that [WithCaps] changes. Something larger is cut with a marker that gives its
// original size: a JSON value becomes
// {"truncated":true,"original_bytes":N,"preview":"…"}, a text ends with
// "…[truncated: N bytes total]".
//
// # Configuration
//
// [New] needs no option: a Manager keeps its records in a new in-memory
// store, logs nothing and limits nothing. [WithStore], [WithLogger] and
// [WithInstance] are what most hosts set. The tuning knobs come in three
// groups, each a struct whose zero fields keep their documented defaults:
// [WithLimits] (concurrency, queueing, lineage depth and fan-out), [WithCaps]
// (sizes and tags kept in records) and [WithTuning] (commit retries,
// progress writes, memory of cancelled runs). A bad value makes New fail
// with an error matching [ErrInvalidArgument] that names the field.
//
// # Agent loops
//
// A [Receiver] is an owner's one live receiver of events across its runs
// ([Manager.NewReceiver]): [Receiver.RunStart] restores what a gone
// process left running, [Receiver.Deliver] hands out each event once
// (marking terminal ones announced), [Receiver.Pending] says whether work
// is pending, and [Receiver.RunEnd] keeps what arrives after the run for
// the next one ([ReceiverConfig].OnWake). Package agent builds the model
// layer on it: its Plugin renders events as prompt messages with a view of
// the running tasks, and agent.Tools are the model-facing tools
// (list_tasks, get_task, cancel_task, send_message, wait_task). Package
// agentloop is a small reference loop built on both. A host that writes
// its own loop and tools uses the Receiver and the Owner's methods meant
// for it: [Owner.CurrentTask], [Owner.CancelCurrent], [Owner.MarkAnswered],
// [Owner.LatestProgress], [Task.SendToOwner].
//
// A server, one agent turn per request and many threads, keeps one live
// Receiver (or Plugin) per thread (a second gets [ErrReceiverExists]) and
// calls [Receiver.Close] when it forgets the thread; the thread's next
// one delivers, once, what the closed one did not. A run is a value:
// [Receiver.RunStart] refuses a second open run ([ErrRunOpen]) and
// [Receiver.RunEnd] ends only the run its [RunOutcome] names. A request's
// context is not the run's: the turn runs its tools and the boundaries on
// [context.WithoutCancel] of it (its values stay, its cancellation does
// not, so a client that hangs up during a spawn fails no spawn), which the
// host cancels with the cause [ErrRunStopped] when the user stops the run,
// and passes [RunStopped] of it as RunOutcome.Canceled (and the user's
// reason as RunOutcome.Reason): a client that hangs up ends the turn's
// model calls and the run, without cancelling the work it started:
//
//	turnCtx, stop := context.WithCancelCause(context.WithoutCancel(r.Context())) // stop(bgtask.ErrRunStopped) on the user's stop
//	modelCtx, cancelModel := context.WithCancelCause(turnCtx)
//	defer context.AfterFunc(r.Context(), func() { cancelModel(context.Cause(r.Context())) })() // a hang-up ends model calls only
//	if err := plugin.RunStart(turnCtx, bgtask.RunInfo{RunID: turnID}); err != nil { ... }
//	... // the loop's steps: tools and the Plugin's phases on turnCtx, model calls on modelCtx
//	err := plugin.RunEnd(turnCtx, bgtask.RunOutcome{RunID: turnID, Canceled: bgtask.RunStopped(turnCtx)})
//
// RunEnd, Close and the announcement marks of a boundary commit even when
// the request's context has ended. The user's stop may land on any request
// (in a fleet, on any instance): [Owner.StopRun] finds the thread's open
// run and cancels it, and the Receiver that holds it calls
// ReceiverConfig.OnRunCanceled, where the host calls stop with a
// [RunStoppedError].
//
// The model's input is a trust boundary: what tasks write (results,
// errors, payloads, names, descriptions, input prompts, a sub-agent's
// messages) is the tasks' own text; the agent package's Plugin shows it
// escaped, cut to a display limit and in envelopes naming the task, never
// in the system role. A host that renders events itself must do the same.
//
// # Metadata
//
// Only metadata ([bgtype.TaskMeta]) is persisted, through one reducer
// ([store.Apply], under the state key [store.TaskStateKey]) that every [store.Store]
// applies: terminal is final (a late update may only fill what a terminal
// record lacks), stamps are written once, writes fenced on an older attempt
// are dropped. The default store is in memory, with bounded
// retention ([WithRetention]); the nested modules
// store/sqlitestore and store/pgstore keep it in SQLite or, shared by
// several processes ([store.SharedStore]), in PostgreSQL, and package storetest is
// the conformance suite they pass. After a restart,
// [Manager.Restore] turns what a gone process left running into interrupted
// records and tells their owners; closures are never re-run.
//
// # Resumable tasks
//
// Work that should survive a crash or a deploy is a [Kind] instead of a
// closure: a versioned name, a typed spec kept on the record and a function
// that gets the last [Checkpoint]. [NewKind] makes one, [WithKinds]
// registers it, [Kind.Spawn] starts it. When its process dies (or stops,
// [Task.Draining] and [ErrYield]), the task goes back to the queue and one
// live Manager that registered the kind claims it ([Manager.ClaimWaiting])
// and runs a new attempt from the checkpoint; its owner hears one end.
// Between two saves the work is at least once: [Task.StepKey] keys its side
// effects.
//
// # Shutdown
//
// [Manager.Shutdown], the hard stop, refuses new spawns, cancels every
// task with [ErrShutdown] (the cancel reason [ShutdownReason] on the record
// and in the event) and waits for every goroutine, or returns a
// [*ShutdownError] naming the tasks that did not stop. [Manager.Stop], the
// soft stop for a deploy, refuses new spawns, lets running tasks end on
// their own until its context ends, then ends what still runs interrupted,
// as a crash and its recovery would, and returns without waiting for
// functions that ignore their context (a later Shutdown waits for them).
//
// After a restart, [WithOnPendingOwner] calls the host once for each owner
// that has ends it never took, so the host can wake that thread;
// [Manager.UndeliveredOwners] lists them.
//
// # Packages
//
// This package is the runtime an agent builder uses. The model layer, what
// the model sees of its tasks at each step and the tools it acts on them
// with (agent.Plugin, agent.Tools), is package
// [github.com/bgtask/bgtask/agent], over this package's [Receiver]. A store
// author implements [store.Store] (package [github.com/bgtask/bgtask/store]:
// the interface, its optional ones and the reducer) on the record types of
// package [github.com/bgtask/bgtask/bgtype], which both sides share; a store
// imports those two, never this package. docs/packages.md lists every
// package and the import graph between them.
package bgtask
