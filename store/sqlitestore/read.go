package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/bgtask/bgtask"
)

// Load implements bgtask.Store. A corrupt row of the owner makes it fail
// with an error matching bgtask.ErrCorrupt that names the task.
func (s *Store) Load(ctx context.Context, owner string) (bgtask.Snapshot, error) {
	if s.isClosed() {
		return bgtask.Snapshot{}, ErrClosed
	}
	rows, err := s.st.byOwner.QueryContext(ctx, owner)
	if err != nil {
		return bgtask.Snapshot{}, s.readErr(fmt.Errorf("sqlitestore: load owner %q: %w", owner, err))
	}
	ms, err := collect(rows)
	if err != nil {
		return bgtask.Snapshot{}, s.readErr(err)
	}
	snap := bgtask.Snapshot{Tasks: make(map[string]bgtask.TaskMeta, len(ms))}
	for _, m := range ms {
		snap.Tasks[m.ID] = m
	}
	return snap, nil
}

// Get implements bgtask.Store. A corrupt row gives an error matching
// bgtask.ErrCorrupt that names the task.
func (s *Store) Get(ctx context.Context, id string) (bgtask.TaskMeta, error) {
	if s.isClosed() {
		return bgtask.TaskMeta{}, ErrClosed
	}
	var r row
	if err := r.scan(s.st.get.QueryRowContext(ctx, id)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return bgtask.TaskMeta{}, fmt.Errorf("%w: %s", bgtask.ErrNotFound, id)
		}
		return bgtask.TaskMeta{}, s.readErr(err)
	}
	return r.decode()
}

// List implements bgtask.Store. The records are read before the first is
// yielded, so the loop body may call the Store. Corrupt rows are skipped
// and reported together in the last pair, as an error matching
// bgtask.ErrCorrupt naming each.
func (s *Store) List(ctx context.Context, owner string, statuses ...bgtask.TaskStatus) iter.Seq2[bgtask.TaskMeta, error] {
	return s.ListTagged(ctx, owner, "", statuses...)
}

// ListTagged implements bgtask.TagLister, like List; the tag is looked up
// in the task_tags index.
func (s *Store) ListTagged(ctx context.Context, owner, tag string, statuses ...bgtask.TaskStatus) iter.Seq2[bgtask.TaskMeta, error] {
	return func(yield func(bgtask.TaskMeta, error) bool) {
		args := make([]any, 0, 2+len(statuses))
		args = append(args, owner)
		query := "SELECT " + columns + " FROM tasks WHERE owner = ?"
		if tag != "" {
			query += " AND id IN (SELECT task_id FROM task_tags WHERE owner = ?1 AND tag = ?)"
			args = append(args, tag)
		}
		for _, st := range statuses {
			if !st.Valid() {
				yield(bgtask.TaskMeta{}, fmt.Errorf("%w: %q", bgtask.ErrInvalidStatus, st))
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

// Children implements bgtask.Store, like List.
func (s *Store) Children(ctx context.Context, id string) iter.Seq2[bgtask.TaskMeta, error] {
	return func(yield func(bgtask.TaskMeta, error) bool) {
		if id == "" {
			return
		}
		s.yieldRows(ctx, yield, "", id)
	}
}

// yieldRows runs query (the children statement when empty) and yields its
// records, then the error if there is one.
func (s *Store) yieldRows(ctx context.Context, yield func(bgtask.TaskMeta, error) bool, query string, args ...any) {
	if s.isClosed() {
		yield(bgtask.TaskMeta{}, ErrClosed)
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
		yield(bgtask.TaskMeta{}, s.readErr(fmt.Errorf("sqlitestore: list: %w", err)))
		return
	}
	ms, err := collect(rows)
	for _, m := range ms {
		if !yield(m, nil) {
			return
		}
	}
	if err != nil {
		yield(bgtask.TaskMeta{}, s.readErr(err))
	}
}

// collect reads and closes rows. It returns the good records and, for the
// corrupt ones, an error naming each; a failure to read stops it.
func collect(rows *sql.Rows) ([]bgtask.TaskMeta, error) {
	defer rows.Close()
	var (
		ms      []bgtask.TaskMeta
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
