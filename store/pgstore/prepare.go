package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// hotStatements are the statements every commit, spawn and Get runs.
// Each connection of the commit pool prepares them once, named by their
// text, so pgx runs them (in batches too) without parsing and planning
// them per call: the connection runs them with their generic plan
// (plan_cache_mode = force_generic_plan, which touches only prepared
// statements), planned once, where PostgreSQL would otherwise plan a
// statement for its values on each call whenever it guesses that cheaper
// (about 200µs for the retention statement). Every one of them finds its
// rows by key, and is served by an index in its generic plan, whatever the
// table's size and statistics; plan_generic_test.go proves it.
//
// The connection plans each statement at its first run and keeps that
// plan until the next ANALYZE of its tables. On a fresh table (a new
// deployment, before autovacuum's first ANALYZE) the planner found a
// sequential scan of a few pages cheaper than ten index lookups, and the
// connection kept that plan while the table grew to thousands of rows: the
// group's UPDATE took twice as long (decision 799). So the commit
// connections run with enable_seqscan off, which leaves a sequential scan
// only where no index serves.
var hotStatements = []string{
	lockByIDSQL, lockByOwnerSQL, retainCountSQL, fenceSQL,
	insertSQL, insertFencedSQL, insertOneSQL, insertOneFencedSQL, updateSQL, deleteSQL,
	updateCheckedSQL, updateCheckedFencedSQL, updateOneSQL, updateOneCheckedSQL, updateOneCheckedFencedSQL,
	getByIDSQL,
}

// prepareHot returns an AfterConnect hook that prepares hotStatements on
// each new connection once ready is set (before, the schema the
// statements name may not exist yet).
func prepareHot(ready *atomic.Bool) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, c *pgx.Conn) error {
		if !ready.Load() {
			return nil
		}
		for _, sql := range hotStatements {
			if _, err := c.Prepare(ctx, sql, sql); err != nil {
				return fmt.Errorf("pgstore: prepare: %w", err)
			}
		}
		for _, set := range []string{"SET plan_cache_mode = force_generic_plan", "SET enable_seqscan = off"} {
			if _, err := c.Exec(ctx, set); err != nil {
				return fmt.Errorf("pgstore: prepare: %w", err)
			}
		}
		return nil
	}
}
