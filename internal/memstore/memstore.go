package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Default retention of an in-memory store.
const (
	DefaultRetainPerOwner = 1000
	DefaultRetainTotal    = 100_000
	DefaultRetainFor      = 24 * time.Hour
)

// Store is the in-memory Store, the default of a Manager. It keeps
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
// Use New; the zero value is not usable. Safe for concurrent
// use: records are spread over shards by id, each with its own lock, so
// commits of different tasks rarely wait for each other. A commit that
// ends a task also takes, briefly, the lock of the index of terminal
// records, where retention runs; retention costs in proportion to the
// records it forgets, and its limits hold whenever a Commit returns.
type Store struct {
	retainPerOwner int
	retainTotal    int
	retainFor      time.Duration

	seed   maphash.Seed // spreads ids over the shards
	term   memTerm
	shards [memShards]memShard
}

// each calls f with every record of owner: its live records, shard by
// shard, under each shard's read lock, then its terminal ones under the
// terminal index's lock. A record that turns terminal meanwhile may be
// seen twice (live, then terminal), never missed.
func (s *Store) each(owner string, f func(*Entry)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		if l := sh.owners[owner]; l != nil {
			for e := l.head; e != nil; e = e.owner.next {
				f(e)
			}
		}
		sh.mu.RUnlock()
	}
	s.term.mu.Lock()
	defer s.term.mu.Unlock()
	if l := s.term.owners[owner]; l != nil {
		for e := l.head; e != nil; e = e.owner.next {
			f(e)
		}
	}
}

// Option configures an in-memory store.
type Option func(*Store)

// WithRetainPerOwner keeps at most n terminal records per owner; the first to
// have been committed terminal go first. n <= 0 keeps none. Default
// DefaultRetainPerOwner (1000).
func WithRetainPerOwner(n int) Option {
	return func(s *Store) { s.retainPerOwner = max(n, 0) }
}

// WithRetainTotal keeps at most n terminal records across all owners; the first
// to have been committed terminal, whatever their owner, go first. It
// applies on top of WithRetainPerOwner and WithRetainFor. n <= 0 keeps none.
// Default DefaultRetainTotal (100,000).
func WithRetainTotal(n int) Option { return func(s *Store) { s.retainTotal = max(n, 0) } }

// WithRetainFor forgets terminal records committed terminal longer ago than d
// (by the store's clock, so a record without a finish time or with a skewed
// one is kept as long as any other). The age is checked on each commit that
// records a terminal status. d <= 0 disables the age limit. Default
// DefaultRetainFor (24h).
func WithRetainFor(d time.Duration) Option { return func(s *Store) { s.retainFor = d } }

// New returns an empty in-memory store.
func New(opts ...Option) *Store {
	s := &Store{
		retainPerOwner: DefaultRetainPerOwner,
		retainTotal:    DefaultRetainTotal,
		retainFor:      DefaultRetainFor,
	}
	s.seed = maphash.MakeSeed()
	s.term.owners = make(map[string]*memList)
	for i := range s.shards {
		s.shards[i].init()
		s.shards[i].term = &s.term
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Load implements Store.
func (s *Store) Load(ctx context.Context, owner string) (store.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return store.Snapshot{}, err
	}
	snap := store.Snapshot{Tasks: make(map[string]bgtype.TaskMeta)}
	s.each(owner, func(e *Entry) { snap.Tasks[e.id()] = e.get() })
	return snap, nil
}

// Get implements Store.
func (s *Store) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if err := ctx.Err(); err != nil {
		return bgtype.TaskMeta{}, err
	}
	sh := s.shardOf(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if e := sh.byID[id]; e != nil {
		return e.get(), nil
	}
	return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
}

// Commit implements Store. It holds every shard's lock, so its actions
// apply at once; retention is applied after the actions.
func (s *Store) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateCommit(owner, actions...); err != nil {
		return err
	}
	s.lockAll()
	if err := s.checkKeys(owner, actions); err != nil {
		s.unlockAll()
		return err
	}
	var tx memTx
	for _, a := range actions {
		switch a.Op {
		case store.OpUpsert:
			s.shardOf(a.Tasks[0].ID).upsert(&tx, &a.Tasks[0], nil, a.At)
		case store.OpAnnounce:
			s.announce(owner, a.IDs)
		default:
			s.settle(&tx) // the records made terminal so far join the index applySlow reads
			s.applySlow(&tx, owner, a)
		}
	}
	s.settle(&tx)
	s.unlockAll()
	s.forget(&tx)
	return nil
}

