package pgstore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore"
)

// The settled notification of a write made outside the Store (by hand, by
// a tool) is what the row trigger it replaced sent (decision 806): one per
// row inserted with a status other than queued or running, and one per
// row whose status an update changed to one; the terminal counts follow.
func TestSettledNotifiedOncePerSettledRow(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	ch := pgstore.SettledChannel(s)
	ctx := guard(t)
	conn := sqlConn(t, dsn)
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{ch}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at)
		SELECT 'task_' || i, 'alice', 'running', now() FROM generate_series(1, 4) AS i`)
	for _, c := range []struct {
		name, sql string
		heard     []string
	}{
		{"insert running", `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_r', 'bob', 'running', now())`, nil},
		{"insert queued", `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_q', 'bob', 'queued', now())`, nil},
		{"insert completed", `INSERT INTO bgtask_tasks (id, owner, status, created_at, terminal_at) VALUES ('task_c', 'bob', 'completed', now(), now())`,
			[]string{"task_c bob"}},
		{"insert awaiting input", `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_a', 'bob', 'awaiting_input', now())`,
			[]string{"task_a bob"}},
		{"update two to completed", `UPDATE bgtask_tasks SET status = 'completed', terminal_at = now() WHERE id IN ('task_1', 'task_2')`,
			[]string{"task_1 alice", "task_2 alice"}},
		{"update without the status", `UPDATE bgtask_tasks SET description = 'x' WHERE owner = 'alice'`, nil},
		{"update to the same status", `UPDATE bgtask_tasks SET status = 'completed' WHERE id = 'task_1'`, nil},
		{"update a terminal row to another", `UPDATE bgtask_tasks SET status = 'failed' WHERE id = 'task_2'`, []string{"task_2 alice"}},
		{"update running to awaiting input", `UPDATE bgtask_tasks SET status = 'awaiting_input' WHERE id = 'task_3'`, []string{"task_3 alice"}},
		{"update back to running", `UPDATE bgtask_tasks SET status = 'running' WHERE id = 'task_3'`, nil},
		{"delete a terminal row", `DELETE FROM bgtask_tasks WHERE id = 'task_1'`, nil},
	} {
		sqlExec(t, dsn, c.sql)
		sqlExec(t, dsn, `SELECT pg_notify($1, 'fence')`, ch)
		var heard []string
		for n := nextNotice(t, conn); n != ch+" fence"; n = nextNotice(t, conn) {
			heard = append(heard, strings.TrimPrefix(n, ch+" "))
		}
		slices.Sort(heard)
		if !slices.Equal(heard, c.heard) {
			t.Errorf("%s: heard %q, want %q", c.name, heard, c.heard)
		}
		countsMatch(t, dsn)
	}
}
