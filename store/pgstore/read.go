package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
)

// Load implements store.Store. A row that cannot be decoded makes Load
// fail with an error matching bgtype.ErrCorrupt that names the task.
func (s *Store) Load(ctx context.Context, owner string) (store.Snapshot, error) {
	rows, err := s.query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks WHERE owner = $1`, owner)
	if err != nil {
		return store.Snapshot{}, err
	}
	snap := store.Snapshot{Tasks: make(map[string]bgtype.TaskMeta, len(rows))}
	for _, r := range rows {
		snap.Tasks[r.meta.ID] = r.meta
	}
	return snap, nil
}

// getByIDSQL reads one record by id.
const getByIDSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks WHERE id = $1`

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	rows, err := s.query(ctx, getByIDSQL, id)
	if err != nil {
		return bgtype.TaskMeta{}, err
	}
	if len(rows) == 0 {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
	}
	return rows[0].meta, nil
}

// List implements store.Store. The rows are read before the first yield,
// so the loop body may call the Store.
func (s *Store) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return s.ListTagged(ctx, owner, "", statuses...)
}

// listSQL is List's query (index bgtask_tasks_owner, in its order).
const listSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks
	WHERE owner = $1 AND (cardinality($2::text[]) = 0 OR status = ANY($2))
	ORDER BY created_at NULLS FIRST, id COLLATE "C"`

// listTaggedSQL is ListTagged's query with a tag (index bgtask_tasks_tags
// or bgtask_tasks_owner, as the planner finds cheaper).
const listTaggedSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks
	WHERE owner = $1 AND (cardinality($2::text[]) = 0 OR status = ANY($2)) AND tags @> ARRAY[$3::text]
	ORDER BY created_at NULLS FIRST, id COLLATE "C"`

// ListTagged implements store.TagLister, like List.
func (s *Store) ListTagged(ctx context.Context, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		filter := make([]string, len(statuses))
		for i, st := range statuses {
			if !st.Valid() {
				yield(bgtype.TaskMeta{}, fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st))
				return
			}
			filter[i] = string(st)
		}
		if tag != "" {
			rows, err := s.query(ctx, listTaggedSQL, owner, filter, tag)
			yieldRows(rows, err, yield)
			return
		}
		rows, err := s.query(ctx, listSQL, owner, filter)
		yieldRows(rows, err, yield)
	}
}

// Children implements store.Store.
func (s *Store) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if id == "" {
			return
		}
		rows, err := s.query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks
			WHERE parent_task_id = $1 ORDER BY created_at NULLS FIRST, id COLLATE "C"`, id)
		yieldRows(rows, err, yield)
	}
}

// yieldRows yields every good row, then err if there is one: a corrupt row
// hides none of the others (the store.Store contract).
func yieldRows(rows []row, err error, yield func(bgtype.TaskMeta, error) bool) {
	for i := range rows {
		if !yield(rows[i].meta, nil) {
			return
		}
	}
	if err != nil {
		yield(bgtype.TaskMeta{}, err)
	}
}

// query reads task rows. Every row is checked: it returns the good ones
// and, when some cannot be decoded, an error naming each of them (Load and
// Get fail on it; List yields it after the good rows).
func (s *Store) query(ctx context.Context, sql string, args ...any) ([]row, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rs, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return collect(rs)
}

func collect(rs pgx.Rows) ([]row, error) {
	defer rs.Close()
	var (
		out     []row
		corrupt []error
	)
	for rs.Next() {
		r, err := scanRow(rs)
		switch {
		case err == nil:
			out = append(out, r)
		case errors.Is(err, bgtype.ErrCorrupt) && rs.Err() == nil: // decoded, but wrong: skip it
			corrupt = append(corrupt, err)
		default:
			return out, err
		}
	}
	if err := rs.Err(); err != nil {
		return out, fmt.Errorf("pgstore: %w", err)
	}
	return out, errors.Join(corrupt...)
}