// announce is store.Apply's Announce on the records in place: it touches
// only the owner's terminal records among ids. Every shard is locked.
func (s *Store) announce(owner string, ids []string) {
	s.term.mu.Lock() // a terminal record changes under its shard's lock and the index's
	defer s.term.mu.Unlock()
	for _, id := range ids {
		if e := s.shardOf(id).byID[id]; e != nil && e.terminal() && e.Rec.Owner == owner {
			e.Rec.announced = true
		}
	}
}

// commitOne is Commit of one upsert without the Action around it: the
// Manager's path. A new record is kept in own, when given (u is own's
// record expanded, its identity fields set already), rather than in a copy;
// the caller then reads it only through read, or its identity fields, which
// never change. u itself is not kept,
// so it may live on the caller's stack. It locks the record's shard only,
// unless a new record brings an idempotency key: checking that key against
// the owner's others needs every shard.
func (s *Store) CommitOne(ctx context.Context, u *bgtype.TaskMeta, own *Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.ID == "" || u.Owner == "" || !u.Status.Valid() { // the Manager's records; Result is JSON it encoded
		return fmt.Errorf("%w: %w", store.ErrInvalidAction, u.Validate())
	}
	if u.IdempotencyKey != "" {
		return s.commitKeyed(u, own)
	}
	tx := memTx{clock: u.FinishedAt} // the Manager's clock, read moments ago; zero until the task ends
	sh := s.shardOf(u.ID)
	sh.mu.Lock()
	sh.upsert(&tx, u, own, time.Time{})
	s.settle(&tx)
	sh.mu.Unlock()
	s.forget(&tx)
	return nil
}

// CommitNew commits own's record, new to the store, as CommitOne of it
// expanded would, when that commit has nothing to settle: the record is
// live, has an id, an owner and a start or a queue status, and carries no
// idempotency key and none of the fields of memRare (no input request to
// settle, no attempt, no progress). Then it reports true: one map lookup
// and the insert, no TaskMeta built and no reducer pass (the usual spawn).
// Otherwise, or if the id is in the store already, it changes nothing and
// reports false: CommitOne is the way. The error is ctx's, as CommitOne's.
func (s *Store) CommitNew(ctx context.Context, own *Entry) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	r := &own.Rec
	if st := memStatuses[r.status]; r.ID == "" || r.Owner == "" || r.rare != nil || r.Key() != "" || r.announced ||
		st != bgtype.StatusRunning && st != bgtype.StatusQueued {
		return false, nil
	}
	sh := s.shardOf(r.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.byID[r.ID] != nil {
		return false, nil
	}
	sh.add(nil, own)
	return true, nil
}

// commitKeyed is commitOne of a record with an idempotency key.
//
//go:noinline
func (s *Store) commitKeyed(u *bgtype.TaskMeta, own *Entry) error {
	s.lockAll()
	sh := s.shardOf(u.ID)
	if sh.byID[u.ID] == nil {
		if e := s.keyed(u.Owner, u.IdempotencyKey); e != nil {
			s.unlockAll()
			return &bgtype.DuplicateKeyError{Key: u.IdempotencyKey, TaskID: e.id()}
		}
	}
	tx := memTx{clock: u.FinishedAt}
	sh.upsert(&tx, u, own, time.Time{})
	s.settle(&tx)
	s.unlockAll()
	s.forget(&tx)
	return nil
}

// commitEdit expands rec, a record kept by commitOne, into u, applies edit
// and commits it, all under one lock. It is commitOne for the Manager's
// own terminal records, which are valid by construction.
func (s *Store) CommitEdit(rec *Rec, u *bgtype.TaskMeta, edit *Outcome) {
	sh := s.shardOf(rec.ID)
	spare := s.term.takeDone() // its compact form, taken before the lock: no allocation (or GC assist) under it
	sh.mu.Lock()
	rec.ExpandInto(u)
	edit.Apply(u)
	tx := memTx{clock: u.FinishedAt, spare: spare}
	sh.upsert(&tx, u, nil, time.Time{})
	s.settle(&tx)
	sh.mu.Unlock()
	s.forget(&tx)
}

