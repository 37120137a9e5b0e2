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
// them per call. Every one of them is served by an index in its generic
// plan (the plan PostgreSQL may cache for a prepared statement after five
// calls), whatever the table's size and statistics; plan_test.go proves it.
var hotStatements = []string{
	lockByIDSQL, lockByOwnerSQL, retainCountSQL, retainAgeSQL, fenceSQL,
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
		return nil
	}
}
