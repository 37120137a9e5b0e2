package pgstore_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// Crash tests of resumable kinds across processes: instancehelper's
// steps/v1 (internal/instancehelper/kind.go) writes each step it runs to
// kind_effects and each attempt it runs to kind_running and kind_peak.

// kindTables creates the tables steps/v1 writes to.
func kindTables(t *testing.T, dsn string) {
	t.Helper()
	sqlExec(t, dsn, `CREATE TABLE kind_effects (id bigserial PRIMARY KEY, task_id text NOT NULL, step int NOT NULL, attempt int NOT NULL, instance text NOT NULL);
		CREATE TABLE kind_running (task_id text NOT NULL, attempt int NOT NULL, instance text NOT NULL);
		CREATE TABLE kind_peak (id bigserial PRIMARY KEY, n int NOT NULL)`)
}

// kindEffects returns the steps run of each task, in order, as
// "step attempt instance".
func kindEffects(t *testing.T, dsn string) map[string][]string {
	t.Helper()
	rows, err := sqlConn(t, dsn).Query(t.Context(), `SELECT task_id, step, attempt, instance FROM kind_effects ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][]string{}
	for rows.Next() {
		var (
			id, inst      string
			step, attempt int
		)
		if err := rows.Scan(&id, &step, &attempt, &inst); err != nil {
			t.Fatal(err)
		}
		got[id] = append(got[id], fmt.Sprintf("%d %d %s", step, attempt, inst))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// spawnResumable has p spawn n tasks of steps/v1 and returns their ids,
// once it has also seen held lines for holds of them.
func spawnResumable(t *testing.T, p *instance, n, steps, holdAt, holds int) (ids, held []string) {
	t.Helper()
	p.send(fmt.Sprintf("resume %d %d %d", n, steps, holdAt))
	for done := false; !done || len(held) < holds; {
		verb, arg, _ := strings.Cut(p.next(), " ")
		switch verb {
		case "resumable":
			ids = append(ids, arg)
		case "resumed":
			done = true
		case "held":
			held = append(held, arg)
		default:
			t.Fatalf("%s: %q", p.id, verb+" "+arg)
		}
	}
	return ids, held
}

// drainTook runs one run of owner on p and adds what it handed out to took.
func drainTook(t *testing.T, p *instance, owner string, took map[string]int) {
	t.Helper()
	p.send("drain " + owner)
	for line := p.next(); line != "end"; line = p.next() {
		id, ok := strings.CutPrefix(line, "took ")
		if !ok {
			t.Fatalf("drain: %q", line)
		}
		took[id]++
	}
}

// reapUntil declares the instance dead (its heartbeat dated back past the
// grace, again on every check: one it sent just before it stopped may land
// after) and reaps with s until done holds.
func reapUntil(t *testing.T, s *pgstore.Store, dsn, instance, what string, done func() bool) {
	t.Helper()
	waitFor(t, what, func() bool {
		sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '2 hours' WHERE id = $1 AND state = 'alive'`, instance)
		if _, err := s.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		return done()
	})
}

