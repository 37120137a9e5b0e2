// Idempotent spawn: a key that makes a repeated spawn return the task the
// first one started.

package bgtask

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIdempotencyKeyBytes is the longest idempotency key (WithIdempotencyKey).
const MaxIdempotencyKeyBytes = 256

// WithIdempotencyKey makes the spawn idempotent for its owner: while the
// owner has a record with key (any status, until retention forgets it), a
// spawn with the same key starts nothing and returns that record's task id
// with a nil error. Another owner's keys are separate. The Store enforces
// it atomically, so it holds across processes sharing a store; a spawn that
// fails before its record is committed leaves the key free.
//
// The id returned for an existing task can be used like any other: Get
// and the tools read its record wherever it runs; Wait waits for it when
// this Manager runs it, and otherwise returns its record (ErrNotLive while
// another process still runs it); Cancel reaches it through a SharedStore.
// The key is kept on the record (TaskMeta.IdempotencyKey) and shown by
// get_task. A key is non-blank UTF-8 without control characters, at most
// MaxIdempotencyKeyBytes bytes; otherwise the spawn fails with an error
// matching ErrInvalidArgument.
func WithIdempotencyKey(key string) SpawnOption {
	return func(c *spawnConfig) { c.key, c.keySet = key, true }
}

// checkKey reports why key cannot be an idempotency key.
func checkKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return invalidArgument("idempotency key is blank")
	case len(key) > MaxIdempotencyKeyBytes:
		return invalidArgument("idempotency key longer than %d bytes", MaxIdempotencyKeyBytes)
	case !utf8.ValidString(key):
		return invalidArgument("idempotency key is not UTF-8")
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return invalidArgument("idempotency key has control characters")
	}
	return nil
}

// keyRef is an owner's idempotency key.
type keyRef struct{ owner, key string }

// keyClaim is a keyed spawn of this Manager whose task is live: a second
// spawn with its key waits for its first commit (done) instead of racing
// it, then returns its id if it committed, or tries again if it failed.
type keyClaim struct {
	t    *Task
	done chan struct{} // closed once the first commit settled
	ok   bool          // it committed; set before done is closed
}

// awaitClaim waits until c's first commit settled and returns its task id,
// or "" if it failed (the key is free again).
func awaitClaim(ctx context.Context, c *keyClaim) (string, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		return "", fmt.Errorf("bgtask: spawn: %w", context.Cause(ctx))
	}
	if c.ok {
		return c.t.rec.ID, nil
	}
	return "", nil
}

// settleClaim records the outcome of t's first commit for the spawns that
// wait on its key; a failed one gives the key back.
func (m *Manager) settleClaim(t *Task, c *keyClaim, ok bool) {
	if c == nil {
		return
	}
	m.mu.Lock()
	c.ok = ok
	if !ok && m.keys[keyRef{t.rec.Owner, t.rec.Key()}] == c {
		delete(m.keys, keyRef{t.rec.Owner, t.rec.Key()})
	}
	m.mu.Unlock()
	close(c.done)
}

// releaseKey forgets t's claim when it stops being live: the Store's record
// keeps the key from then on. Called with m.mu held.
func (m *Manager) releaseKey(t *Task) {
	if k := t.rec.Key(); k != "" {
		ref := keyRef{t.rec.Owner, k}
		if c := m.keys[ref]; c != nil && c.t == t {
			delete(m.keys, ref)
		}
	}
}
