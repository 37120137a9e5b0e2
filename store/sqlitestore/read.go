package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Load implements store.Store. A corrupt row of the owner makes it fail
// with an error matching bgtype.ErrCorrupt that names the task.
func (s *Store) Load(ctx context.Context, owner string) (store.Snapshot, error) {
	if s.isClosed() {
		return store.Snapshot{}, ErrClosed
	}
	rows, err := s.st.byOwner.QueryContext(ctx, owner)
	if err != nil {
		return store.Snapshot{}, s.readErr(fmt.Errorf("sqlitestore: load owner %q: %w", owner, err))
	}
	ms, err := collect(rows)
	if err != nil {
		return store.Snapshot{}, s.readErr(err)
	}
	snap := store.Snapshot{Tasks: make(map[string]bgtype.TaskMeta, len(ms))}
	for _, m := range ms {
		snap.Tasks[m.ID] = m
	}
	return snap, nil
}

// Get implements store.Store. A corrupt row gives an error matching
// bgtype.ErrCorrupt that names the task.
func (s *Store) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if s.isClosed() {
		return bgtype.TaskMeta{}, ErrClosed
	}
	var r row
	if err := r.scan(s.st.get.QueryRowContext(ctx, id)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
		}
		return bgtype.TaskMeta{}, s.readErr(err)
	}
	return r.decode()
}

// List implements store.Store. The records are read before the first is
// yielded, so the loop body may call the Store. Corrupt rows are skipped
// and reported together in the last pair, as an error matching
// bgtype.ErrCorrupt naming each.
func (s *Store) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return s.ListTagged(ctx, owner, "", statuses...)
}

// ListTagged implements store.TagLister, like List; the tag is looked up
// in the task_tags index.
func (s *Store) ListTagged(ctx context.Context, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		args := make([]any, 0, 2+len(statuses))
		args = append(args, owner)
		query := "SELECT " + columns + " FROM tasks WHERE owner = ?"
		if tag != "" {
			query += " AND id IN (SELECT task_id FROM task_tags WHERE owner = ?1 AND tag = ?)"
			args = append(args, tag)
		}
		for _, st := range statuses {
			if !st.Valid() {
				yield(bgtype.TaskMeta{}, fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st))
				return
			}
			args = append(args, string(st))
		}
		if len(statuses) > 0 {
			query += " AND status IN (?" + strings.Repeat(", ?", len(statuses)-1) + ")"
		}
		s.yieldRows(ctx, yield, query+" ORDER BY created_at, id", args...)
	}
}

// Children implements store.Store, like List.
func (s *Store) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if id == "" {
			return
		}
		s.yieldRows(ctx, yield, "", id)
	}
}

// yieldRows runs query (the children statement when empty) and yields its
// records, then the error if there is one.
func (s *Store) yieldRows(ctx context.Context, yield func(bgtype.TaskMeta, error) bool, query string, args ...any) {
	if s.isClosed() {
		yield(bgtype.TaskMeta{}, ErrClosed)
		return
	}
	var (
		rows *sql.Rows
		err  error
	)
	if query == "" {
		rows, err = s.st.children.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		yield(bgtype.TaskMeta{}, s.readErr(fmt.Errorf("sqlitestore: list: %w", err)))
		return
	}
	ms, err := collect(rows)
	for _, m := range ms {
		if !yield(m, nil) {
			return
		}
	}
	if err != nil {
		yield(bgtype.TaskMeta{}, s.readErr(err))
	}
}

// collect reads and closes rows. It returns the good records and, for the
// corrupt ones, an error naming each; a failure to read stops it.
func collect(rows *sql.Rows) ([]bgtype.TaskMeta, error) {
	defer rows.Close()
	var (
		ms      []bgtype.TaskMeta
		corrupt []error
	)
	for rows.Next() {
		var r row
		if err := r.scan(rows); err != nil {
			return ms, err
		}
		m, err := r.decode()
		if err != nil {
			corrupt = append(corrupt, err)
			continue
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return ms, fmt.Errorf("sqlitestore: read rows: %w", err)
	}
	return ms, errors.Join(corrupt...)
}
