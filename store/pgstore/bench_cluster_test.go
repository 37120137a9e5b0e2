package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// clusterOpts are the cluster benchmark's instance settings: a grace of
// three seconds and a heartbeat of half a second, so the interruption of
// a killed instance's tasks is measured in seconds, and a poll interval
// of half a second.
var clusterOpts = []string{"-grace", "3s", "-heartbeat", "500ms", "-poll", "500ms"}

// The bounds the cluster benchmarks compare with: a killed instance's
// tasks are interrupted within the grace and two heartbeats, a cancel
// reaches another instance's task within the poll interval.
const (
	clusterInterruptBound = 3*time.Second + 2*500*time.Millisecond
	clusterCancelBound    = 500 * time.Millisecond
)

// BenchmarkCluster is the scale-out scenario: four instance processes on
// one server with PostgreSQL's default settings, 25 owners each, spawn
// short, long and sub-agent tasks continuously for 20 seconds (one
// iteration; run it with -benchtime 1x), each of 4 callers per owner
// spawning a task and waiting for it, again and again (a closed loop: its
// commit latencies are set by how many callers wait). While they do, a
// fifth instance holding blocked tasks gets one of them cancelled from a
// sixth, and is then killed. It reports what clusterReport says.
//
//	go test -run '^$' -bench 'BenchmarkCluster$' -benchtime 1x ./store/pgstore
func BenchmarkCluster(b *testing.B) {
	runCluster(b, "inst_cluster", "cluster 20 25 4")
}

// BenchmarkClusterOpenLoop is BenchmarkCluster's scenario at a fixed
// offered load: 2,000 tasks/s across the four instances
// (PGSTORE_BENCH_RATE sets another; a tenth of them sub-agents with one
// child each, which adds a tenth) for 20 seconds, started whether the
// earlier tasks finished or not, so the commit latencies it reports are
// those of the load, not of how many callers wait. One iteration; run it
// with -benchtime 1x.
//
//	go test -run '^$' -bench BenchmarkClusterOpenLoop -benchtime 1x ./store/pgstore
func BenchmarkClusterOpenLoop(b *testing.B) {
	rate := 2000.0 // tasks/s offered across the four
	if v := os.Getenv("PGSTORE_BENCH_RATE"); v != "" {
		var err error
		if rate, err = strconv.ParseFloat(v, 64); err != nil || rate <= 0 {
			b.Fatalf("PGSTORE_BENCH_RATE=%q: want tasks/s, more than 0", v)
		}
	}
	runCluster(b, "inst_open", fmt.Sprintf("cluster 20 25 0 %g", rate/4))
}

