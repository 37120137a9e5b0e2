package main

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// kill -9 of a SQLite server while tasks run, and a restart on the same
// file: each thread hears "interrupted" once for each task that was
// running, and the end that had not been delivered yet, once.
func TestKillRestartSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tasks.db")
	testKillRestart(t, "-db", db)
}

// The same on PostgreSQL (a throw-away server; skipped without the server
// binaries, except under CI=true where it fails).
func TestKillRestartPostgres(t *testing.T) {
	t.Parallel()
	testKillRestart(t, "-pg", pgtest.StartDSN(t), "-instance", "e2e")
}

func testKillRestart(t *testing.T, store ...string) {
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
	srv.kill(t)

	srv = startServer(t, args...)
	for _, tc := range []struct {
		thread string
		want   []string
	}{
		{"k1", []string{"interrupted " + k1a, "interrupted " + k1b}},
		{"k2", []string{"interrupted " + k2a}},
		{"k3", []string{"completed " + k3a}},
	} {
		res := srv.mustPost(t, tc.thread, "after the restart")
		if got := ends(t, res); !slices.Equal(got, tc.want) {
			t.Errorf("thread %s after the restart: ends %q, want %q", tc.thread, got, tc.want)
		}
		if got := ends(t, srv.mustPost(t, tc.thread, "once more")); len(got) != 0 {
			t.Errorf("thread %s, the turn after: ends %q, want none", tc.thread, got)
		}
	}
	want := map[string]string{k1a: "interrupted", k1b: "interrupted"}
	if got := statuses(srv.tasks(t, "k1")); !maps.Equal(got, want) {
		t.Errorf("thread k1's tasks %v, want %v", got, want)
	}
}
