package bgtask

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// Owner is a Manager seen by one owner (a thread or agent id): every method
// acts on that owner's tasks only, and another owner's task is reported as
// not found, never revealed. Model-facing tools use an Owner.
//
// Get it with Manager.Owner; it is a small value, cheap to copy. The zero
// value is not usable. Every method of a view whose owner id is empty or
// blank (only white space) returns ErrInvalidArgument (blank owner) before anything else: no
// owner id means "every owner". The Manager's own calls that reach every
// owner (Manager.Get, Cancel, CancelTree, CancelAll, Wait) are an
// administrator's; an Owner cannot reach them.
type Owner struct {
	m  *Manager
	id string
}

// Owner returns the view of the tasks of the owner id.
func (m *Manager) Owner(id string) Owner { return Owner{m: m, id: id} }

// ID returns the owner id.
func (o Owner) ID() string { return o.id }

// Spawn starts fn as a task of this owner and returns its id once its
// running (or queued) record is committed. ctx is used for that commit and
// for lineage: a spawn inside a task links to it, a spawn inside a tool call
// (WithToolCall) links to the call. fn does not run with ctx: it gets its own
// context, cancelled only through the Manager, that keeps ctx's values (a
// trace span, a logger, credentials) but not its deadline, its cancellation
// or its tool call (ToolCallFromContext is false in the task; the task's
// Parent holds the call).
//
// Errors, each matched with errors.Is, leave nothing persisted and nothing
// started, so the owner never hears of the task: ErrClosed, ErrInvalidArgument (blank owner),
// ErrInvalidArgument (a nil fn, a bad name or wake policy), ErrDuplicateName, ErrNotFound
// (parent), ErrCanceled (parent), ErrCanceled (run), ErrLimit (lineage depth), ErrLimit
// (fan-out), ErrLimit, the cause of ctx's end during the commit (ErrShutdown for a spawn
// inside a task that a Shutdown cancelled), or the Store's commit error. A durable Store may
// have committed the record although its commit returned an error: Spawn removes it before
// it returns. Only if the Store cannot be written for that either is the record left to
// recovery, which interrupts it, and the owner hears of it once.
func (o Owner) Spawn(ctx context.Context, fn Func, opts ...SpawnOption) (string, error) {
	return o.m.spawn(ctx, o.id, fn, false, opts)
}

// SpawnAgent is Spawn for a sub-agent: the task also gets its own Inbox
// (Task.Inbox) that receives the messages sent to it and the events of the
// tasks it owns (Task.Agent). Its default type is "sub_agent".
func (o Owner) SpawnAgent(ctx context.Context, fn Func, opts ...SpawnOption) (string, error) {
	return o.m.spawn(ctx, o.id, fn, true, opts)
}

// Get returns the record of one of the owner's tasks, or ErrNotFound.
func (o Owner) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if !bgtype.ValidOwner(o.id) {
		return bgtype.TaskMeta{}, bgtype.ErrInvalidOwner
	}
	meta, err := o.m.store.Get(ctx, id)
	if err != nil {
		return bgtype.TaskMeta{}, err
	}
	if meta.Owner != o.id {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return meta, nil
}

// List returns the owner's tasks in creation order, only those with one of
// the given statuses when any is given, as store.Store.List does: a
// failure is yielded as the last pair, with a zero record (an invalid
// owner, ErrInvalidArgument, or status, bgtype.ErrInvalidStatus, before any
// record). The records are read from the Store, all at once, each time the
// sequence is ranged over, so the loop's body may call the Manager (cancel
// what it lists, say) and a break costs nothing more.
func (o Owner) List(ctx context.Context, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return o.ListTagged(ctx, "", statuses...)
}

// ListTagged is List restricted to the tasks that carry tag (WithTags); an
// empty tag restricts nothing.
func (o Owner) ListTagged(ctx context.Context, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		tasks, err := o.listTagged(ctx, tag, statuses)
		for _, meta := range tasks {
			if !yield(meta, nil) {
				return
			}
		}
		if err != nil {
			yield(bgtype.TaskMeta{}, err)
		}
	}
}

// listTagged reads the owner's tasks that ListTagged yields, and the
// failure that ended the read.
func (o Owner) listTagged(ctx context.Context, tag string, statuses []bgtype.Status) ([]bgtype.TaskMeta, error) {
	if !bgtype.ValidOwner(o.id) {
		return nil, bgtype.ErrInvalidOwner
	}
	if err := memstore.CheckStatuses(statuses); err != nil {
		return nil, err
	}
	var tasks []bgtype.TaskMeta
	for meta, err := range store.ListTagged(ctx, o.m.store, o.id, tag, statuses...) {
		if err != nil {
			return tasks, err
		}
		tasks = append(tasks, meta)
	}
	return tasks, nil
}

