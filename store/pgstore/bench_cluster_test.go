package pgstore_test

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// clusterOpts are the cluster benchmark's instance settings: a grace of
// three seconds and a heartbeat of half a second, so the interruption of
// a killed instance's tasks is measured in seconds, and a poll interval
// of half a second.
var clusterOpts = []string{"-grace", "3s", "-heartbeat", "500ms", "-poll", "500ms"}

// BenchmarkCluster is the scale-out scenario: four instance processes on
// one server with PostgreSQL's default settings, 25 owners each, spawn
// short, long and sub-agent tasks continuously for 20 seconds (one
// iteration; run it with -benchtime 1x). While they do, a fifth instance
// holding blocked tasks gets one of them cancelled from a sixth,
// and is then killed. It reports tasks/s through their whole lifecycle
// (spawned, run, completed, waited for), the commit p99 (the worst of the
// four), the cancel latency, the time until the killed instance's tasks
// are interrupted, and the owners' terminal notices that were not exactly
// one per task (want 0).
//
//	go test -run '^$' -bench BenchmarkCluster -benchtime 1x ./store/pgstore
func BenchmarkCluster(b *testing.B) {
	const (
		instances = 4
		owners    = 25
		workers   = 4 // per owner
		seconds   = 20
	)
	dsn := benchDSN(b)
	procs := make([]*instance, instances)
	for i := range procs {
		procs[i] = startInstance(b, dsn, fmt.Sprintf("inst_cluster_%d", i), fmt.Sprintf("o%d", i), 0, clusterOpts...)
	}
	victim := startInstance(b, dsn, "inst_victim", "victim", 20, clusterOpts...)
	canceller := startInstance(b, dsn, "inst_canceller", "victim", 0, clusterOpts...)
	for b.Loop() {
		for _, p := range procs {
			p.send(fmt.Sprintf("cluster %d %d %d", seconds, owners, workers))
		}
		results := make([]string, instances)
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() { results[i] = p.next() })
		}
		// Under the load: a cancel from instance 0 of a task the victim
		// runs, then the victim's death.
		time.Sleep(5 * time.Second)
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
		var tasks, children, other, bad, commits, p99max, ms int64
		for i, r := range results {
			var t, c, o, bd, n, p50, p99, el, strays int64
			var problem string
			if _, err := fmt.Sscanf(r, "cluster %d %d %d %d %d %d %d %d %d %s", &t, &c, &o, &bd, &n, &p50, &p99, &el, &strays, &problem); err != nil {
				b.Fatalf("%s: %q: %v", procs[i].id, r, err)
			}
			b.Logf("%s: %s", procs[i].id, r)
			tasks, children, other, bad, commits = tasks+t, children+c, other+o, bad+bd, commits+n
			p99max, ms = max(p99max, p99), max(ms, el)
			if o != 0 || bd != 0 {
				b.Errorf("%s: %q", procs[i].id, r)
			}
		}
		if n := sqlCount(b, dsn, `SELECT 1 FROM bgtask_instances WHERE state = 'alive' AND id LIKE 'inst_cluster_%'`); n != instances {
			b.Errorf("%d instances alive, want %d", n, instances)
		}
		secs := float64(ms) / 1000
		b.ReportMetric(float64(tasks+children)/secs, "tasks/s")
		b.ReportMetric(float64(commits)/secs, "commits/s")
		b.ReportMetric(float64(p99max)/1000, "commit-p99-ms")
		b.ReportMetric(float64(cancelLat.Milliseconds()), "cancel-ms")
		b.ReportMetric(float64(killLat.Milliseconds()), "interrupt-ms")
		b.ReportMetric(float64(bad), "bad-notices")
		b.ReportMetric(float64(other), "not-completed")
	}
	for _, p := range append(procs, canceller) {
		p.quit()
	}
}

// waitDB polls query until it returns want rows (a hang guard ends it).
func waitDB(b *testing.B, dsn, query string, want int) {
	b.Helper()
	deadline := time.Now().Add(hangGuard)
	for sqlCount(b, dsn, query) != int64(want) {
		if time.Now().After(deadline) {
			b.Fatalf("not within %v: %s", hangGuard, query)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sqlCount runs query and returns how many rows it returned.
func sqlCount(b *testing.B, dsn, query string) int64 { return sqlExec(b, dsn, query) }

// BenchmarkClusterOpenLoop is BenchmarkCluster's four instances at a fixed
// offered load: 1,000 tasks/s across the four (PGSTORE_BENCH_RATE sets
// another; a tenth of them sub-agents with one child each) for 20
// seconds, whether the earlier tasks finished or not, so the commit
// latencies it reports (p50 and p99, the worst of the four) are not set by
// how many callers wait, as in a closed loop. One iteration; run it with
// -benchtime 1x.
//
//	go test -run '^$' -bench BenchmarkClusterOpenLoop -benchtime 1x ./store/pgstore
func BenchmarkClusterOpenLoop(b *testing.B) {
	const (
		instances = 4
		owners    = 25
		seconds   = 20
	)
	rate := 1000.0 // tasks/s offered across the four
	if v := os.Getenv("PGSTORE_BENCH_RATE"); v != "" {
		var err error
		if rate, err = strconv.ParseFloat(v, 64); err != nil || rate <= 0 {
			b.Fatalf("PGSTORE_BENCH_RATE=%q: want tasks/s, more than 0", v)
		}
	}
	dsn := benchDSN(b)
	procs := make([]*instance, instances)
	for i := range procs {
		procs[i] = startInstance(b, dsn, fmt.Sprintf("inst_open_%d", i), fmt.Sprintf("o%d", i), 0, clusterOpts...)
	}
	for b.Loop() {
		for _, p := range procs {
			p.send(fmt.Sprintf("cluster %d %d 0 %g", seconds, owners, rate/instances))
		}
		results := make([]string, instances)
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() { results[i] = p.next() })
		}
		wg.Wait()
		var tasks, bad, other, commits, p50max, p99max, ms int64
		for i, r := range results {
			var t, c, o, bd, n, p50, p99, el, strays int64
			var problem string
			if _, err := fmt.Sscanf(r, "cluster %d %d %d %d %d %d %d %d %d %s", &t, &c, &o, &bd, &n, &p50, &p99, &el, &strays, &problem); err != nil {
				b.Fatalf("%s: %q: %v", procs[i].id, r, err)
			}
			b.Logf("%s: %s", procs[i].id, r)
			tasks, bad, other, commits = tasks+t+c, bad+bd, other+o, commits+n
			p50max, p99max, ms = max(p50max, p50), max(p99max, p99), max(ms, el)
			if o != 0 || bd != 0 {
				b.Errorf("%s: %q", procs[i].id, r)
			}
		}
		secs := float64(ms) / 1000
		b.ReportMetric(float64(tasks)/secs, "tasks/s")
		b.ReportMetric(float64(commits)/secs, "commits/s")
		b.ReportMetric(float64(p50max)/1000, "commit-p50-ms")
		b.ReportMetric(float64(p99max)/1000, "commit-p99-ms")
		b.ReportMetric(float64(bad), "bad-notices")
		b.ReportMetric(float64(other), "not-completed")
	}
	for _, p := range procs {
		p.quit()
	}
}

// benchDSN is a new schema's DSN with the parameters in the environment
// variable PGSTORE_BENCH_PARAMS added (such as
// "&default_query_exec_mode=cache_describe", which turns off the prepared
// hot statements, to compare).
func benchDSN(b *testing.B) string { return pgtest.NewDSN(b) + os.Getenv("PGSTORE_BENCH_PARAMS") }
