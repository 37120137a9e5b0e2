package bgtask

import (
	"bytes"
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
// every non-terminal record and, per owner, the most recently finished
// terminal records under a retention policy, so its memory is bounded by
// that policy and by the number of live tasks, not by the history.
//
// Use NewMemoryStore; the zero value is not usable. Safe for concurrent use.
type MemoryStore struct {
	retainPerOwner int
	retainFor      time.Duration

	mu     sync.RWMutex // guards the fields below
	clock  time.Time    // the time of the current commit, read once when a record turns terminal
	owners map[string]*memOwner
	byID   map[string]*TaskMeta
	aged   fifo[agedRef] // terminal records in finish order, for the age limit
}

type memOwner struct {
	tasks    map[string]*TaskMeta
	terminal fifo[string] // terminal ids in finish order, for the count limit
}

// agedRef points at a record that became terminal at a time, for the age
// limit; rec identifies the record instance, so a forgotten one is skipped.
type agedRef struct {
	id  string
	rec *TaskMeta
	at  time.Time
}

// MemoryOption configures a MemoryStore.
type MemoryOption func(*MemoryStore)

// RetainPerOwner keeps at most n terminal records per owner; the first to
// have been committed terminal go first. n <= 0 keeps none. Default
// DefaultRetainPerOwner.
func RetainPerOwner(n int) MemoryOption { return func(s *MemoryStore) { s.retainPerOwner = max(n, 0) } }

// RetainFor forgets terminal records committed terminal longer ago than d
// (by the store's clock, so a record without a finish time or with a skewed
// one is kept as long as any other). The age is checked on each commit that
// records a terminal status. d <= 0 disables the age limit. Default
// DefaultRetainFor.
func RetainFor(d time.Duration) MemoryOption { return func(s *MemoryStore) { s.retainFor = d } }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	s := &MemoryStore{
		retainPerOwner: DefaultRetainPerOwner,
		retainFor:      DefaultRetainFor,
		owners:         make(map[string]*memOwner),
		byID:           make(map[string]*TaskMeta),
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
	snap := Snapshot{Tasks: make(map[string]TaskMeta)}
	if o := s.owners[owner]; o != nil {
		for id, m := range o.tasks {
			snap.Tasks[id] = cloneMeta(*m)
		}
	}
	return snap, nil
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, id string) (TaskMeta, error) {
	if err := ctx.Err(); err != nil {
		return TaskMeta{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m := s.byID[id]; m != nil {
		return cloneMeta(*m), nil
	}
	return TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// Commit implements Store. Retention is applied after the actions.
func (s *MemoryStore) Commit(ctx context.Context, owner string, actions ...Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateCommit(owner, actions...); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[owner]
	if o == nil {
		o = &memOwner{tasks: make(map[string]*TaskMeta)}
		s.owners[owner] = o
	}
	for _, a := range actions {
		if a.Op == OpUpsert {
			s.upsert(o, &a.Tasks[0], nil)
		} else {
			s.applySlow(owner, o, a)
		}
	}
	s.retain(owner, o)
	s.clock = time.Time{}
	if len(o.tasks) == 0 {
		delete(s.owners, owner)
	}
	return nil
}

// commitOne is Commit of one upsert without the Action around it: the
// Manager's path. A new record is kept as own, when given (own == u),
// rather than a copy; the caller then reads it only through read, or its
// identity fields, which never change. u itself is not kept, so it may live
// on the caller's stack.
func (s *MemoryStore) commitOne(ctx context.Context, u, own *TaskMeta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.ID == "" || u.Owner == "" || !u.Status.Valid() { // the Manager's records; Result is JSON it encoded
		return wrapInvalid(u.invalid())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = u.FinishedAt // the Manager's clock, read moments ago; zero until the task ends
	o := s.owners[u.Owner]
	if o == nil {
		o = &memOwner{tasks: make(map[string]*TaskMeta)}
		s.owners[u.Owner] = o
	}
	s.upsert(o, u, own)
	s.retain(u.Owner, o)
	s.clock = time.Time{}
	return nil
}

// read copies a record kept by commitOne into dst, under the lock.
func (s *MemoryStore) read(rec, dst *TaskMeta) {
	s.mu.RLock()
	*dst = *rec
	s.mu.RUnlock()
}

// upsert is the hot path: one record, changed in place. A new record is own
// when given, else a copy of u.
func (s *MemoryStore) upsert(o *memOwner, u, own *TaskMeta) {
	cur := o.tasks[u.ID]
	if cur == nil {
		if s.byID[u.ID] != nil {
			return // the id belongs to another owner: never move it
		}
		if own != nil {
			cur = own
		} else {
			cur = new(TaskMeta)
			*cur = cloneMeta(*u)
		}
		o.tasks[u.ID] = cur
		s.byID[u.ID] = cur
	} else if cur.Status.IsTerminal() || !mergeUpsert(cur, u) {
		return
	}
	s.queueIfTerminal(o, cur)
}

// applySlow runs ReplaceAll and Remove through ApplyAction on a copy of the
// owner's records and puts the result back.
func (s *MemoryStore) applySlow(owner string, o *memOwner, a Action) {
	snap := Snapshot{Tasks: make(map[string]TaskMeta, len(o.tasks))}
	for id, m := range o.tasks {
		snap.Tasks[id] = *m
	}
	if a.Op == OpReplaceAll {
		kept := make([]TaskMeta, 0, len(a.Tasks))
		for _, t := range a.Tasks {
			if other := s.byID[t.ID]; other == nil || other.Owner == owner {
				kept = append(kept, t)
			}
		}
		a.Tasks = kept
	}
	ApplyAction(&snap, a)
	for id, old := range o.tasks {
		next, ok := snap.Tasks[id]
		if !ok {
			delete(o.tasks, id)
			delete(s.byID, id)
			continue
		}
		wasTerminal := old.Status.IsTerminal()
		if setMutable(old, &next) && !wasTerminal {
			s.queueIfTerminal(o, old)
		}
	}
	for id, next := range snap.Tasks {
		if o.tasks[id] == nil {
			c := next
			o.tasks[id] = &c
			s.byID[id] = &c
			s.queueIfTerminal(o, &c)
		}
	}
	o.terminal = fifo[string]{}
	for _, r := range s.aged.all() {
		if r.rec.Owner == owner && s.isAged(r) {
			o.terminal.push(r.id)
		}
	}
}

// queueIfTerminal queues a record that has just become terminal for
// retention.
func (s *MemoryStore) queueIfTerminal(o *memOwner, m *TaskMeta) {
	if m.Status.IsTerminal() {
		o.terminal.push(m.ID)
		if s.clock.IsZero() {
			s.clock = time.Now()
		}
		s.aged.push(agedRef{id: m.ID, rec: m, at: s.clock})
	}
}

// isAged reports whether r still refers to a retained terminal record.
func (s *MemoryStore) isAged(r agedRef) bool {
	return s.byID[r.id] == r.rec
}

// retain forgets terminal records beyond the count limit of owner, and those
// of any owner beyond the age limit.
func (s *MemoryStore) retain(owner string, o *memOwner) {
	for o.terminal.len() > s.retainPerOwner {
		id := o.terminal.pop()
		if s.aged.len() > 0 && s.aged.front().id == id {
			s.aged.pop() // the usual case, one owner at a time: keep the age queue short
		}
		s.forget(o, id)
	}
	if s.retainFor > 0 && !s.clock.IsZero() { // only commits that end tasks read the clock
		cutoff := s.clock.Add(-s.retainFor)
		for s.aged.len() > 0 && s.aged.front().at.Before(cutoff) {
			r := s.aged.pop()
			if !s.isAged(r) {
				continue
			}
			ro := s.owners[r.rec.Owner]
			s.forget(ro, r.id)
			if ro.terminal.len() > 0 && ro.terminal.front() == r.id {
				ro.terminal.pop() // the usual case: both queues are in commit order
			} else {
				ro.terminal.filter(func(id string) bool { return id != r.id })
			}
			if len(ro.tasks) == 0 && r.rec.Owner != owner {
				delete(s.owners, r.rec.Owner)
			}
		}
	}
	s.compactAged()
}

func (s *MemoryStore) forget(o *memOwner, id string) {
	delete(o.tasks, id)
	delete(s.byID, id)
}

// compactAged drops references to records already forgotten, so the age
// queue stays proportional to what is retained.
func (s *MemoryStore) compactAged() {
	if s.aged.len() >= 64 && s.aged.len() > 2*len(s.byID) {
		s.aged.filter(s.isAged)
	}
}

// setMutable writes into cur the fields of next that the reducer may change,
// if any differs, and reports whether it wrote. Identity fields are never
// written: a Manager reads them without the store's lock.
func setMutable(cur, next *TaskMeta) bool {
	if cur.Description == next.Description && cur.Status == next.Status && cur.Error == next.Error &&
		cur.Stack == next.Stack && bytes.Equal(cur.Result, next.Result) && cur.Instance == next.Instance &&
		cur.Attempt == next.Attempt && cur.CreatedAt.Equal(next.CreatedAt) &&
		cur.StartedAt.Equal(next.StartedAt) && cur.FinishedAt.Equal(next.FinishedAt) && sameInput(cur.Input, next.Input) {
		return false
	}
	cur.Description, cur.Status, cur.Error, cur.Stack = next.Description, next.Status, next.Error, next.Stack
	cur.Result, cur.Instance, cur.Attempt = next.Result, next.Instance, next.Attempt
	cur.CreatedAt, cur.StartedAt, cur.FinishedAt = next.CreatedAt, next.StartedAt, next.FinishedAt
	cur.Input = next.Input
	return true
}

func sameInput(a, b *InputRequest) bool {
	return a == b || a != nil && b != nil && *a == *b
}