// Cancel asks one of the owner's tasks to stop (not its descendants) and
// returns 1 if it signalled a live task, 0 if the task had already ended or
// was already signalled. ErrNotFound for an unknown id or another owner's.
// WithReason says why (see Manager.Cancel).
func (o Owner) Cancel(ctx context.Context, id string, opts ...CancelOption) (int, error) {
	if !bgtype.ValidOwner(o.id) {
		return 0, bgtype.ErrInvalidOwner
	}
	return o.m.cancelTask(ctx, ownerReach(o.id), id, false, cancelReason(opts))
}

// CancelTree cancels one of the owner's tasks and its attached descendants
// (whoever owns them: a sub-agent's own tasks are its descendants), and
// returns how many live tasks it signalled. Its cost is the size of the
// subtree. ErrNotFound for an unknown id or another owner's. WithReason
// says why, to every task it cancels.
func (o Owner) CancelTree(ctx context.Context, id string, opts ...CancelOption) (int, error) {
	if !bgtype.ValidOwner(o.id) {
		return 0, bgtype.ErrInvalidOwner
	}
	return o.m.cancelTask(ctx, ownerReach(o.id), id, true, cancelReason(opts))
}

// CancelAll cancels every live task of the owner, detached ones included,
// with cause ErrCanceled, and returns how many it signalled. WithReason
// says why, to every task it cancels. Errors, in this order:
// ErrInvalidArgument (blank owner) for an empty or blank owner, ErrClosed.
func (o Owner) CancelAll(opts ...CancelOption) (int, error) {
	return o.m.cancelOwner(o.id, cancelReason(opts))
}

// CancelRun cancels the owner's run runID: every attached task of this
// owner's run, and their attached descendants, with cause ErrCanceled (run).
// It returns how many live tasks it signalled: 0 when the run has none, or
// when it was already cancelled. From then on a spawn of this owner into the
// run, a nested one included, fails with ErrCanceled (run); the check is made
// under the same lock as the registration, so no spawn slips through.
// Another owner's run of the same id is untouched. A cancelled run is
// remembered for Tuning.CanceledRunsKept runs. Errors, in this order:
// ErrInvalidArgument (blank owner), ErrClosed, ErrInvalidArgument for an empty run id.
// WithReason says why, to every task it cancels (the cause then matches
// ErrCanceled (run) and ErrCanceled).
//
// With a SharedStore, the run's attached tasks that other live instances
// run are found in the store and cancelled there with their attached
// descendants (SharedStore.RequestCancel, with the reason), and count
// one each once the request is recorded; a store failure is returned with
// the count so far. The Receiver whose open run it is hears of the cancel
// (ReceiverConfig.OnRunCanceled): the owner's here, or, with a store that
// keeps runs across instances (store.RunLeaser), the one on the instance
// that holds the run, whose Manager then refuses later spawns into it too.
// CancelRun takes no context: those store calls are not bounded by one
// (StopRun takes one).
func (o Owner) CancelRun(runID string, opts ...CancelOption) (int, error) {
	n, _, err := o.cancelRunCtx(context.Background(), runID, cancelReason(opts))
	return n, err
}

// cancelRunCtx is CancelRun with ctx bounding the store calls; it also
// reports whether the run was already cancelled here.
func (o Owner) cancelRunCtx(ctx context.Context, runID, reason string) (n int, already bool, err error) {
	switch {
	case !bgtype.ValidOwner(o.id):
		return 0, false, bgtype.ErrInvalidOwner
	case o.m.closed.Load():
		return 0, false, ErrClosed
	case runID == "":
		return 0, false, errEmptyRun
	}
	n, already = o.m.cancelRun(runKey{owner: o.id, run: runID}, reason)
	o.m.tellRunCanceled(o.id, runID, reason)
	k, err := o.m.cancelRunElsewhere(ctx, o.id, runID, reason)
	return n + k, already && k == 0, err
}

// Send delivers a message to one of the owner's live sub-agents, as a custom
// event of type EventTypeMessage in the sub-agent's inbox. Errors, in the
// order they are checked: ErrNotFound (unknown, or another owner's),
// ErrTerminal (a *StatusError with the status), ErrNotSubAgent,
// ErrInboxClosed. An empty content is allowed. It returns the id of the
// message in the task's history (Owner.Messages); a message that answers
// an input request (see Manager.Send) has one too.
func (o Owner) Send(ctx context.Context, id string, msg bgtype.Message) (string, error) {
	if !bgtype.ValidOwner(o.id) {
		return "", bgtype.ErrInvalidOwner
	}
	msgID, err := o.m.sendMessage(ctx, o.id, id, msg)
	if errors.Is(err, errNotOwner) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return msgID, err
}

// Wait blocks until one of the owner's tasks is terminal and returns its
// final record; see Manager.Wait.
func (o Owner) Wait(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if !bgtype.ValidOwner(o.id) {
		return bgtype.TaskMeta{}, bgtype.ErrInvalidOwner
	}
	return withTaskError(o.m.wait(ctx, ownerReach(o.id), id))
}

// Inbox returns the owner's inbox; see Manager.Inbox.
func (o Owner) Inbox() (*Inbox, error) { return o.m.Inbox(o.id) }
