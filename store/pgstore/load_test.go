package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// loadGrace is the grace and heartbeat of the load test's instances.
// Staying alive under load is a property of real time, so the test needs
// a real grace; ten seconds is far more than a heartbeat that waits for
// nothing but the server needs, and far less than the seconds a heartbeat
// queued behind JIT-compiled commits waited (the code before this test
// lost all four instances with it, and with a grace of two seconds).
var loadGrace = []string{"-grace", "10s", "-heartbeat", "500ms"}

// Four instance processes share one server (PostgreSQL's default planner
// and JIT settings) and spawn continuously, each task a commit when it
// starts and one when it ends, the ends running retention: none loses its
// registration, no task is interrupted, every task completes.
func TestLoadFourInstances(t *testing.T) {
	t.Parallel()
	const (
		instances = 4
		tasks     = 300 // per instance
		inFlight  = 8   // per instance
	)
	dsn := pgtest.NewDSN(t)
	procs := make([]*instance, instances)
	for i := range procs {
		procs[i] = startInstance(t, dsn, fmt.Sprintf("inst_load_%d", i), fmt.Sprintf("owner_%d", i), 0, loadGrace...)
	}
	for _, p := range procs {
		p.send(fmt.Sprintf("load %d %d", tasks, inFlight))
	}
	var wg sync.WaitGroup
	results := make([]string, instances)
	for i, p := range procs {
		wg.Go(func() { results[i] = p.next() })
	}
	wg.Wait()
	for i, got := range results {
		if want := fmt.Sprintf("load %d 0 0 ok", tasks); got != want {
			t.Errorf("%s: %q, want %q", procs[i].id, got, want)
		}
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_instances WHERE state = 'alive'`); n != instances {
		t.Errorf("%d instances alive, want %d", n, instances)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE status = 'completed'`); n != instances*tasks {
		t.Errorf("%d completed records, want %d", n, instances*tasks)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE status <> 'completed'`); n != 0 {
		t.Errorf("%d records not completed", n)
	}
	for _, p := range procs {
		p.quit()
	}
}
