package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
)

// Filter selects records for ReadOnly.List. The zero Filter selects every
// record. Each field that is set narrows the selection.
type Filter struct {
	Owner    string          // only this owner's records
	Statuses []bgtype.Status // only records in one of these statuses
	Tag      string          // only records carrying this tag
	RunID    string          // only records spawned in this run (Parent.RunID)
}

// listPage is how many rows one query of ReadOnly.List reads.
var listPage = 256

// List yields the records that f selects, whoever owns them, oldest first
// (CreatedAt, then ID). It reads them a page at a time, so a large file is
// never read into memory at once; a record written meanwhile may or may not
// be seen. A failure is yielded once, as the last pair; an unknown status
// in f yields an error matching bgtype.ErrInvalidStatus. Corrupt rows are
// skipped and reported together at the end, as in Store.List.
func (r *ReadOnly) List(ctx context.Context, f Filter) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		var where []string
		var args []any
		if f.Owner != "" {
			where, args = append(where, "owner = ?"), append(args, f.Owner)
		}
		switch {
		case f.Tag != "" && f.Owner != "": // the task_tags key's prefix
			where, args = append(where, "id IN (SELECT task_id FROM task_tags WHERE owner = ? AND tag = ?)"), append(args, f.Owner, f.Tag)
		case f.Tag != "":
			where, args = append(where, "id IN (SELECT task_id FROM task_tags WHERE tag = ?)"), append(args, f.Tag)
		}
		if f.RunID != "" {
			where, args = append(where, "parent_run_id = ?"), append(args, f.RunID)
		}
		for _, st := range f.Statuses {
			if !st.Valid() {
				yield(bgtype.TaskMeta{}, fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st))
				return
			}
			args = append(args, string(st))
		}
		if len(f.Statuses) > 0 {
			where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		}
		// Keyset paging on (created_at, id); a missing creation time sorts first.
		const key = "coalesce(created_at, -9223372036854775808)"
		where = append(where, "("+key+", id) > (?, ?)")
		query := "SELECT " + columns + " FROM tasks WHERE " + strings.Join(where, " AND ") +
			" ORDER BY " + key + ", id LIMIT ?"
		var (
			lastAt int64 = math.MinInt64
			lastID string
			bad    []error
		)
		for {
			// The first key sorts before every record: no stored id is empty.
			pageArgs := append(args[:len(args):len(args)], lastAt, lastID, listPage)
			rows, err := r.db.QueryContext(ctx, query, pageArgs...)
			if err != nil {
				yield(bgtype.TaskMeta{}, r.err(fmt.Errorf("sqlitestore: list: %w", err)))
				return
			}
			n, err := r.page(rows, yield, &lastAt, &lastID, &bad)
			if err != nil {
				if err != errStop {
					yield(bgtype.TaskMeta{}, r.err(err))
				}
				return
			}
			if n < listPage {
				break
			}
		}
		if len(bad) > 0 {
			yield(bgtype.TaskMeta{}, errors.Join(bad...))
		}
	}
}

// errStop says the loop body stopped the iteration.
var errStop = errors.New("stop")

// page yields one page's records and returns how many rows it read,
// keeping the last row's key; corrupt rows go to bad.
func (r *ReadOnly) page(rows rowsScanner, yield func(bgtype.TaskMeta, error) bool, lastAt *int64, lastID *string, bad *[]error) (int, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var rw row
		if err := rw.scan(rows); err != nil {
			return n, err
		}
		n++
		*lastID = rw.id
		*lastAt = math.MinInt64
		if rw.created.Valid {
			*lastAt = rw.created.Int64
		}
		m, err := rw.decode()
		if err != nil {
			*bad = append(*bad, err)
			continue
		}
		if !yield(m, nil) {
			return n, errStop
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("sqlitestore: read rows: %w", err)
	}
	return n, nil
}

type rowsScanner interface {
	scanner
	Next() bool
	Err() error
	Close() error
}

// Children yields the records whose parent is task id, whoever owns them,
// oldest first. An unknown id yields nothing.
func (r *ReadOnly) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if id == "" {
			return
		}
		rows, err := r.db.QueryContext(ctx, "SELECT "+columns+" FROM tasks WHERE parent_task_id = ? ORDER BY created_at, id", id)
		if err != nil {
			yield(bgtype.TaskMeta{}, r.err(fmt.Errorf("sqlitestore: children: %w", err)))
			return
		}
		ms, err := collect(rows)
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
		if err != nil {
			yield(bgtype.TaskMeta{}, r.err(err))
		}
	}
}