// A zombie: process A runs a resumable task and is stopped (SIGSTOP) after
// its first step's checkpoint; the reaper declares A dead and requeues the
// task; process B claims it and runs attempt 2 from the checkpoint, to the
// end. Then A runs again (SIGCONT) and its attempt goes on: its checkpoint
// Save fails with ErrSuperseded and changes nothing, its result is
// dropped. Step 1 ran once on attempt 1, steps 2 and 3 once on attempt 2;
// the owner is handed one terminal event, the completion of attempt 2.
func TestCrashResumableZombie(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	kindTables(t, dsn)
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := startInstance(t, dsn, "inst_rz_a", "alice", 0, "-kinds", "-hold")
	ids, _ := spawnResumable(t, a, 1, 3, 1, 1)
	id := ids[0]
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A stopped", func() bool { return procState(a.cmd.Process.Pid) == 'T' })
	b := startInstance(t, dsn, "inst_rz_b", "bob", 0, "-kinds")
	get := func() bgtype.TaskMeta {
		m, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	reapUntil(t, s, dsn, "inst_rz_a", "A reaped, B resumes the task and completes it", func() bool {
		return get().Status == bgtype.StatusCompleted // B's claim loop claims it once requeued
	})
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.send("release")
	// refused by the record (another attempt ended it) and by the fence on A's registration
	want := "zombie " + id + " " + bgtask.ErrSuperseded.Error() + " (attempt 1; the record is on attempt 2, completed): pgstore: " + bgtask.ErrInstanceLost.Error()
	if got := a.next(); got != want {
		t.Fatalf("A after SIGCONT: %q, want %q", got, want)
	}
	a.quit()
	m := get()
	if m.Status != bgtype.StatusCompleted || m.Attempt != 2 || m.Instance != "inst_rz_b" || string(m.Result) != "3" ||
		string(m.Resume.Checkpoint) != `{"next":4}` || m.Resume.SavedBy != 2 {
		t.Fatalf("record after the zombie: %+v %+v", m, m.Resume)
	}
	steps := []string{"1 1 inst_rz_a", "2 2 inst_rz_b", "3 2 inst_rz_b"}
	if got := kindEffects(t, dsn)[id]; !slices.Equal(got, steps) {
		t.Fatalf("steps run %q, want %q", got, steps)
	}
	took := map[string]int{}
	drainTook(t, b, "alice", took)
	drainTook(t, b, "alice", took)
	b.quit()
	c := startInstance(t, dsn, "inst_rz_c", "carol", 0)
	drainTook(t, c, "alice", took)
	c.quit()
	if !maps.Equal(took, map[string]int{id: 1}) {
		t.Fatalf("the owner's runs took %v, want %s once", took, id)
	}
	if m := get(); !m.Announced {
		t.Fatalf("not announced: %+v", m)
	}
}

// A fleet of four processes registers steps/v1 with MaxRunning 2; A spawns
// 12 tasks and runs the first two, which hold after step 1, so the kind is
// full and the other ten wait. A is killed (SIGKILL) and reaped: B, C and
// D claim the twelve (A's two from their checkpoints, on attempt 2) and
// run each to completion exactly once, never more than two at once across
// the processes; no task is left waiting, and the owner is handed one
// terminal event per task.
func TestCrashResumableFleet(t *testing.T) {
	t.Parallel()
	const (
		n     = 12
		limit = 2
	)
	dsn := pgtest.NewDSN(t)
	kindTables(t, dsn)
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	capped := []string{"-kinds", "-maxrunning", fmt.Sprint(limit)}
	a := startInstance(t, dsn, "inst_rf_a", "alice", 0, append(capped, "-hold")...)
	var fleet []*instance
	for _, id := range []string{"inst_rf_b", "inst_rf_c", "inst_rf_d"} {
		fleet = append(fleet, startInstance(t, dsn, id, "bob", 0, capped...))
	}
	ids, held := spawnResumable(t, a, n, 3, 1, limit)
	var peak int
	sqlScan(t, dsn, `SELECT coalesce(max(n), 0) FROM kind_peak`, &peak)
	if peak != limit {
		t.Fatalf("%d ran at once before the kill, want %d", peak, limit)
	}
	a.kill()
	sqlExec(t, dsn, `DELETE FROM kind_running WHERE instance = 'inst_rf_a'`) // its process is gone
	reapUntil(t, s, dsn, "inst_rf_a", "A reaped, every task completed by B, C and D", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE status = 'completed'`) == n
	})
	effects := kindEffects(t, dsn)
	for _, id := range ids {
		m, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		attempt, first := 1, "1 1 "+m.Instance
		if slices.Contains(held, id) {
			attempt, first = 2, "1 1 inst_rf_a" // resumed from step 2
		}
		if m.Status != bgtype.StatusCompleted || m.Attempt != int64(attempt) || m.Instance == "inst_rf_a" || string(m.Result) != "3" {
			t.Fatalf("%s: %+v", id, m)
		}
		steps := []string{first, fmt.Sprintf("2 %d %s", attempt, m.Instance), fmt.Sprintf("3 %d %s", attempt, m.Instance)}
		if got := effects[id]; !slices.Equal(got, steps) {
			t.Fatalf("steps of %s: %q, want %q", id, got, steps)
		}
	}
	var runs int
	sqlScan(t, dsn, `SELECT count(*), max(n) FROM kind_peak`, &runs, &peak)
	if runs != n+limit || peak > limit {
		t.Fatalf("%d attempts ran, at most %d at once; want %d, at most %d", runs, peak, n+limit, limit)
	}
	took := map[string]int{} // alice's runs, one instance after the other (one holds her run)
	for _, p := range fleet {
		drainTook(t, p, "alice", took)
		drainTook(t, p, "alice", took)
		p.quit()
	}
	e := startInstance(t, dsn, "inst_rf_e", "erin", 0)
	drainTook(t, e, "alice", took)
	e.quit()
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	if !maps.Equal(took, want) {
		t.Fatalf("the owner's runs took %v\nwant each once: %v", took, want)
	}
	if k := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE NOT announced`); k != 0 {
		t.Fatalf("%d records not announced", k)
	}
}
