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
	DefaultRetainTotal    = 100_000
	DefaultRetainFor      = 24 * time.Hour
)

// MemoryStore is the in-memory Store, the default of a Manager. It keeps
// every non-terminal record and, of the terminal ones, the most recently
// finished under a retention policy: at most DefaultRetainPerOwner (1000)
// per owner, at most DefaultRetainTotal (100,000) across all owners, and
// none committed terminal more than DefaultRetainFor (24h) ago; see
// WithRetainPerOwner, WithRetainTotal and WithRetainFor. The oldest terminal records go
// first, and a forgotten record is released at once: the store keeps no
// reference to it. So its memory is bounded by that policy and by the
// number of live tasks, not by the history or the number of owners (an
// owner without records costs nothing).
//
// Use NewMemoryStore; the zero value is not usable. Safe for concurrent
// use; retention runs inside Commit, under the store's lock, and costs in
// proportion to the records it forgets.
type MemoryStore struct {
	retainPerOwner int
	retainTotal    int
	retainFor      time.Duration

	mu     sync.RWMutex // guards the fields below
	clock  time.Time    // the time of the current commit, read once when a record turns terminal
	owners map[string]*memOwner
	byID   map[string]*memEntry
	done   memList              // every terminal record, in the order it was committed terminal (storeLinks)
	keys   map[keyRef]*memEntry // records by owner and idempotency key
}

// memOwner is an owner's records: live ones, and terminal ones in the order
// they were committed terminal (ownLinks).
type memOwner struct {
	live, done memList
}

func (o *memOwner) empty() bool { return o.live.n == 0 && o.done.n == 0 }

// each calls f with every record of the owner.
func (o *memOwner) each(f func(*TaskMeta)) {
	for _, l := range [2]*memList{&o.live, &o.done} {
		for e := l.head; e != nil; e = e.owner.next {
			f(&e.meta)
		}
	}
}

// MemoryOption configures a MemoryStore.
type MemoryOption func(*MemoryStore)

// WithRetainPerOwner keeps at most n terminal records per owner; the first to
// have been committed terminal go first. n <= 0 keeps none. Default
// DefaultRetainPerOwner (1000).
func WithRetainPerOwner(n int) MemoryOption {
	return func(s *MemoryStore) { s.retainPerOwner = max(n, 0) }
}

// WithRetainTotal keeps at most n terminal records across all owners; the first
// to have been committed terminal, whatever their owner, go first. It
// applies on top of WithRetainPerOwner and WithRetainFor. n <= 0 keeps none.
// Default DefaultRetainTotal (100,000).
func WithRetainTotal(n int) MemoryOption { return func(s *MemoryStore) { s.retainTotal = max(n, 0) } }

