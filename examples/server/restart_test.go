package main

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// kill -9 of a SQLite server while tasks run, and a restart on the same
// file: each thread with news is woken once at start (a wake line), a
// thread without none is not; each thread hears "interrupted" once for each
// task that was running, and the end that had not been delivered yet, once.
func TestKillRestartSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tasks.db")
	testKillRestart(t, []string{"k1", "k2", "k3"}, "-db", db)
}

// The same on PostgreSQL (a throw-away server; skipped without the server
// binaries, except under CI=true where it fails). The records k1's and
// k2's tasks left running belong to this same instance ("e2e"), alive
// again: the pass at start finds them as what the instance left.
func TestKillRestartPostgres(t *testing.T) {
	t.Parallel()
	testKillRestart(t, []string{"k1", "k2", "k3"}, "-pg", pgtest.StartDSN(t), "-instance", "e2e")
}

// testKillRestart runs the kill -9 test on store; woken are the threads the
// restarted server must wake at start, each once (and no other).
func testKillRestart(t *testing.T, woken []string, store ...string) {
	model, url := newModel(t)
	args := append([]string{"-openai-url", url}, store...)
	srv := startServer(t, args...)
	gates := map[string]*gate{}
	for _, topic := range []string{"k1-a", "k1-b", "k2-a"} {
		gates[topic] = model.holdResearch(topic)
	}
	k3Gate := model.holdResearch("k3-a")
	r1 := srv.mustPost(t, "k1", "research k1-a; research k1-b")
	r2 := srv.mustPost(t, "k2", "research k2-a")
	r3 := srv.mustPost(t, "k3", "research k3-a in 1 step")
	k1a, k1b := startedTask(t, r1, "k1-a"), startedTask(t, r1, "k1-b")
	k2a, k3a := startedTask(t, r2, "k2-a"), startedTask(t, r3, "k3-a")
	for _, g := range gates {
		<-g.reached // running, in its first step
	}
	close(k3Gate.release)                   // k3's turn is over: its research ends between turns
	srv.waitWake(t, "k3", k3a, "completed") // ended, not delivered yet
	// k4's research ends between turns too, and its next turn hears it: no news.
	k4Gate := model.holdResearch("k4-a")
	k4a := startedTask(t, srv.mustPost(t, "k4", "research k4-a in 1 step"), "k4-a")
	close(k4Gate.release)
	srv.waitWake(t, "k4", k4a, "completed")
	if got, want := ends(t, srv.mustPost(t, "k4", "what came back?")), []string{"completed " + k4a}; !slices.Equal(got, want) {
		t.Fatalf("k4 before the kill: ends %q, want %q", got, want)
	}
	srv.kill(t)

	srv = startServer(t, args...)
	for _, thread := range woken {
		srv.waitWakeAtStart(t, thread) // before its turn takes the news
	}
	for _, tc := range []struct {
		thread string
		want   []string
	}{
		{"k1", []string{"interrupted " + k1a, "interrupted " + k1b}},
		{"k2", []string{"interrupted " + k2a}},
		{"k3", []string{"completed " + k3a}},
		{"k4", nil},
	} {
		res := srv.mustPost(t, tc.thread, "after the restart")
		// k1's tasks were spawned by parallel calls: in either order.
		if got := ends(t, res); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tc.want))) {
			t.Errorf("thread %s after the restart: ends %q, want %q", tc.thread, got, tc.want)
		}
		if got := ends(t, srv.mustPost(t, tc.thread, "once more")); len(got) != 0 {
			t.Errorf("thread %s, the turn after: ends %q, want none", tc.thread, got)
		}
	}
	if got, want := statuses(srv.tasks(t, "k1")), map[string]string{k1a: "interrupted", k1b: "interrupted"}; !maps.Equal(got, want) {
		t.Errorf("thread k1's tasks %v, want %v", got, want)
	}
	srv.stop(t) // the pass at start is over: Stop waits for it
	want := map[string]int{}
	for _, thread := range woken {
		want[thread] = 1
	}
	if got := wakesAtStart(srv); !maps.Equal(got, want) {
		t.Errorf("wakes at start %v, want %v", got, want)
	}
}

// After kill -9 of a PostgreSQL server that keeps its -instance id (as
// pgstore's Start asks, so that Restore interrupts its leftovers at once),
// the thread whose task the killed process left running is woken at start,
// once: the restarted instance is alive, so no reaper ends the record, and
// the Manager's pass at start lists the owners of what its instance left.
func TestPendingOwnersSameInstancePostgres(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	args := []string{"-openai-url", url, "-pg", pgtest.StartDSN(t), "-instance", "e2e"}
	srv := startServer(t, args...)
	gate := model.holdResearch("left")
	id := startedTask(t, srv.mustPost(t, "p1", "research left"), "left")
	<-gate.reached
	srv.kill(t)

	srv = startServer(t, args...)
	srv.stop(t) // the pass at start is over: Stop waits for it
	if got := wakesAtStart(srv); got["p1"] != 1 {
		t.Errorf("wakes at start %v, want p1 once (its task %s was left running)", got, id)
	}
}
