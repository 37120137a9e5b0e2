package pgstore

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
)

// maxKnown bounds the ids a Store remembers as written and not terminal.
// Past it, a commit of such an id may try the one-statement insert first
// and take the long way after it fails: slower, never wrong.
const maxKnown = 1 << 20

// freshInserts returns the rows reqs write when they may only add new
// records: every action upserts a queued or running record whose id this
// Store has not written (or has written terminal) and no other request of
// the group names. The reducer then runs on no rows; if an id does exist
// after all, the insert fails and the caller takes the long way.
func (s *Store) freshInserts(reqs []*commitReq) (w *writes, one *bgtype.TaskMeta, ok bool) {
	seen := make(map[string]bool)
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	for _, r := range reqs {
		if r.replace {
			return nil, nil, false
		}
		for _, a := range r.actions {
			if a.Op != store.OpUpsert {
				return nil, nil, false
			}
			for i := range a.Tasks {
				t := &a.Tasks[i]
				_, known := s.known[t.ID]
				if t.Status != bgtype.StatusQueued && t.Status != bgtype.StatusRunning || seen[t.ID] || known {
					return nil, nil, false
				}
				seen[t.ID] = true
			}
		}
	}
	w = newWrites(len(seen))
	for _, r := range reqs {
		var snap store.Snapshot
		for _, a := range r.actions {
			store.Apply(&snap, a)
		}
		for _, m := range snap.Tasks {
			if m.Status.IsTerminal() {
				return nil, nil, false
			}
			w.put(&m, 0)
			one = &m
		}
	}
	if len(w.ins.id) != 1 {
		one = nil
	}
	return w, one, len(w.ins.id) > 0
}

// insertFresh inserts w's new rows in one statement, fenced like every
// write of a started Store. It returns errRace when an id exists. The
// statement is prepared and its plan kept: it scans no table, so no plan
// made while the table was small costs more once it grew.
func (s *Store) insertFresh(ctx context.Context, w *writes, one *bgtype.TaskMeta) error {
	plain, fenced, args := insertSQL, insertFencedSQL, w.ins.args()
	if one != nil {
		plain, fenced, args = insertOneSQL, insertOneFencedSQL, oneArgs(one)
	}
	args = append([]any{pgx.QueryExecModeCacheStatement}, args...)
	id := s.instance.Load()
	if id == nil {
		tag, err := s.pool.Exec(ctx, plain, args...)
		if err != nil {
			return commitErr(err)
		}
		return checkCount(tag.RowsAffected(), len(w.ins.id))
	}
	var (
		state string
		n     int64
	)
	if err := s.pool.QueryRow(ctx, fenced, append(args, *id)...).Scan(&state, &n); err != nil {
		return commitErr(err)
	}
	return s.freshResult(*id, state, n, len(w.ins.id))
}

// freshResult checks what the fenced insert of want new rows returned:
// the state of the instance's registration and the rows inserted.
func (s *Store) freshResult(instance, state string, n int64, want int) error {
	if state != "alive" {
		why := fmt.Sprintf("its registration is %s", state)
		s.markLost(instance, why)
		return fmt.Errorf("%w: %s", ErrInstanceLost, why)
	}
	return checkCount(n, want)
}

// queueFresh adds insertFresh's statement to b and returns the reader of
// its result, for a batch that other statements share.
func (s *Store) queueFresh(b *pgx.Batch, w *writes, one *bgtype.TaskMeta) func(pgx.BatchResults) error {
	plain, fenced, args := insertSQL, insertFencedSQL, w.ins.args()
	if one != nil {
		plain, fenced, args = insertOneSQL, insertOneFencedSQL, oneArgs(one)
	}
	want := len(w.ins.id)
	id := s.instance.Load()
	if id == nil {
		b.Queue(plain, args...)
		return func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			if err != nil {
				return commitErr(err)
			}
			return checkCount(tag.RowsAffected(), want)
		}
	}
	b.Queue(fenced, append(args, *id)...)
	return func(br pgx.BatchResults) error {
		var (
			state string
			n     int64
		)
		if err := br.QueryRow().Scan(&state, &n); err != nil {
			return commitErr(err)
		}
		return s.freshResult(*id, state, n, want)
	}
}

func checkCount(got int64, want int) error {
	if got != int64(want) {
		return fmt.Errorf("pgstore: commit: %d of %d new rows written", got, want)
	}
	return nil
}
