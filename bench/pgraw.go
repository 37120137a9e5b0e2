package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// rawPGTasks is the floor of the PostgreSQL tasks rows: the plainest pgx
// code that keeps the promises bgtask and river keep, a task durable when
// its submission returns and its completion durable when seen.
func rawPGTasks(ctx context.Context, cfg config) ([]sample, error) {
	return pgTaskRows(ctx, cfg, func(dsn string, sh pgShape, lat *latencies[string]) (sample, error) {
		return rawPGShape(ctx, dsn, sh, lat)
	})
}

const rawPGTaskInsert = `INSERT INTO tasks (id, owner, task_type, name, status, created_at, started_at, instance)
VALUES ($1, $2, 'task', 'research', 'running', now(), now(), 'bench')`

const rawPGTaskComplete = `UPDATE tasks SET status = 'completed', finished_at = now() WHERE id = ANY($1)`

// rawPGShape runs one shape: each submitter INSERTs one row per task, each
// in its own autocommit transaction, and hands its id to one completer,
// which marks what is queued done in one UPDATE (as river's batched
// completer does) and counts those tasks completed once it has committed.
func rawPGShape(ctx context.Context, dsn string, sh pgShape, lat *latencies[string]) (sample, error) {
	pool, err := pgxpool.New(ctx, dsn) // the default size, as pgstore and river use it
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, rawPostgresSchema); err != nil {
		return sample{}, err
	}
	return timed(sh.total(), func() error {
		ids := make(chan string, sh.total())
		errs := make(chan error, sh.submitters+1)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := rawComplete(ctx, pool, ids, sh.total(), lat); err != nil {
				errs <- err
			}
		})
		var subs sync.WaitGroup
		for i := range sh.submitters {
			owner := fmt.Sprintf("owner-%d", i%pgBurstOwners)
			subs.Go(func() {
				for k := range sh.perSub {
					id := fmt.Sprintf("task_%d_%09d", i, k)
					t0 := time.Now()
					if _, err := pool.Exec(ctx, rawPGTaskInsert, id, owner); err != nil {
						errs <- err
						return
					}
					lat.submit(id, t0)
					ids <- id
				}
			})
		}
		subs.Wait()
		close(ids) // a submitter that failed leaves the completer short
		wg.Wait()
		close(errs)
		return <-errs
	})
}

// rawComplete marks the tasks of ids completed in batches of what is
// queued, until want have been or ids is closed.
func rawComplete(ctx context.Context, pool *pgxpool.Pool, ids <-chan string, want int, lat *latencies[string]) error {
	batch := make([]string, 0, 1024)
	for done := 0; done < want; {
		id, ok := <-ids
		if !ok {
			return fmt.Errorf("%d of %d tasks submitted", done, want)
		}
		batch = append(batch[:0], id)
	drain:
		for {
			select {
			case id, ok := <-ids:
				if !ok {
					break drain
				}
				batch = append(batch, id)
			default:
				break drain
			}
		}
		tag, err := pool.Exec(ctx, rawPGTaskComplete, batch)
		if err != nil {
			return err
		}
		if int(tag.RowsAffected()) != len(batch) {
			return fmt.Errorf("completed %d rows of %d", tag.RowsAffected(), len(batch))
		}
		now := time.Now()
		for _, id := range batch {
			lat.complete(id, now)
		}
		done += len(batch)
	}
	return nil
}
