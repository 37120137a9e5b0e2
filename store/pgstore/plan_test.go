package pgstore_test

import (
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore"
)

// The statements of a commit and of the reaper are served by indexes on a
// server with PostgreSQL's default planner and JIT settings, with or
// without statistics: no sequential scan of the tasks table, and a cost
// below the JIT threshold, so no commit pays for JIT compilation.
func TestPlansUseIndexes(t *testing.T) {
	t.Parallel()
	_, dsn := openStore(t)
	ctx := t.Context()
	conn := sqlConn(t, dsn)
	var jit, jitAvail, seqscan string
	var jitAbove float64
	if err := conn.QueryRow(ctx, `SELECT current_setting('jit'), pg_jit_available()::text,
		current_setting('enable_seqscan'), current_setting('jit_above_cost')::float8`).Scan(&jit, &jitAvail, &seqscan, &jitAbove); err != nil {
		t.Fatal(err)
	}
	if jit != "on" || jitAvail != "true" || seqscan != "on" {
		t.Fatalf("server settings jit=%s (available %s), enable_seqscan=%s; want the defaults on, on, on", jit, jitAvail, seqscan)
	}
	fillPlanTables(t, conn)
	spawned := rec("task_spawned", "owner_3", bgtype.StatusRunning)
	stmts := []struct {
		name string
		sql  string
		args []any
	}{
		{"lock by id", pgstore.LockByIDSQL, []any{[]string{"task_7", "task_live_9", "task_new"}}},
		{"lock by owner", pgstore.LockByOwnerSQL, []any{"owner_3"}},
		{"retain count", pgstore.RetainCountSQL, []any{[]string{"owner_3", "owner_4"}, 100}},
		{"lock aged", pgstore.LockAgedSQL, []any{int64(3600e6), 100}},
		{"retain age", pgstore.RetainAgeSQL, []any{int64(3600e6), 100, []string{"owner_3", "owner_4"}}},
		{"reap tasks", pgstore.ReapTasksSQL, []any{500}},
		{"insert notices", pgstore.InsertNoticesSQL, []any{[]string{"task_live_9", "task_live_10"}, []string{"task_live_8", "owner_3"}, []string{`{"kind":"interrupted"}`, `{"kind":"interrupted"}`}}},
		{"readdress notices", pgstore.ReaddressNoticesSQL, []any{int64(0)}},
		{"readdress reaped", pgstore.ReaddressReapedSQL, []any{[]string{"task_live_1", "task_live_2"}}},
		{"list tagged", pgstore.ListTaggedSQL, []any{"owner_3", []string{}, "t"}},
		{"list", pgstore.ListSQL, []any{"owner_3", []string{}}},
		{"list live", pgstore.ListSQL, []any{"owner_3", []string{"running", "queued"}}},
		{"insert one fenced", pgstore.InsertOneFencedSQL, append(pgstore.OneArgs(&spawned), "inst_0")},
		{"update one checked fenced", pgstore.UpdateOneCheckedFencedSQL, append(pgstore.UpdateOneArgs(&spawned, 1), "inst_0", int64(1))},
	}
	for _, stats := range []string{"none", "analyzed"} {
		if stats == "analyzed" {
			if _, err := conn.Exec(ctx, `ANALYZE bgtask_tasks; ANALYZE bgtask_instances; ANALYZE bgtask_notices`); err != nil {
				t.Fatal(err)
			}
		}
		for _, st := range stmts {
			t.Run(stats+"/"+st.name, func(t *testing.T) {
				var out []byte
				if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+st.sql, st.args...).Scan(&out); err != nil {
					t.Fatal(err)
				}
				plan := checkIndexPlan(t, st.sql, out)
				if cost := plan["Total Cost"].(float64); cost >= jitAbove {
					t.Errorf("cost %.0f (JIT above %.0f):\n%s", cost, jitAbove, out)
				}
			})
		}
	}
}

// seqScans returns the tables a plan scans sequentially, except the small
// instances table.
func seqScans(plan map[string]any) []string {
	var out []string
	if plan["Node Type"] == "Seq Scan" {
		if rel, _ := plan["Relation Name"].(string); !strings.HasPrefix(rel, "bgtask_instances") {
			out = append(out, rel)
		}
	}
	kids, _ := plan["Plans"].([]any)
	for _, k := range kids {
		if m, ok := k.(map[string]any); ok {
			out = append(out, seqScans(m)...)
		}
	}
	return out
}

// fillPlanTables fills the tables for a plan test: 40 owners with 500
// terminal rows each, 4000 running rows, two instances, and 20000
// notices, 200 of them undelivered, 20 of those addressed to a task.
func fillPlanTables(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `INSERT INTO bgtask_tasks (id, owner, status, instance, created_at, terminal_at)
		SELECT 'task_' || i, 'owner_' || (i % 40), 'completed', 'inst_' || (i % 4), now(), now() - i * interval '1 second'
		FROM generate_series(1, 20000) i;
		INSERT INTO bgtask_tasks (id, owner, status, instance, created_at)
		SELECT 'task_live_' || i, 'owner_' || (i % 40), 'running', 'inst_' || (i % 4), now()
		FROM generate_series(1, 4000) i;
		INSERT INTO bgtask_instances VALUES ('inst_0', now(), now(), 'alive'), ('inst_1', now(), now(), 'dead');
		INSERT INTO bgtask_notices (owner, event, task_id, task_owner, to_task, delivered_at)
		SELECT CASE WHEN i % 1000 = 0 THEN 'task_live_' || i / 1000 ELSE 'owner_' || (i % 40) END, '{}', 'task_' || i, 'owner_' || (i % 40),
			i % 1000 = 0, CASE WHEN i % 100 = 0 THEN NULL ELSE now() END
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
}
