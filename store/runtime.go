package store

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
)

// Runtime is what a store that carries out requests on behalf of other
// processes needs of the runtime that uses it: a SharedStore (or a file
// several processes share) hears that a task this process runs is to be
// cancelled, or that this process lost its registration. A
// *bgtask.Manager's Runtime method returns it (st.Start(ctx, m.Runtime()));
// a store takes it in its Start method, so a store imports this package and
// not the runtime. It is the stores' view of the runtime, kept off the
// Manager an agent builder reads.
type Runtime interface {
	// Instance returns the runtime instance id the Manager writes on the
	// records of the tasks it runs.
	Instance() string
	// CancelRequested cancels task id if this runtime runs it (with its
	// attached descendants when tree is true), recording reason as the
	// cancel reason ("" for none), and returns how many tasks it
	// signalled. An unknown task is not an error: it returns 0.
	CancelRequested(ctx context.Context, id string, tree bool, reason string) (int, error)
	// CancelAll cancels every task this runtime runs, with cause as their
	// context's cause, and returns how many it signalled.
	CancelAll(cause error) int
	// MessageRequested hands msg, sent by owner in another process
	// (MessageCarrier.SendMessage), to task id if this runtime runs it: into
	// its inbox, or as the answer to its input request (msg.InReplyTo), as
	// a local send does, and returns the outcome to carry back. It never
	// carries the message on to another instance. It may block while the
	// task's inbox or input request takes the message, until ctx ends.
	MessageRequested(ctx context.Context, owner, id string, msg bgtype.Message) Delivery
}

// RunCancelHandler is a Runtime that carries out a cancel of an owner's
// open run asked on another instance (RunLeaser.RequestRunCancel):
// The Runtime of a *bgtask.Manager implements it. A store calls it from its own goroutine,
// with no lock of its own held, once per request (at least once: a request
// may be handed again after a failure).
type RunCancelHandler interface {
	// RunCancelRequested cancels owner's run run with reason, as
	// Owner.CancelRun does on this runtime, and tells the owner's
	// Receiver, whose open run it is, that the run was stopped. It returns
	// how many tasks it signalled.
	RunCancelRequested(ctx context.Context, owner, run, reason string) int
}

// OwnerNotifier is a Runtime that hears, from its store, of owners that
// have something new to hear that no task of this runtime sent: a
// SharedStore's reaper interrupted the tasks of an instance that is gone
// and recorded notices for their owners. The Runtime of a *bgtask.Manager
// implements it (its WithOnPendingOwner callback is called for
// each owner). A store calls it after the commit that recorded the notices, with no lock of its own held,
// from its own goroutine.
type OwnerNotifier interface {
	// OwnersNoticed tells the runtime that owners (each once, as the
	// notices address them: a live sub-agent's task id included) have
	// notices to take. It must not block for long.
	OwnersNoticed(owners []string)
}
