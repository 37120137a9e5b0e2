package store

import (
	"context"
	"iter"

	"github.com/bgtask/bgtask/bgtype"
)

// Store persists task metadata. Every implementation applies actions with
// [Apply] inside one atomic commit, so every store keeps the same
// lifecycle invariants.
//
// Methods are safe for concurrent use. They return ctx's error if ctx ends
// first. A Store is given to a Manager with WithStore; the in-memory
// store is the default.
type Store interface {
	// Load returns a copy of the owner's snapshot: every task it still
	// keeps for owner. An owner without tasks has an empty snapshot.
	Load(ctx context.Context, owner string) (Snapshot, error)
	// Get returns one task's record, or an error matching ErrNotFound.
	Get(ctx context.Context, id string) (bgtype.TaskMeta, error)
	// Commit applies actions to the owner's snapshot, all or none. An
	// action that fails validation (see ErrInvalidAction) makes Commit
	// change nothing and return that error. Updates that Apply drops
	// are not errors. An action's At is applied as given: a Store never
	// sets it. Commit must not keep the actions or their slices
	// after it returns: the Manager reuses them.
	//
	// An owner's idempotency key (TaskMeta.IdempotencyKey, "" is none) is
	// on one record at a time: a Commit that would insert a record with a
	// key another record of the owner has (or that another new record of
	// the same Commit has) changes nothing and returns a
	// *DuplicateKeyError naming that record, matching ErrDuplicateKey. The
	// check is atomic with the insert (a unique index, or the store's
	// lock), so it holds across processes that share the store. Another
	// owner's keys are separate; removing the record frees its key.
	Commit(ctx context.Context, owner string, actions ...Action) error
	// List yields the owner's records whose status is one of statuses (all
	// of them when none is given), oldest first (CreatedAt, then ID). A
	// failure is yielded once, as the last pair, with a zero TaskMeta; an
	// unknown status yields an error matching ErrInvalidStatus. A stored
	// record that cannot be decoded does not end the listing: every good
	// record is yielded, then one error matching ErrCorrupt that names
	// each corrupt record's id.
	List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error]
	// Children yields the records whose Parent.TaskID is id, whatever their
	// owner, oldest first. An unknown id yields nothing.
	Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error]
}

// SharedStore is a Store that several runtime instances (processes) share,
// such as a database. The Manager uses it for what one process cannot do
// alone: reach a task that another instance runs, and hear of tasks that
// a reaper interrupted. Restore leaves other instances' records to the
// store's reaper.
type SharedStore interface {
	Store
	// RequestCancel asks the instance that runs task id to cancel it, with
	// its attached descendants there when tree is true, giving reason ("" for
	// none): that instance calls Runtime.CancelRequested with it, so the
	// cancelled records and events carry the reason as a local cancel's do.
	// It returns once the request is recorded, not when the task stops.
	RequestCancel(ctx context.Context, id string, tree bool, reason string) error
	// TakeNotices claims the owner's undelivered notices (events the store
	// made itself, such as EventInterrupted for a reaped task), oldest
	// first, and marks them delivered, so each is returned once. A notice
	// goes to the nearest live owner up the task's lineage: the events of
	// the tasks of a sub-agent that ended or is gone (records whose owner
	// is that sub-agent's id) come to the sub-agent's own owner.
	TakeNotices(ctx context.Context, owner string) ([]bgtype.Event, error)
}