// CommitEnd commits edit, a task's end, on e, the entry of a live record
// kept by CommitOne, when the reducer would change only its status, result and
// finish time: edit carries no error, reason, progress, output size or new
// attempt, and the record none of the fields a reducer merges (no error,
// progress, attempt, input or kind's resume; not finished). Then it writes those three in
// place, sets edit.From, and reports true, with no TaskMeta built and no
// reducer pass (the usual task's end). Otherwise, or if the store no
// longer keeps e (a ReplaceAll or Remove took the record), it changes
// nothing and reports false: CommitEdit is the way. The result is copied,
// as the reducer copies it: the store's own.
func (s *Store) CommitEnd(e *Entry, edit *Outcome) bool {
	if !edit.plain() {
		return false
	}
	rec := &e.Rec
	sh := s.shardOf(rec.ID)
	spare := s.term.takeDone() // as CommitEdit: no allocation under the lock
	sh.mu.Lock()
	if !rec.held || !rec.livePlain() { // held: byID names e, without a lookup
		sh.mu.Unlock()
		s.term.recycle(spare)
		return false
	}
	edit.From = memStatuses[rec.status]
	rec.status = memStatusCode(edit.Status)
	rec.result = json.RawMessage(bytes.Clone(edit.Result))
	rec.finished = unixNanos(edit.End)
	tx := memTx{clock: edit.End, spare: spare}
	sh.endLive(&tx, e)
	s.settle(&tx)
	sh.mu.Unlock()
	s.forget(&tx)
	return true
}

// read expands a record kept by commitOne into dst, under its shard's lock.
func (s *Store) Read(rec *Rec, dst *bgtype.TaskMeta) {
	sh := s.shardOf(rec.ID)
	sh.mu.RLock()
	rec.ExpandInto(dst)
	sh.mu.RUnlock()
}

// applySlow runs ReplaceAll and Remove through store.Apply on a copy of the
// owner's records and puts the result back. Every shard is locked; it
// takes the terminal index's lock while it runs, so the records it makes
// terminal join the index only in Commit's settle, after it.
func (s *Store) applySlow(tx *memTx, owner string, a store.Action) {
	var entries []*Entry
	for i := range s.shards {
		if l := s.shards[i].owners[owner]; l != nil {
			for e := l.head; e != nil; e = e.owner.next {
				entries = append(entries, e)
			}
		}
	}
	t := &s.term
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.owners[owner]; l != nil {
		for e := l.head; e != nil; e = e.owner.next {
			entries = append(entries, e)
		}
	}
	snap := store.Snapshot{Tasks: make(map[string]bgtype.TaskMeta, len(entries))}
	for _, e := range entries {
		snap.Tasks[e.id()] = e.get()
	}
	if a.Op == store.OpReplaceAll {
		kept := make([]bgtype.TaskMeta, 0, len(a.Tasks))
		for _, t := range a.Tasks {
			if other := s.shardOf(t.ID).byID[t.ID]; other == nil || other.ownerID() == owner {
				kept = append(kept, t)
			}
		}
		a.Tasks = kept
	}
	store.Apply(&snap, a)
	for _, e := range entries {
		id := e.id()
		sh := s.shardOf(id)
		next, ok := snap.Tasks[id]
		delete(snap.Tasks, id)
		switch {
		case !ok && e.terminal():
			t.remove(owner, t.owners[owner], e)
			sh.forget(e)
		case !ok:
			sh.unlinkLive(owner, sh.owners[owner], e)
			sh.forget(e)
		case e.terminal(): // a terminal record stays terminal, in its place
			e.Rec.update(&next)
		case e.Rec.update(&next) && e.Rec.IsTerminal():
			sh.unlinkLive(owner, sh.owners[owner], e)
			sh.markTerminal(tx, e)
		}
	}
	added := make([]bgtype.TaskMeta, 0, len(snap.Tasks))
	for _, m := range snap.Tasks {
		added = append(added, m)
	}
	store.SortMetas(added) // new terminal records queue in a stable order
	for i := range added {
		s.shardOf(added[i].ID).add(tx, newLive(&added[i]))
	}
}

// checkKeys reports a *DuplicateKeyError if the actions would insert a
// record whose idempotency key the owner already has, in the store or
// earlier in the same actions. Called with every shard locked, before
// anything is applied, so a Commit that fails changes nothing.
func (s *Store) checkKeys(owner string, actions []store.Action) error {
	var fresh map[string]string // key -> id, of the records these actions insert
	for _, a := range actions {
		if a.Op != store.OpUpsert && a.Op != store.OpReplaceAll {
			continue
		}
		for i := range a.Tasks {
			t := &a.Tasks[i]
			if t.IdempotencyKey == "" || t.Status == "" || s.shardOf(t.ID).byID[t.ID] != nil {
				continue
			}
			if e := s.keyed(owner, t.IdempotencyKey); e != nil {
				return &bgtype.DuplicateKeyError{Key: t.IdempotencyKey, TaskID: e.id()}
			}
			if id, ok := fresh[t.IdempotencyKey]; ok && id != t.ID {
				return &bgtype.DuplicateKeyError{Key: t.IdempotencyKey, TaskID: id}
			}
			if fresh == nil {
				fresh = make(map[string]string)
			}
			fresh[t.IdempotencyKey] = t.ID
		}
	}
	return nil
}

