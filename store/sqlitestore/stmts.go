package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
)

// stmts are the statements prepared once at Open. A transaction uses them
// through Tx.StmtContext, which reuses the preparation on its connection.
type stmts struct {
	get, getMany, ownerOf, byOwner, children, pendingOwners      *sql.Stmt
	upsert, del, countTerminal, dropOldest, retainAge, oldestEnd *sql.Stmt
	insertNew, dataVersion                                       *sql.Stmt // the writer's cache (cache.go)
	updateState, updateDetail                                    *sql.Stmt // a known row's change (update.go)
	savepoint, rollbackTo, release                               *sql.Stmt // one Commit call's savepoint in a batch
}

var updateSet = func() string {
	var b strings.Builder
	for i, c := range strings.Split(columns, ",") {
		c = strings.TrimSpace(c)
		if c == "id" {
			continue
		}
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = excluded.%s", c, c)
	}
	return b.String()
}()

// terminalStatuses is the terminal statuses as a list of SQL literals.
var terminalStatuses = func() string {
	var q []string
	for _, st := range []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted} {
		q = append(q, "'"+string(st)+"'")
	}
	return strings.Join(q, ", ")
}()

func (st *stmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.get, "SELECT " + columns + " FROM tasks WHERE id = ?"},
		// The rows whose ids are in ?, a JSON array of strings.
		{&st.getMany, "SELECT " + columns + " FROM tasks WHERE id IN (SELECT value FROM json_each(?))"},
		{&st.ownerOf, "SELECT owner FROM tasks WHERE id = ?"},
		// Those of the owners in ?, a JSON array of strings, with a live
		// record or a terminal one not announced.
		{&st.pendingOwners, "SELECT DISTINCT owner FROM tasks WHERE owner IN (SELECT value FROM json_each(?)) AND (status NOT IN (" + terminalStatuses + ") OR announced = 0)"},
		{&st.byOwner, "SELECT " + columns + " FROM tasks WHERE owner = ?"},
		{&st.children, "SELECT " + columns + " FROM tasks WHERE parent_task_id = ? AND parent_task_id <> '' ORDER BY created_at, id"},
		// A record keeps the terminal_seq and terminal_at of the commit
		// that first made it terminal.
		{&st.upsert, "INSERT INTO tasks (" + columns + ", terminal_seq, terminal_at) VALUES (" +
			strings.Repeat("?, ", strings.Count(columns, ",")+2) + "?) ON CONFLICT (id) DO UPDATE SET " + updateSet +
			", terminal_seq = coalesce(tasks.terminal_seq, excluded.terminal_seq)" +
			", terminal_at = coalesce(tasks.terminal_at, excluded.terminal_at)"},
		// The upsert's row if there is none with its id: no change (and no
		// error from the id) if there is.
		{&st.insertNew, "INSERT INTO tasks (" + columns + ", terminal_seq, terminal_at) VALUES (" +
			strings.Repeat("?, ", strings.Count(columns, ",")+2) + "?) ON CONFLICT (id) DO NOTHING"},
		{&st.dataVersion, "PRAGMA data_version"},
		{&st.updateState, updateStateSQL},
		{&st.updateDetail, updateDetailSQL},
		{&st.del, "DELETE FROM tasks WHERE id = ?"},
		{&st.countTerminal, "SELECT count(*) FROM tasks WHERE owner = ? AND terminal_seq IS NOT NULL"},
		// Delete the owner's ?2 records that became terminal first.
		{&st.dropOldest, `DELETE FROM tasks WHERE id IN (
			SELECT id FROM tasks WHERE owner = ?1 AND terminal_seq IS NOT NULL ORDER BY terminal_seq LIMIT ?2)`},
		{&st.retainAge, "DELETE FROM tasks WHERE terminal_at IS NOT NULL AND terminal_at < ?"},
		{&st.oldestEnd, "SELECT min(terminal_at) FROM tasks WHERE terminal_at IS NOT NULL"},
		{&st.savepoint, "SAVEPOINT c"},
		{&st.rollbackTo, "ROLLBACK TO c"},
		{&st.release, "RELEASE c"},
	} {
		s, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("sqlitestore: prepare %q: %w", p.query, err)
		}
		*p.dst = s
	}
	return nil
}

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{st.get, st.getMany, st.pendingOwners, st.ownerOf, st.byOwner, st.children, st.upsert, st.insertNew, st.dataVersion, st.updateState, st.updateDetail, st.del, st.countTerminal, st.dropOldest, st.retainAge, st.oldestEnd, st.savepoint, st.rollbackTo, st.release} {
		if s != nil {
			s.Close()
		}
	}
}