// WithRetainFor forgets terminal records committed terminal longer ago than d
// (by the store's clock, so a record without a finish time or with a skewed
// one is kept as long as any other). The age is checked on each commit that
// records a terminal status. d <= 0 disables the age limit. Default
// DefaultRetainFor (24h).
func WithRetainFor(d time.Duration) MemoryOption { return func(s *MemoryStore) { s.retainFor = d } }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts ...MemoryOption) *MemoryStore {
	s := &MemoryStore{
		retainPerOwner: DefaultRetainPerOwner,
		retainTotal:    DefaultRetainTotal,
		retainFor:      DefaultRetainFor,
		owners:         make(map[string]*memOwner),
		byID:           make(map[string]*memEntry),
		keys:           make(map[keyRef]*memEntry),
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
		o.each(func(m *TaskMeta) { snap.Tasks[m.ID] = cloneMeta(*m) })
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
	if e := s.byID[id]; e != nil {
		return cloneMeta(e.meta), nil
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
	if err := s.checkKeys(owner, actions); err != nil {
		return err
	}
	o := s.owner(owner)
	for _, a := range actions {
		switch a.Op {
		case OpUpsert:
			s.upsert(o, &a.Tasks[0], nil, a.At)
		case OpAnnounce:
			s.announce(owner, a.IDs)
		default:
			s.applySlow(owner, o, a)
		}
	}
	s.retain(owner, o)
	s.clock = time.Time{}
	return nil
}

// announce is ApplyAction's Announce on the records in place: it touches
// only the owner's terminal records among ids.
func (s *MemoryStore) announce(owner string, ids []string) {
	for _, id := range ids {
		if e := s.byID[id]; e != nil && e.meta.Owner == owner && e.meta.Status.IsTerminal() {
			e.meta.Announced = true
		}
	}
}

// commitOne is Commit of one upsert without the Action around it: the
// Manager's path. A new record is kept in own, when given (u ==
// &own.meta), rather than in a copy; the caller then reads it only through
// read, or its identity fields, which never change. u itself is not kept,
// so it may live on the caller's stack.
func (s *MemoryStore) commitOne(ctx context.Context, u *TaskMeta, own *memEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.ID == "" || u.Owner == "" || !u.Status.Valid() { // the Manager's records; Result is JSON it encoded
		return wrapInvalid(u.invalid(false))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.IdempotencyKey != "" && s.byID[u.ID] == nil {
		if e := s.keys[keyRef{u.Owner, u.IdempotencyKey}]; e != nil {
			return &DuplicateKeyError{Key: u.IdempotencyKey, TaskID: e.meta.ID}
		}
	}
	s.clock = u.FinishedAt // the Manager's clock, read moments ago; zero until the task ends
	o := s.owner(u.Owner)
	s.upsert(o, u, own, time.Time{})
	s.retain(u.Owner, o)
	s.clock = time.Time{}
	return nil
}

// commitEdit copies rec, a record kept by commitOne, into u, applies edit
// and commits it, all under one lock. It is commitOne for the Manager's
// own terminal records, which are valid by construction.
func (s *MemoryStore) commitEdit(rec, u *TaskMeta, edit *terminalEdit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*u = *rec
	edit.apply(u)
	s.clock = u.FinishedAt
	o := s.owner(u.Owner)
	s.upsert(o, u, nil, time.Time{})
	s.retain(u.Owner, o)
	s.clock = time.Time{}
}

// owner returns the records of owner, making them the first time.
func (s *MemoryStore) owner(owner string) *memOwner {
	o := s.owners[owner]
	if o == nil {
		o = new(memOwner)
		s.owners[owner] = o
	}
	return o
}

// read copies a record kept by commitOne into dst, under the lock.
func (s *MemoryStore) read(rec, dst *TaskMeta) {
	s.mu.RLock()
	*dst = *rec
	s.mu.RUnlock()
}

// upsert is the hot path: one record, changed in place. A new record is own
// when given, else a copy of u. at is the action's commit time.
func (s *MemoryStore) upsert(o *memOwner, u *TaskMeta, own *memEntry, at time.Time) {
	e := s.byID[u.ID]
	if e == nil {
		if u.Status == "" {
			return // an update without a status has nothing to enrich
		}
		if own == nil {
			own = &memEntry{meta: cloneMeta(*u)}
		}
		settleNew(&own.meta, at)
		s.add(o, own)
		return
	}
	if e.meta.Owner != u.Owner {
		return // another owner's id is never moved
	}
	wasTerminal := e.meta.Status.IsTerminal()
	if !mergeUpsert(&e.meta, u, at) || wasTerminal {
		return // dropped, or a terminal record enriched: it stays where it is
	}
	if e.meta.Status.IsTerminal() {
		o.live.remove(e, ownLinks)
		s.markTerminal(o, e)
	}
}

// add keeps e, a record new to the store, as one of o's.
func (s *MemoryStore) add(o *memOwner, e *memEntry) {
	s.byID[e.meta.ID] = e
	if k := e.meta.IdempotencyKey; k != "" {
		s.keys[keyRef{e.meta.Owner, k}] = e
	}
	if e.meta.Status.IsTerminal() {
		s.markTerminal(o, e)
	} else {
		o.live.pushBack(e, ownLinks)
	}
}

// markTerminal puts e, on no list, at the end of the terminal lists.
func (s *MemoryStore) markTerminal(o *memOwner, e *memEntry) {
	if s.clock.IsZero() {
		s.clock = time.Now()
	}
	e.at = s.clock.UnixNano()
	o.done.pushBack(e, ownLinks)
	s.done.pushBack(e, storeLinks)
}

// applySlow runs ReplaceAll and Remove through ApplyAction on a copy of the
// owner's records and puts the result back.
func (s *MemoryStore) applySlow(owner string, o *memOwner, a Action) {
	snap := Snapshot{Tasks: make(map[string]TaskMeta, o.live.n+o.done.n)}
	o.each(func(m *TaskMeta) { snap.Tasks[m.ID] = *m })
	if a.Op == OpReplaceAll {
		kept := make([]TaskMeta, 0, len(a.Tasks))
		for _, t := range a.Tasks {
			if other := s.byID[t.ID]; other == nil || other.meta.Owner == owner {
				kept = append(kept, t)
			}
		}
		a.Tasks = kept
	}
	ApplyAction(&snap, a)
	var entries []*memEntry
	for _, l := range [2]*memList{&o.live, &o.done} {
		for e := l.head; e != nil; e = e.owner.next {
			entries = append(entries, e)
		}
	}
	for _, e := range entries {
		next, ok := snap.Tasks[e.meta.ID]
		delete(snap.Tasks, e.meta.ID)
		wasTerminal := e.meta.Status.IsTerminal()
		switch {
		case !ok:
			s.drop(o, e)
		case setMutable(&e.meta, &next) && !wasTerminal && e.meta.Status.IsTerminal():
			o.live.remove(e, ownLinks)
			s.markTerminal(o, e)
		}
	}
	added := make([]TaskMeta, 0, len(snap.Tasks))
	for _, m := range snap.Tasks {
		added = append(added, m)
	}
	SortMetas(added) // new terminal records queue in a stable order
	for i := range added {
		s.add(o, &memEntry{meta: added[i]})
	}
}

// drop forgets e, one of o's records, and unlinks it from every list.
func (s *MemoryStore) drop(o *memOwner, e *memEntry) {
	if e.meta.Status.IsTerminal() { // a terminal record stays terminal
		o.done.remove(e, ownLinks)
		s.done.remove(e, storeLinks)
	} else {
		o.live.remove(e, ownLinks)
	}
	delete(s.byID, e.meta.ID)
	if k := e.meta.IdempotencyKey; k != "" && s.keys[keyRef{e.meta.Owner, k}] == e {
		delete(s.keys, keyRef{e.meta.Owner, k})
	}
}

// checkKeys reports a *DuplicateKeyError if the actions would insert a
// record whose idempotency key the owner already has, in the store or
// earlier in the same actions. Called with s.mu held, before anything is
// applied, so a Commit that fails changes nothing.
func (s *MemoryStore) checkKeys(owner string, actions []Action) error {
	var fresh map[string]string // key -> id, of the records these actions insert
	for _, a := range actions {
		if a.Op != OpUpsert && a.Op != OpReplaceAll {
			continue
		}
		for i := range a.Tasks {
			t := &a.Tasks[i]
			if t.IdempotencyKey == "" || t.Status == "" || s.byID[t.ID] != nil {
				continue
			}
			if e := s.keys[keyRef{owner, t.IdempotencyKey}]; e != nil {
				return &DuplicateKeyError{Key: t.IdempotencyKey, TaskID: e.meta.ID}
			}
			if id, ok := fresh[t.IdempotencyKey]; ok && id != t.ID {
				return &DuplicateKeyError{Key: t.IdempotencyKey, TaskID: id}
			}
			if fresh == nil {
				fresh = make(map[string]string)
			}
			fresh[t.IdempotencyKey] = t.ID
		}
	}
	return nil
}

// retain forgets terminal records beyond the count limit of owner, then,
// across all owners, those beyond the age limit and the total limit, oldest
// first; an owner left without records is forgotten too.
func (s *MemoryStore) retain(owner string, o *memOwner) {
	for o.done.n > s.retainPerOwner {
		s.drop(o, o.done.head)
	}
	var cutoff int64
	if s.retainFor > 0 && !s.clock.IsZero() { // only commits that end tasks read the clock
		cutoff = s.clock.Add(-s.retainFor).UnixNano()
	}
	for e := s.done.head; e != nil && (s.done.n > s.retainTotal || e.at < cutoff); e = s.done.head {
		// The oldest terminal record of all is the oldest of its owner.
		name := e.meta.Owner
		eo := s.owners[name]
		s.drop(eo, e)
		if eo.empty() {
			delete(s.owners, name)
		}
	}
	if o.empty() {
		delete(s.owners, owner)
	}
}

// setMutable writes into cur the fields of next that the reducer may change,
// if any differs, and reports whether it wrote. Identity fields are never
// written: a Manager reads them without the store's lock.
func setMutable(cur, next *TaskMeta) bool {
	if cur.Description == next.Description && cur.Status == next.Status && cur.Error == next.Error &&
		cur.ErrorKind == next.ErrorKind && cur.CancelReason == next.CancelReason && cur.Stack == next.Stack && bytes.Equal(cur.Result, next.Result) && cur.Instance == next.Instance &&
		cur.Attempt == next.Attempt && cur.CreatedAt.Equal(next.CreatedAt) &&
		cur.StartedAt.Equal(next.StartedAt) && cur.FinishedAt.Equal(next.FinishedAt) && sameInput(cur.Input, next.Input) &&
		sameProgress(cur.Progress, next.Progress) && cur.Announced == next.Announced {
		return false
	}
	cur.Description, cur.Status, cur.Error, cur.Stack = next.Description, next.Status, next.Error, next.Stack
	cur.ErrorKind, cur.CancelReason = next.ErrorKind, next.CancelReason
	cur.Result, cur.Instance, cur.Attempt = next.Result, next.Instance, next.Attempt
	cur.CreatedAt, cur.StartedAt, cur.FinishedAt = next.CreatedAt, next.StartedAt, next.FinishedAt
	cur.Input = next.Input
	cur.Progress = next.Progress
	cur.Announced = next.Announced
	return true
}

// sameProgress reports whether two records hold the same progress.
func sameProgress(a, b *TaskProgress) bool {
	return a == b || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}

func sameInput(a, b *InputRequest) bool {
	return a == b || a != nil && b != nil && *a == *b
}