// runCluster starts four instances (ids prefix_0 ...; owners o0_0 ...,
// o1_0 ...), a victim with 20 blocked tasks and a canceller, sends cmd to
// the four, and five seconds into the load cancels one of the victim's
// tasks from the canceller and then kills the victim. It reports:
//
//   - tasks/s: tasks (children included) that ran their whole lifecycle
//     (spawned, run, completed, waited for) per second, across the four;
//   - commits/s, and the commit p50 and p99 (the worst of the four), of
//     all commits and of spawns and completions apart, in ms;
//   - cancel-ms: from the cancel on one instance until the task on the
//     other is cancelled in the database (bound: cancel-bound-ms, the
//     poll interval);
//   - interrupt-ms: from the kill until every task of the killed instance
//     is interrupted (bound: interrupt-bound-ms, grace + 2 heartbeats);
//   - bad-notices: tasks whose owner did not get exactly one terminal
//     notice, and not-completed: tasks that did not complete (want 0).
func runCluster(b *testing.B, prefix, cmd string) {
	const instances = 4
	dsn := benchDSN(b)
	procs := make([]*instance, instances)
	for i := range procs {
		procs[i] = startInstance(b, dsn, fmt.Sprintf("%s_%d", prefix, i), fmt.Sprintf("o%d", i), 0, clusterOpts...)
	}
	victim := startInstance(b, dsn, "inst_victim", "victim", 20, clusterOpts...)
	canceller := startInstance(b, dsn, "inst_canceller", "victim", 0, clusterOpts...)
	for b.Loop() {
		for _, p := range procs {
			p.send(cmd)
		}
		results := make([]string, instances)
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() { results[i] = p.next() })
		}
		// Under the load: a cancel from the canceller of a task the
		// victim runs, then the victim's death.
		<-time.After(5 * time.Second)
		start := time.Now()
		canceller.send("cancel " + victim.tasks[0])
		waitDB(b, dsn, fmt.Sprintf(`SELECT 1 FROM bgtask_tasks WHERE id = '%s' AND status = 'cancelled'`, victim.tasks[0]), 1)
		cancelLat := time.Since(start)
		start = time.Now()
		victim.kill()
		waitDB(b, dsn, `SELECT 1 FROM bgtask_tasks WHERE instance = 'inst_victim' AND status = 'interrupted'`, len(victim.tasks)-1)
		killLat := time.Since(start)
		wg.Wait()
		if line := canceller.next(); line != "cancelled 1 ok" {
			b.Errorf("cancel answered %q", line)
		}
		var tasks, bad, other, commits, ms int64
		var p50, p99, sp50, sp99, cp50, cp99 int64 // µs, the worst of the four
		for i, r := range results {
			var t, c, o, bd, n, q50, q99, el, strays, s50, s99, c50, c99 int64
			var problem string
			if _, err := fmt.Sscanf(r, "cluster %d %d %d %d %d %d %d %d %d %d %d %d %d %s",
				&t, &c, &o, &bd, &n, &q50, &q99, &el, &strays, &s50, &s99, &c50, &c99, &problem); err != nil {
				b.Fatalf("%s: %q: %v", procs[i].id, r, err)
			}
			b.Logf("%s: %s", procs[i].id, r)
			tasks, bad, other, commits = tasks+t+c, bad+bd, other+o, commits+n
			p50, p99, sp50, sp99, cp50, cp99 = max(p50, q50), max(p99, q99), max(sp50, s50), max(sp99, s99), max(cp50, c50), max(cp99, c99)
			ms = max(ms, el)
			if o != 0 || bd != 0 {
				b.Errorf("%s: %q", procs[i].id, r)
			}
		}
		if n := sqlCount(b, dsn, fmt.Sprintf(`SELECT 1 FROM bgtask_instances WHERE state = 'alive' AND id LIKE '%s_%%'`, prefix)); n != instances {
			b.Errorf("%d instances alive, want %d", n, instances)
		}
		secs := float64(ms) / 1000
		b.ReportMetric(float64(tasks)/secs, "tasks/s")
		b.ReportMetric(float64(commits)/secs, "commits/s")
		b.ReportMetric(float64(p50)/1000, "commit-p50-ms")
		b.ReportMetric(float64(p99)/1000, "commit-p99-ms")
		b.ReportMetric(float64(sp50)/1000, "spawn-p50-ms")
		b.ReportMetric(float64(sp99)/1000, "spawn-p99-ms")
		b.ReportMetric(float64(cp50)/1000, "complete-p50-ms")
		b.ReportMetric(float64(cp99)/1000, "complete-p99-ms")
		b.ReportMetric(float64(cancelLat.Milliseconds()), "cancel-ms")
		b.ReportMetric(float64(clusterCancelBound.Milliseconds()), "cancel-bound-ms")
		b.ReportMetric(float64(killLat.Milliseconds()), "interrupt-ms")
		b.ReportMetric(float64(clusterInterruptBound.Milliseconds()), "interrupt-bound-ms")
		b.ReportMetric(float64(bad), "bad-notices")
		b.ReportMetric(float64(other), "not-completed")
	}
	for _, p := range append(procs, canceller) {
		p.quit()
	}
}

// waitDB polls query until it returns want rows (a hang guard ends it),
// on one connection: a connection per poll would load the server it
// measures.
func waitDB(b *testing.B, dsn, query string, want int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(hangGuard)
	for {
		tag, err := conn.Exec(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		if tag.RowsAffected() == int64(want) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not within %v: %s", hangGuard, query)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// sqlCount runs query and returns how many rows it returned.
func sqlCount(b *testing.B, dsn, query string) int64 { return sqlExec(b, dsn, query) }

// benchDSN is a new schema's DSN with the parameters in the environment
// variable PGSTORE_BENCH_PARAMS added (such as
// "&default_query_exec_mode=cache_describe", which turns off the prepared
// hot statements, to compare).
func benchDSN(b *testing.B) string { return pgtest.NewDSN(b) + os.Getenv("PGSTORE_BENCH_PARAMS") }
