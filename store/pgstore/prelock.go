package pgstore

import (
	"slices"

	"github.com/jackc/pgx/v5"
)

// The lock order within one transaction (decision 797): a commit's
// transaction may run up to three statements that change owners' terminal
// counts (its insert, update and delete), and each statement's trigger
// locks its counts in owner order; across the statements the owners need
// not ascend (a group that inserts an ended record of b, then ends a task
// of a, takes b before a). So when they would not, the long way locks
// every count its statements may change first, in one statement and in
// byte order; the cached way is not taken (it would hold counts while its
// update waits for rows). The common commit (one count-changing statement,
// or owners ascending across them) pays nothing.

// The statements of a commit whose triggers may change terminal counts,
// indexes of writes.counted.
const (
	countIns = iota // the insert
	countUpd        // the update
	countDel        // the delete
)

// prelockSQL locks the terminal counts of the owners $1, which are sorted
// in byte order and distinct, in that order: a missing count is inserted
// as 0 (as the triggers leave an owner whose terminal rows are gone), an
// existing one is rewritten as it is, which locks its row.
const prelockSQL = `INSERT INTO bgtask_owner_terminal AS c (owner, n)
	SELECT o, 0 FROM unnest($1::text[]) AS o ORDER BY o COLLATE "C"
	ON CONFLICT (owner) DO UPDATE SET n = c.n`

// count notes that statement stmt of w may change owner's terminal count.
func (w *writes) count(stmt int, owner string) {
	o := w.counted[stmt]
	switch {
	case o == nil:
		o = w.first[stmt][:0]
	case o[len(o)-1] == owner:
		return // duplicates further apart stay: prelockOwners sorts them out
	}
	w.counted[stmt] = append(o, owner)
}

// countedOwners returns the owners whose terminal counts w's statements
// may change, duplicates included.
func (w *writes) countedOwners() []string {
	return slices.Concat(w.counted[:]...)
}

// prelockOwners returns the owners whose counts a transaction must lock
// first, in byte order, for its statements to take counts in ascending
// order: nil when they do already. held are the counts the transaction
// holds before them; stmts are, in the order they run, the owners whose
// counts each statement may change (any order, duplicates allowed), each
// statement taking its own in order. The owners returned are those of
// stmts that are not held, sorted and distinct.
func prelockOwners(held []string, stmts ...[]string) []string {
	n := 0
	for _, s := range stmts {
		if len(s) > 0 {
			n++
		}
	}
	if n == 0 || n == 1 && len(held) == 0 {
		return nil // the common commit: one statement locks in order
	}
	set := make(map[string]bool, len(held))
	var top string // the greatest count held
	for _, o := range held {
		set[o] = true
		top = max(top, o)
	}
	out := false
	for _, s := range stmts {
		next := top
		for _, o := range s {
			if set[o] {
				continue
			}
			out = out || o < top
			next = max(next, o)
		}
		for _, o := range s {
			set[o] = true
		}
		top = next
	}
	if !out {
		return nil
	}
	var owners []string
	for _, s := range stmts {
		for _, o := range s {
			if !slices.Contains(held, o) {
				owners = append(owners, o)
			}
		}
	}
	slices.Sort(owners)
	return slices.Compact(owners)
}

// queuePrelock adds to b, when w's statements (insert, update, delete, in
// that order) would take counts out of order, the statement that locks
// them all first, and returns how many counts it locks (0: none queued).
func (s *Store) queuePrelock(b *pgx.Batch, w *writes) int {
	owners := prelockOwners(nil, w.counted[countIns], w.counted[countUpd], w.counted[countDel])
	if owners == nil {
		return 0
	}
	b.Queue(prelockSQL, owners)
	s.prelocks.Add(1)
	return len(owners)
}
