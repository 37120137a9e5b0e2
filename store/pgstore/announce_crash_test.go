package pgstore_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// Instance A, a real process, is killed with SIGKILL while its owner's
// tasks run; instance B's reaper interrupts them, and the owner's loop on B
// (a Plugin run) gets each interruption exactly once, although it arrives
// both as a reaper notice and as an unannounced record; a second run gets
// nothing, and every record is marked announced.
func TestCrashReapedAnnouncedOnce(t *testing.T) {
	t.Parallel()
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
			if m, err := s.Get(t.Context(), id); err != nil || m.Status != bgtype.StatusInterrupted {
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

// Instance A, a real process, is killed with SIGKILL while its owner's
// task, sub-agents and the sub-agents' own tasks run; instance B's reaper
// interrupts them all. The sub-agents' tasks are owned by the sub-agents,
// which are gone, so their notices go up to the owner: the owner's loop on
// B hands out every task, sub-agent and child exactly once, whether its
// run starts before the reap or after, and a fresh process's run of the
// owner hands out nothing more. No notice is left undelivered.
func TestCrashReapedChildrenReachOwner(t *testing.T) {
	t.Parallel()
	for _, reapFirst := range []bool{true, false} {
		name := "run start before reap"
		if reapFirst {
			name = "reap before run start"
		}
		t.Run(name, func(t *testing.T) {
			dsn := pgtest.NewDSN(t)
			s, err := pgstore.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a := startInstance(t, dsn, "inst_kids_a", "alice", 1, "-agents", "2", "-children", "3")
			b := startInstance(t, dsn, "inst_kids_b", "bob", 0)
			all := slices.Concat(a.tasks, a.agents, a.children)
			if len(all) != 9 {
				t.Fatalf("A started %d tasks, sub-agents and children, want 9", len(all))
			}
			took := map[string]int{}
			drain := func(p *instance) {
				p.send("drain alice")
				for line := p.next(); line != "end"; line = p.next() {
					id, ok := strings.CutPrefix(line, "took ")
					if !ok {
						t.Fatalf("drain: %q", line)
					}
					took[id]++
				}
			}
			a.kill()
			if !reapFirst {
				drain(b) // A's records are another live instance's: nothing yet
				if len(took) != 0 {
					t.Fatalf("B's run took %v before the reap", took)
				}
			}
			waitFor(t, "B reaps A's tasks", func() bool {
				sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = 'inst_kids_a' AND state = 'alive'`)
				for _, id := range all {
					if m, err := s.Get(t.Context(), id); err != nil || m.Status != bgtype.StatusInterrupted {
						return false
					}
				}
				return true
			})
			drain(b)
			drain(b)
			b.quit()
			c := startInstance(t, dsn, "inst_kids_c", "carol", 0)
			drain(c)
			c.quit()
			want := map[string]int{}
			for _, id := range all {
				want[id] = 1
			}
			if !maps.Equal(took, want) {
				t.Errorf("the owner's runs took %v\nwant each once: %v", took, want)
			}
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_notices WHERE delivered_at IS NULL`); n != 0 {
				t.Errorf("%d notices nobody took", n)
			}
		})
	}
}
