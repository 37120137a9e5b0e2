package bgtask

import "context"

// Store persists task metadata. Every implementation applies actions with
// [ApplyAction] inside one atomic commit, so every store keeps the same
// lifecycle invariants.
//
// Methods are safe for concurrent use. They return ctx's error if ctx ends
// first. A Store is given to a Manager with WithStore; the in-memory
// MemoryStore is the default.
type Store interface {
	// Load returns a copy of the owner's snapshot: every task it still
	// keeps for owner. An owner without tasks has an empty snapshot.
	Load(ctx context.Context, owner string) (Snapshot, error)
	// Get returns one task's record, or an error matching ErrNotFound.
	Get(ctx context.Context, id string) (TaskMeta, error)
	// Commit applies actions to the owner's snapshot, all or none. An
	// action that fails validation (see ErrInvalidAction) makes Commit
	// change nothing and return that error. Updates that ApplyAction drops
	// are not errors. Commit must not keep the actions or their slices
	// after it returns: the Manager reuses them.
	Commit(ctx context.Context, owner string, actions ...Action) error
}
