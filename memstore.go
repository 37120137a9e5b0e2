package bgtask

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Default retention of a MemoryStore.
const (
	DefaultRetainPerOwner = 1000
	DefaultRetainFor      = 24 * time.Hour
)

// MemoryStore is the in-memory Store, the default of a Manager. It keeps
// every non-terminal record and, per owner, the most recent terminal records
// under a retention policy, so its memory is bounded by that policy and by
// the number of live tasks, not by the history.
//
// Use NewMemoryStore; the zero value is not usable. Safe for concurrent use.
type MemoryStore struct {
	retainPerOwner int
	retainFor      time.Duration

	mu     sync.RWMutex // guards the fields below
	owners map[string]*memOwner
	byID   map[string]string // task id -> owner
	aged   []agedRef         // terminal records in finish order, for the age limit
}

type memOwner struct {
	snap     Snapshot
	terminal []string // terminal ids in finish order, for the count limit
}

type agedRef struct {
	owner, id string
	at        time.Time
}

// MemoryOption configures a MemoryStore.
type MemoryOption func(*MemoryStore)

// RetainPerOwner keeps at most n terminal records per owner (the oldest
// finished go first). n <= 0 keeps none. Default DefaultRetainPerOwner.
func RetainPerOwner(n int) MemoryOption { return func(s *MemoryStore) { s.retainPerOwner = max(n, 0) } }

// RetainFor forgets terminal records that finished longer ago than d, checked
// on each commit. d <= 0 disables the age limit. Default DefaultRetainFor.
func RetainFor(d time.Duration) MemoryOption { return func(s *MemoryStore) { s.retainFor = d } }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	s := &MemoryStore{
		retainPerOwner: DefaultRetainPerOwner,
		retainFor:      DefaultRetainFor,
		owners:         make(map[string]*memOwner),
		byID:           make(map[string]string),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Load implements Store.
func (s *MemoryStore) Load(ctx context.Context, owner string) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.owners[owner]
	if o == nil {
		return Snapshot{Tasks: map[string]TaskMeta{}}, nil
	}
	return o.snap.clone(), nil
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, id string) (TaskMeta, error) {
	if err := ctx.Err(); err != nil {
		return TaskMeta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if owner, ok := s.byID[id]; ok {
		if m, ok := s.owners[owner].snap.Tasks[id]; ok {
			return cloneMeta(m), nil
		}
	}
	return TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// Commit implements Store. Retention is applied after the actions.
func (s *MemoryStore) Commit(ctx context.Context, owner string, actions ...Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if owner == "" {
		return ErrInvalidOwner
	}
	for _, a := range actions {
		if err := a.validate(owner); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[owner]
	if o == nil {
		o = &memOwner{snap: Snapshot{Tasks: make(map[string]TaskMeta)}}
		s.owners[owner] = o
	}
	for _, a := range actions {
		s.apply(owner, o, a)
	}
	s.retain(owner, o)
	if len(o.snap.Tasks) == 0 {
		delete(s.owners, owner)
	}
	return nil
}

// apply runs the reducer and keeps the id index and the retention queues in
// step with what it changed.
func (s *MemoryStore) apply(owner string, o *memOwner, a Action) {
	if a.Op == OpUpsert {
		// The hot path: one record, no copy of the snapshot.
		u := a.Tasks[0]
		old, existed := o.snap.Tasks[u.ID]
		if !existed {
			if _, taken := s.byID[u.ID]; taken {
				return // the id belongs to another owner: never move it
			}
		}
		ApplyAction(&o.snap, a)
		s.track(owner, o, u.ID, existed && old.Status.IsTerminal())
		return
	}
	wasTerminal := make(map[string]bool, len(o.snap.Tasks))
	for id, m := range o.snap.Tasks {
		wasTerminal[id] = m.Status.IsTerminal()
	}
	if a.Op == OpReplaceAll {
		kept := a.Tasks[:0:0]
		for _, t := range a.Tasks {
			if other, taken := s.byID[t.ID]; !taken || other == owner {
				kept = append(kept, t)
			}
		}
		a.Tasks = kept
	}
	ApplyAction(&o.snap, a)
	for id := range wasTerminal {
		if _, ok := o.snap.Tasks[id]; !ok {
			delete(s.byID, id)
		}
	}
	for id := range o.snap.Tasks {
		s.track(owner, o, id, wasTerminal[id])
	}
	if len(o.terminal) > 0 {
		o.terminal = o.terminal[:0:0]
		for _, r := range s.aged {
			if r.owner == owner {
				if m, ok := o.snap.Tasks[r.id]; ok && m.Status.IsTerminal() && m.FinishedAt.Equal(r.at) {
					o.terminal = append(o.terminal, r.id)
				}
			}
		}
	}
}

// track indexes id after a change and queues it for retention when it has
// just become terminal.
func (s *MemoryStore) track(owner string, o *memOwner, id string, wasTerminal bool) {
	m, ok := o.snap.Tasks[id]
	if !ok {
		return
	}
	s.byID[id] = owner
	if m.Status.IsTerminal() && !wasTerminal {
		o.terminal = append(o.terminal, id)
		s.aged = append(s.aged, agedRef{owner: owner, id: id, at: m.FinishedAt})
	}
}

// retain forgets terminal records beyond the count limit of owner, and those
// of any owner beyond the age limit.
func (s *MemoryStore) retain(owner string, o *memOwner) {
	for len(o.terminal) > s.retainPerOwner {
		s.forget(owner, o, o.terminal[0])
		o.terminal[0] = ""
		o.terminal = o.terminal[1:]
	}
	if s.retainFor <= 0 {
		s.compactAged()
		return
	}
	cutoff := time.Now().Add(-s.retainFor)
	for len(s.aged) > 0 && s.aged[0].at.Before(cutoff) {
		r := s.aged[0]
		s.aged[0] = agedRef{}
		s.aged = s.aged[1:]
		ro := s.owners[r.owner]
		if ro == nil {
			continue
		}
		if m, ok := ro.snap.Tasks[r.id]; ok && m.Status.IsTerminal() && m.FinishedAt.Equal(r.at) {
			s.forget(r.owner, ro, r.id)
			ro.terminal = removeString(ro.terminal, r.id)
			if len(ro.snap.Tasks) == 0 && r.owner != owner {
				delete(s.owners, r.owner)
			}
		}
	}
	s.compactAged()
}

func (s *MemoryStore) forget(owner string, o *memOwner, id string) {
	delete(o.snap.Tasks, id)
	if s.byID[id] == owner {
		delete(s.byID, id)
	}
}

// compactAged drops references to records already forgotten, so the age
// queue stays proportional to what is retained.
func (s *MemoryStore) compactAged() {
	if len(s.aged) < 64 || len(s.aged) <= 2*len(s.byID) {
		return
	}
	kept := make([]agedRef, 0, len(s.byID))
	for _, r := range s.aged {
		if o := s.owners[r.owner]; o != nil {
			if m, ok := o.snap.Tasks[r.id]; ok && m.Status.IsTerminal() && m.FinishedAt.Equal(r.at) {
				kept = append(kept, r)
			}
		}
	}
	s.aged = kept
}

func removeString(ids []string, id string) []string {
	for i, v := range ids {
		if v == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}
