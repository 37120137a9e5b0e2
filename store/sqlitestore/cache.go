package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// maxCached bounds how many records the writer keeps.
const maxCached = 4096

// rowCache is the writer's copy of the live records it wrote, as a read
// would decode them, so that a commit updating one (a completion, a
// progress step) needs no read first. Only records whose row has no
// terminal_seq are kept: retention never deletes them, and a record that
// ends leaves the cache. The copy is trusted only while no other
// connection has written the file (PRAGMA data_version on the writer's own
// connection, read once per transaction); changes are kept only once their
// transaction has committed. Only the writer uses it.
type rowCache struct {
	rows    map[string]bgtype.TaskMeta
	version int64 // data_version at the last check
	checked bool
}

// validate empties the cache if another connection has committed since the
// last transaction. tx holds the write lock, so nothing else can commit
// until it ends.
func (c *rowCache) validate(ctx context.Context, tx *sql.Tx, st *sql.Stmt) error {
	var v int64
	if err := tx.StmtContext(ctx, st).QueryRowContext(ctx).Scan(&v); err != nil {
		return fmt.Errorf("sqlitestore: read data_version: %w", err)
	}
	if !c.checked || v != c.version {
		clear(c.rows)
	}
	c.version, c.checked = v, true
	return nil
}

// cacheOp is one record's change to the cache, applied once its
// transaction commits: keep m, or forget id.
type cacheOp struct {
	id     string
	m      bgtype.TaskMeta
	forget bool
}

// commit applies the changes of a committed transaction.
func (c *rowCache) commit(ops []cacheOp) {
	for _, op := range ops {
		if op.forget {
			delete(c.rows, op.id)
			continue
		}
		if _, ok := c.rows[op.id]; !ok && len(c.rows) >= maxCached {
			clear(c.rows) // bounded: a miss costs one read
		}
		c.rows[op.id] = op.m
	}
}
