package pgstore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore"
)

// The statements a Store prepares are served by indexes in their generic
// plans (the plans PostgreSQL caches for a prepared statement), on a filled
// and analyzed table with the default planner and JIT settings: no
// sequential scan of the tasks table and no JIT.
func TestGenericPlansUseIndexes(t *testing.T) {
	t.Parallel()
	_, dsn := openStore(t)
	ctx := t.Context()
	conn := sqlConn(t, dsn)
	fillPlanTables(t, conn)
	if _, err := conn.Exec(ctx, `ANALYZE bgtask_tasks; ANALYZE bgtask_instances; SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if len(pgstore.HotStatements) != 16 {
		t.Fatalf("%d hot statements, want 16", len(pgstore.HotStatements))
	}
	for i, sql := range pgstore.HotStatements {
		name := fmt.Sprintf("hot_%d", i)
		t.Run(name, func(t *testing.T) {
			sd, err := conn.Prepare(ctx, name, sql)
			if err != nil {
				t.Fatal(err)
			}
			nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(sd.ParamOIDs)), ", ")
			var out []byte
			if err := conn.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (FORMAT JSON) EXECUTE %s(%s)`, name, nulls)).Scan(&out); err != nil {
				t.Fatal(err)
			}
			checkIndexPlan(t, sql, out)
		})
	}
}

// checkIndexPlan fails t unless out, the EXPLAIN (FORMAT JSON) of sql,
// is one plan that scans no table but bgtask_instances sequentially and
// is not JIT-compiled. It returns the plan's top node.
func checkIndexPlan(t *testing.T, sql string, out []byte) map[string]any {
	t.Helper()
	var plans []struct {
		Plan map[string]any
		JIT  any
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", out, err)
	}
	if scans := seqScans(plans[0].Plan); len(scans) > 0 {
		t.Errorf("generic plan scans %v sequentially:\n%s\n%s", scans, sql, out)
	}
	if plans[0].JIT != nil {
		t.Errorf("generic plan is JIT-compiled:\n%s\n%s", sql, out)
	}
	return plans[0].Plan
}

// The generic plans of a Store's hot statements use indexes on a fresh
// table too: a few rows, never analyzed, as in a new deployment's first
// minute, before autovacuum's first ANALYZE. A connection plans each
// statement once, at its first run, and keeps that plan until an ANALYZE
// of the table; one made while the table was small kept scanning it whole
// as it grew (decision 799).
func TestGenericPlansUseIndexesOnAFreshTable(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	ctx := t.Context()
	conn := sqlConn(t, dsn)
	if _, err := conn.Exec(ctx, `INSERT INTO bgtask_tasks (id, owner, status, instance, created_at)
		SELECT 'task_' || i, 'owner_' || (i % 4), 'running', 'inst_0', now() FROM generate_series(1, 20) i`); err != nil {
		t.Fatal(err)
	}
	for i, sql := range pgstore.HotStatements {
		t.Run(fmt.Sprintf("hot_%d", i), func(t *testing.T) {
			out, err := pgstore.ExplainHot(ctx, s, i)
			if err != nil {
				t.Fatal(err)
			}
			checkIndexPlan(t, sql, out)
		})
	}
}

// A Store's commit connections have the hot statements prepared, and run
// them with their generic plans, planned with sequential scans off.
func TestHotStatementsPrepared(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t)
	n, err := pgstore.PreparedHot(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(pgstore.HotStatements) {
		t.Errorf("%d hot statements prepared, want %d", n, len(pgstore.HotStatements))
	}
	for name, want := range map[string]string{"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"} {
		if got, err := pgstore.CommitSetting(t.Context(), s, name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %s", name, got, err, want)
		}
	}
}