// keyed returns the owner's record with the idempotency key, or nil. Every
// shard is locked: a key is kept in the shard of its record.
func (s *Store) keyed(owner, key string) *Entry {
	for i := range s.shards {
		if e := s.shards[i].keys[keyRef{owner, key}]; e != nil {
			return e
		}
	}
	return nil
}

// setMutable writes into cur the fields of next that the reducer may change,
// if any differs, and reports whether it wrote. Identity fields are never
// written: a Manager reads them without the store's lock.
func setMutable(cur, next *bgtype.TaskMeta) bool {
	if cur.Description == next.Description && cur.Status == next.Status && cur.Error == next.Error &&
		cur.ErrorKind == next.ErrorKind && cur.CancelReason == next.CancelReason && cur.Stack == next.Stack && bytes.Equal(cur.Result, next.Result) && cur.Instance == next.Instance &&
		cur.Attempt == next.Attempt && cur.CreatedAt.Equal(next.CreatedAt) &&
		cur.StartedAt.Equal(next.StartedAt) && cur.FinishedAt.Equal(next.FinishedAt) && sameInput(cur.Input, next.Input) && slices.Equal(cur.MoreInput, next.MoreInput) &&
		sameProgress(cur.Progress, next.Progress) && cur.Announced == next.Announced && cur.Resume.Equal(next.Resume) &&
		cur.OutputBytes == next.OutputBytes {
		return false
	}
	cur.Description, cur.Status, cur.Error, cur.Stack = next.Description, next.Status, next.Error, next.Stack
	cur.ErrorKind, cur.CancelReason = next.ErrorKind, next.CancelReason
	cur.Result, cur.Instance, cur.Attempt = next.Result, next.Instance, next.Attempt
	cur.CreatedAt, cur.StartedAt, cur.FinishedAt = next.CreatedAt, next.StartedAt, next.FinishedAt
	cur.Input, cur.MoreInput = next.Input, next.MoreInput
	cur.Progress = next.Progress
	cur.Announced = next.Announced
	cur.Resume = next.Resume
	cur.OutputBytes = next.OutputBytes
	return true
}

// sameProgress reports whether two records hold the same progress.
func sameProgress(a, b *bgtype.Progress) bool {
	return a == b || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}

func sameInput(a, b *bgtype.InputRequest) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// Outcome is what the runtime writes on a task's record when its function
// returned: the terminal status and what goes with it. CommitEdit applies
// it under the record's lock.
type Outcome struct {
	Status                 bgtype.Status
	Kind                   bgtype.ErrorKind
	Result                 json.RawMessage
	End                    time.Time
	Reason, ErrText, Stack string
	Progress               *bgtype.Progress
	Output                 int64         // the bytes the task wrote to its output in all (TaskMeta.OutputBytes)
	From                   bgtype.Status // set by Apply: the status it replaced
}

// plain reports whether e ends a record with no field beside its status,
// result and finish time (CommitEnd): a task that wrote output keeps its
// size in the record's rare part, so its end is not plain.
func (e *Outcome) plain() bool {
	return e.Status.IsTerminal() && e.Status != bgtype.StatusInterrupted && e.Kind == "" &&
		e.Reason == "" && e.ErrText == "" && e.Stack == "" && e.Progress == nil && e.Output == 0
}

// Apply writes the outcome on u, the record as committed so far.
func (e *Outcome) Apply(u *bgtype.TaskMeta) {
	e.From = u.Status
	u.Status, u.Result, u.FinishedAt, u.ErrorKind = e.Status, e.Result, e.End, e.Kind
	u.Input, u.MoreInput = nil, nil // open requests end with the task
	switch e.Status {
	case bgtype.StatusCanceled:
		u.CancelReason = e.Reason
	case bgtype.StatusInterrupted: // Stop cut it: it reads as a crash recovery's
		u.Attempt++
	}
	if e.Progress != nil {
		u.Progress = e.Progress // the latest report is never lost to the throttle
	}
	u.Error, u.Stack = e.ErrText, e.Stack
	u.OutputBytes = e.Output
}
