package pgstore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// Instance A, a real process, is killed with SIGKILL while its owner's
// tasks run; instance B's reaper interrupts them, and the owner's loop on B
// (a Plugin run) gets each interruption exactly once, although it arrives
// both as a reaper notice and as an unannounced record; a second run gets
// nothing, and every record is marked announced.
func TestCrashReapedAnnouncedOnce(t *testing.T) {
	dsn := pgtest.NewDSN(t)
	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := startInstance(t, dsn, "inst_ann_a", "alice", 3)
	b := startInstance(t, dsn, "inst_ann_b", "bob", 0)
	a.kill()
	waitFor(t, "B reaps A's tasks", func() bool {
		sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = 'inst_ann_a' AND state = 'alive'`)
		for _, id := range a.tasks {
			if m, err := s.Get(t.Context(), id); err != nil || m.Status != bgtask.StatusInterrupted {
				return false
			}
		}
		return true
	})
	drain := func() []string {
		b.send("drain alice")
		var took []string
		for line := b.next(); line != "end"; line = b.next() {
			id, ok := strings.CutPrefix(line, "took ")
			if !ok {
				t.Fatalf("drain: %q", line)
			}
			took = append(took, id)
		}
		return took
	}
	if got := drain(); !slices.Equal(got, a.tasks) {
		t.Fatalf("first run on B took %q, want each of %q once, in order", got, a.tasks)
	}
	if got := drain(); len(got) != 0 {
		t.Fatalf("second run on B took %q, want nothing", got)
	}
	for _, id := range a.tasks {
		if m, err := s.Get(t.Context(), id); err != nil || !m.Announced {
			t.Errorf("%s announced = %v, %v; want true", id, m.Announced, err)
		}
	}
	b.quit()
}
