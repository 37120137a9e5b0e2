package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reapBatch bounds the tasks one reaper transaction interrupts.
const reapBatch = 500

// cleanBatch bounds the aged tasks one transaction of the clean-up
// deletes.
const cleanBatch = 1000

// liveStatuses are the non-terminal statuses, as stored.
var liveStatuses = []string{string(bgtype.StatusQueued), string(bgtype.StatusRunning), string(bgtype.StatusAwaitingInput)}

// liveSQL is liveStatuses as an SQL list. Written into the statements
// rather than passed as a parameter: only a literal list lets the planner
// use the partial index bgtask_tasks_live, whatever plan it caches.
var liveSQL = "('" + strings.Join(liveStatuses, "', '") + "')"

// reapTasksSQL locks a batch of the non-terminal tasks of instances that
// are not alive, oldest first.
var reapTasksSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks
	WHERE status IN ` + liveSQL + ` AND instance IN (SELECT id FROM bgtask_instances WHERE state <> 'alive')
	ORDER BY created_at NULLS FIRST, id COLLATE "C" LIMIT $1
	FOR UPDATE OF bgtask_tasks SKIP LOCKED`

// reaperLoop runs a reaper pass every heartbeat interval, and the age
// clean-up about once a minute, until the instance is lost: a lost
// instance writes nothing.
func (s *Store) reaperLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.heartbeat)
	defer t.Stop()
	var lastClean time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.checkFence() != nil {
			return
		}
		if n, err := s.reap(ctx, s.bg); err != nil && ctx.Err() == nil {
			s.log.Warn("pgstore: reaper pass failed", "err", err)
		} else if n > 0 {
			s.log.Info("pgstore: reaped tasks of gone instances", "tasks", n)
		}
		if time.Since(lastClean) >= time.Minute {
			lastClean = time.Now()
			if err := s.cleanUp(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("pgstore: clean-up failed", "err", err)
			}
		}
	}
}

// Reap runs one reaper pass now and returns how many tasks it interrupted.
// Instances whose heartbeat is older than the grace period (by the
// database clock) are declared dead; then every non-terminal task of a
// dead or stopped instance becomes interrupted on a new attempt, and one
// EventInterrupted notice is recorded for it, in the same transaction.
// Rows another reaper holds are skipped (FOR UPDATE SKIP LOCKED), so two
// reapers never report one task twice.
//
// The notice goes to the nearest live owner up the task's lineage, not
// always to the task's own owner: the tasks of a sub-agent are owned by
// the sub-agent's id, and a sub-agent that ended, or that is reaped too,
// will never take them, so they go to its owner, and so on up. The walk
// stops at an owner that is not a task (a thread, a top-level agent), or
// at a sub-agent still running on a live instance; it follows at most 64
// owners per pass. A notice left addressed to a sub-agent is walked again
// by every later pass, and moves up once that sub-agent has ended or
// died without taking it; when the pass interrupts that sub-agent, the
// notice moves in the same transaction. Each notice is recorded once and
// moved, never copied, so it is claimed (TakeNotices) once, by one owner.
//
// A started Store calls Reap every heartbeat interval (on a connection of
// its own); calling it directly is safe. A started Store whose instance is
// lost reaps nothing and returns ErrInstanceLost.
func (s *Store) Reap(ctx context.Context) (int, error) {
	return s.reap(ctx, s.pool)
}

func (s *Store) reap(ctx context.Context, db *pgxpool.Pool) (int, error) {
	if s.isClosed() {
		return 0, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return 0, err
	}
	total := 0
	noticed := make(map[string]bool)
	defer func() { s.tellNoticed(noticed) }()
	for {
		n, err := s.reapOnce(ctx, db, noticed)
		total += n
		if err != nil {
			return total, err
		}
		if n < reapBatch {
			break
		}
	}
	// After the tasks: a sender told that the instance is gone finds its
	// task interrupted.
	if err := s.failGoneMessages(ctx, db); err != nil {
		return total, err
	}
	if _, err := db.Exec(ctx, `DELETE FROM bgtask_runs WHERE open AND instance IN (SELECT id FROM bgtask_instances WHERE state <> 'alive')`); err != nil {
		return total, fmt.Errorf("pgstore: reap: release runs: %w", err) // free already: OpenRun takes them over
	}
	return total, s.readdressNotices(ctx, db)
}

// tellNoticed tells the started instance's runtime, if it listens
// (store.OwnerNotifier), which owners a reaper pass recorded notices for.
func (s *Store) tellNoticed(owners map[string]bool) {
	if len(owners) == 0 {
		return
	}
	s.mu.Lock()
	rt := s.rt
	s.mu.Unlock()
	if n, ok := rt.(store.OwnerNotifier); ok {
		n.OwnersNoticed(slices.Sorted(maps.Keys(owners)))
	}
}

// readdressNotices walks again every undelivered notice addressed to a
// task (see route.go), in batches: a sub-agent that was live when its
// child's notice was addressed to it may have ended, or died, since.
func (s *Store) readdressNotices(ctx context.Context, db *pgxpool.Pool) error {
	for after := int64(0); ; {
		var n int
		if err := db.QueryRow(ctx, readdressNoticesSQL, after).Scan(&n, &after); err != nil {
			return fmt.Errorf("pgstore: reap: readdress notices: %w", err)
		}
		if n < readdressBatch {
			return nil
		}
	}
}

// reapOnce reaps one batch in one transaction; the owners its notices
// are addressed to are added to noticed once it commits.
func (s *Store) reapOnce(ctx context.Context, db *pgxpool.Pool, noticed map[string]bool) (int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	dead, err := tx.Query(ctx, `UPDATE bgtask_instances SET state = 'dead' WHERE id IN (
			SELECT id FROM bgtask_instances
			WHERE state = 'alive' AND heartbeat_at < now() - make_interval(secs => $1::bigint / 1e6)
			FOR UPDATE SKIP LOCKED)
		RETURNING id, heartbeat_at`, s.cfg.grace.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	for dead.Next() {
		var id string
		var hb time.Time
		if err := dead.Scan(&id, &hb); err == nil {
			s.log.Warn("pgstore: runtime instance declared dead", "instance", id, "last_heartbeat", hb)
		}
	}
	if err := dead.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	rs, err := tx.Query(ctx, reapTasksSQL, reapBatch)
	if err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	var rows []row
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil { // not ours to fix: leave it, report it
			s.log.Error("pgstore: reaper skips a corrupt row", "err", err)
			continue
		}
		rows = append(rows, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	if len(rows) == 0 {
		return 0, tx.Commit(ctx)
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	now = now.UTC().Truncate(time.Microsecond)
	var (
		w       writes
		reaped  int
		ids     []string
		owners  []string
		notices []string
	)
	for _, r := range rows {
		next := store.Orphaned(r.meta, now) // reads the same whichever OrphanInterrupter ended it
		snap := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{r.meta.ID: r.meta}}
		store.Apply(&snap, store.UpsertAction(next))
		got := snap.Tasks[r.meta.ID]
		if got.Status != next.Status || got.Attempt != next.Attempt {
			continue // the reducer refused it; cannot happen for a live row
		}
		w.put(&got, r.version)
		reaped++
		if got.Status == bgtype.StatusQueued {
			continue // a resumable task back in the queue: a live instance claims it, and its owner hears nothing
		}
		if got.Wake == bgtype.WakeSilent {
			continue // interrupted, but a silent task tells no one (as Restore and the other stores)
		}
		ev, err := json.Marshal(bgtype.Event{Kind: bgtype.EventInterrupted, TaskID: got.ID, Name: got.Name, Error: got.Error, ErrorKind: got.ErrorKind})
		if err != nil {
			return 0, fmt.Errorf("pgstore: reap: %w", err)
		}
		ids, owners, notices = append(ids, got.ID), append(owners, got.Owner), append(notices, string(ev))
	}
	if err := execWrites(ctx, tx, &w); err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	// After the writes: the walk sees this batch's records interrupted.
	addressed := make(map[string]bool)
	for _, q := range []struct {
		sql string
		arg []any
	}{{insertNoticesSQL, []any{ids, owners, notices}}, {readdressReapedSQL, []any{ids}}} {
		if err := collectOwners(ctx, tx, addressed, q.sql, q.arg...); err != nil {
			return 0, fmt.Errorf("pgstore: reap: notices: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: reap: %w", err)
	}
	maps.Copy(noticed, addressed)
	return reaped, nil
}

// collectOwners runs a statement that returns one owner per row and adds
// each to owners.
func collectOwners(ctx context.Context, tx pgx.Tx, owners map[string]bool, sql string, args ...any) error {
	rs, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var o string
		if err := rs.Scan(&o); err != nil {
			return err
		}
		owners[o] = true
	}
	return rs.Err()
}

// cleanUp deletes what the age limit lets go: delivered notices, cancel
// requests and messages older than it (handled, or addressed to an
// instance that never handled them), gone instances that no live task
// names, and, last, terminal tasks (in batches of cleanBatch, each in the
// age pass's lock order: age.go).
func (s *Store) cleanUp(ctx context.Context) error {
	if s.cfg.retainFor <= 0 {
		return nil
	}
	age := s.cfg.retainFor.Microseconds()
	_, err := s.bg.Exec(ctx, `
		WITH cut AS (SELECT now() - make_interval(secs => $1::bigint / 1e6) AS t),
		b AS (DELETE FROM bgtask_notices WHERE delivered_at < (SELECT t FROM cut)),
		c AS (DELETE FROM bgtask_cancel_requests WHERE coalesce(handled_at, requested_at) < (SELECT t FROM cut)),
		d AS (DELETE FROM bgtask_messages WHERE coalesce(handled_at, requested_at) < (SELECT t FROM cut))
		DELETE FROM bgtask_instances i WHERE state <> 'alive' AND heartbeat_at < (SELECT t FROM cut)
			AND NOT EXISTS (SELECT 1 FROM bgtask_tasks t WHERE t.instance = i.id AND t.status IN `+liveSQL+`)`,
		age)
	if err != nil {
		return err
	}
	for {
		n, err := s.deleteAged(ctx, cleanBatch)
		if err != nil || n < cleanBatch {
			return err // n short: the rest is held by others, or younger
		}
	}
}

// InterruptOrphaned implements store.OrphanInterrupter with one reaper pass (see Reap): the
// non-terminal tasks of instances whose heartbeat stopped, or that closed
// with tasks running, become interrupted, in batches. Their nearest live
// owners hear of them through a notice, or, if no run takes it, at their
// next run start (the records are not announced: bgtask's Restore
// announces them once).
func (s *Store) InterruptOrphaned(ctx context.Context) (int, error) { return s.Reap(ctx) }

var _ store.OrphanInterrupter = (*Store)(nil)
