package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errMixed means a group moved an id from one owner to another (one
// caller removed it, a later one of another owner added it): the group's
// callers commit alone instead.
var errMixed = errors.New("pgstore: commit group moves a record between owners")

// lockRows begins a transaction on conn, checks the fence of a started
// Store (see Commit), and reads and locks the rows reqs touch: those they
// name, and for a ReplaceAll every row of its owner; one round trip. Two
// statements rather than one with "OR owner = $2", which no single index
// serves. The transaction stays open on success.
func (s *Store) lockRows(ctx context.Context, conn *pgxpool.Conn, reqs []*commitReq) (map[string]row, error) {
	return s.lockRowsAfter(ctx, conn, reqs, nil)
}

// lockRowsAfter is lockRows with the statements pre queues run first in
// the transaction, after the fence: pre returns what reads their results.
func (s *Store) lockRowsAfter(ctx context.Context, conn *pgxpool.Conn, reqs []*commitReq, pre func(*pgx.Batch) func(pgx.BatchResults) error) (map[string]row, error) {
	var (
		b      pgx.Batch
		ids    []string
		owners []string
	)
	for _, r := range reqs {
		ids = append(ids, r.ids...)
		if r.replace && !slices.Contains(owners, r.owner) {
			owners = append(owners, r.owner)
		}
	}
	b.Queue("BEGIN")
	fence := s.queueFence(&b)
	var preRead func(pgx.BatchResults) error
	if pre != nil {
		preRead = pre(&b)
	}
	b.Queue(lockByIDSQL, ids)
	for _, o := range owners {
		b.Queue(lockByOwnerSQL, o)
	}
	br := conn.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	if fence != nil {
		if err := fence(br); err != nil {
			return nil, err
		}
	}
	if preRead != nil {
		if err := preRead(br); err != nil {
			return nil, err
		}
	}
	locked := make(map[string]row, len(ids))
	for range 1 + len(owners) {
		rs, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("pgstore: commit: %w", err)
		}
		got, err := collect(rs)
		if err != nil {
			return nil, err
		}
		for _, r := range got {
			locked[r.meta.ID] = r
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	return locked, nil
}

// current is a record as the requests of a group applied so far leave it.
type current struct {
	meta    bgtype.TaskMeta
	present bool
}

// applyAll runs the reducer for each request in turn, on the rows of its
// owner (a row of another owner with an id it names is dropped from its
// actions), and returns the rows to write and the owners whose records
// turned terminal (for retention).
func applyAll(locked map[string]row, reqs []*commitReq) (*writes, []string, error) {
	state := make(map[string]*current, len(locked))
	for id, r := range locked {
		state[id] = &current{meta: r.meta, present: true}
	}
	for _, r := range reqs {
		snap := store.Snapshot{Tasks: make(map[string]bgtype.TaskMeta, len(r.ids))}
		var foreign map[string]bool
		for _, id := range r.ids {
			c := state[id]
			switch {
			case c == nil || !c.present:
			case c.meta.Owner != r.owner:
				if foreign == nil {
					foreign = make(map[string]bool)
				}
				foreign[id] = true
			default:
				snap.Tasks[id] = c.meta
			}
		}
		if r.replace {
			for id, c := range state {
				if c.present && c.meta.Owner == r.owner {
					snap.Tasks[id] = c.meta
				}
			}
		}
		before := make([]string, 0, len(snap.Tasks))
		for id := range snap.Tasks {
			before = append(before, id)
		}
		for _, a := range r.actions {
			if foreign != nil {
				a = withoutForeign(a, foreign)
			}
			store.Apply(&snap, a)
		}
		for _, id := range before {
			if _, ok := snap.Tasks[id]; !ok {
				state[id].present = false
			}
		}
		for id, m := range snap.Tasks {
			if c := state[id]; c != nil {
				c.meta, c.present = m, true
			} else {
				state[id] = &current{meta: m, present: true}
			}
		}
	}
	ids := make([]string, 0, len(state))
	for id := range state {
		ids = append(ids, id)
	}
	slices.Sort(ids) // rows in one order, so concurrent groups lock alike
	w := newWrites(len(ids))
	var retain []string
	terminal := func(owner string) {
		if !slices.Contains(retain, owner) {
			retain = append(retain, owner)
		}
	}
	for _, id := range ids {
		c := state[id]
		old, had := locked[id]
		switch {
		case !had && c.present:
			w.put(&c.meta, 0)
			if c.meta.Status.IsTerminal() {
				terminal(c.meta.Owner)
				w.count(countIns, c.meta.Owner)
			}
		case had && c.present && old.meta.Owner != c.meta.Owner:
			return nil, nil, errMixed
		case had && c.present && !sameMeta(&old.meta, &c.meta):
			w.put(&c.meta, old.version)
			if c.meta.Status.IsTerminal() && !old.meta.Status.IsTerminal() {
				terminal(c.meta.Owner)
				w.count(countUpd, c.meta.Owner)
			}
		case had && !c.present:
			w.del(id, old.version)
			// Any deleted row may count: a resumed record keeps the
			// terminal_at of its first end, which the Store does not read.
			w.count(countDel, old.meta.Owner)
		}
	}
	return w, retain, nil
}

// writeRows writes w, runs retention for the owners in retain, and commits
// the transaction lockRows began; one round trip. The rows written were
// locked, so only an insert can meet a row written meanwhile: its unique
// violation aborts the transaction and the commit starts over. When its
// statements would take owners' terminal counts out of order, it locks
// them first (prelock.go). Once it committed records that turned terminal,
// it checks the age limit (checkAge).
func (s *Store) writeRows(ctx context.Context, conn *pgxpool.Conn, w *writes, retain []string) error {
	var (
		b    pgx.Batch
		want []int
	)
	if n := s.queuePrelock(&b, w); n > 0 {
		want = append(want, n) // it writes a count of each owner
	}
	want = append(want, queueWrites(&b, w)...)
	s.queueRetention(&b, retain)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, &b)
	defer br.Close()
	if err := readWrites(br, want); err != nil {
		return err
	}
	for range b.Len() - len(want) {
		if _, err := br.Exec(); err != nil {
			return commitErr(err)
		}
	}
	if err := br.Close(); err != nil {
		return commitErr(err)
	}
	if len(retain) > 0 {
		s.checkAge()
	}
	return nil
}

// queueRetention adds to b the retention of the owners in retain, whose
// records turned terminal: each keeps its newest terminal records up to
// the limit. The age limit is checked apart (age.go).
func (s *Store) queueRetention(b *pgx.Batch, retain []string) {
	if len(retain) > 0 {
		b.Queue(retainCountSQL, retain, s.cfg.retainPerOwner)
	}
}
