package pgstore_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// instanceStore opens a Store on dsn and starts a Manager on it as runtime
// instance id. Its heartbeat and reaper tick every half hour, so neither
// runs during a test: the test stamps heartbeats and calls Reap itself.
// Both end with the test (the Manager first), unless stop ends them before.
func instanceStore(t *testing.T, dsn, id string) (*pgstore.Store, *bgtask.Manager, func()) {
	t.Helper()
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m.Runtime()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown %s: %v", id, err)
		}
		s.Close() // a killed instance's Close fails to mark it stopped: it is dead already
	}
	t.Cleanup(stop)
	return s, m, stop
}

// killInstance makes instance id look killed: its heartbeat a day old,
// past the grace of an hour, as after a kill -9 long ago.
func killInstance(t *testing.T, dsn, id string) {
	t.Helper()
	sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = $1`, id)
}

// ownerRun is an owner's agent loop on a Plugin, counting the terminal
// events the model is handed, by task id.
type ownerRun struct {
	t    *testing.T
	p    *agent.Plugin
	run  string
	seen map[string]int
}

func startRun(t *testing.T, m *bgtask.Manager, owner, run string, seen map[string]int) *ownerRun {
	t.Helper()
	p, err := agent.NewPlugin(m, owner, agent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: run}); err != nil {
		t.Fatalf("RunStart: %v", err)
	}
	return &ownerRun{t: t, p: p, run: run, seen: seen}
}

// step is one BeforeInference; it counts the terminal events handed out.
func (r *ownerRun) step() {
	r.t.Helper()
	msgs, err := r.p.BeforeInference(r.t.Context())
	if err != nil {
		r.t.Fatalf("BeforeInference: %v", err)
	}
	for _, msg := range msgs {
		if msg.Event != nil && msg.Event.Kind.IsTerminal() {
			r.seen[msg.Event.TaskID]++
		}
	}
}

func (r *ownerRun) end() {
	r.t.Helper()
	if err := r.p.RunEnd(r.t.Context(), bgtask.RunOutcome{RunID: r.run}); err != nil {
		r.t.Fatalf("RunEnd: %v", err)
	}
	if err := r.p.Close(r.t.Context()); err != nil {
		r.t.Fatalf("Close: %v", err)
	}
}

// subAgentTree starts on m, for owner, a sub-agent that starts `children`
// tasks that run until cancelled (with levels 2, a sub-agent that starts
// the sub-agent). With ends, the sub-agent that owns the children
// completes once they run; else it runs until cancelled. It returns the
// ids of the sub-agents, top first, and of the children, once they all
// run.
func subAgentTree(t *testing.T, m *bgtask.Manager, owner string, levels, children int, ends bool) (subs, kids []string) {
	t.Helper()
	type tree struct{ subs, kids []string }
	ready := make(chan tree, 1)
	var agent func(level int) bgtask.Func
	agent = func(level int) bgtask.Func {
		return func(ctx context.Context, task *bgtask.Task) (any, error) {
			ag, err := task.Agent()
			if err != nil {
				return nil, err
			}
			if level < levels {
				if _, err := ag.SpawnAgent(ctx, agent(level+1)); err != nil {
					return nil, err
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			var ids []string
			for range children {
				id, err := ag.Spawn(ctx, blockUntilCanceled(nil))
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			ready <- tree{kids: ids}
			if ends {
				return "done", nil
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	top, err := m.Owner(owner).SpawnAgent(t.Context(), agent(1))
	if err != nil {
		t.Fatal(err)
	}
	var got tree
	select {
	case got = <-ready:
	case <-time.After(hangGuard):
		t.Fatal("the sub-agents did not start their children")
	}
	// The sub-agents, top first: each is the owner of the next.
	subs = []string{top}
	for len(subs) < levels {
		var owned []string
		for meta, err := range m.Owner(subs[len(subs)-1]).List(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			owned = append(owned, meta.ID)
		}
		if len(owned) != 1 {
			t.Fatalf("sub-agent %s owns %q, want one sub-agent", subs[len(subs)-1], owned)
		}
		subs = append(subs, owned[0])
	}
	if ends {
		ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
		defer cancel()
		if meta, err := m.Wait(ctx, subs[len(subs)-1]); err != nil || meta.Status != bgtype.StatusCompleted {
			t.Fatalf("sub-agent = %+v, %v; want completed", meta, err)
		}
	}
	return subs, got.kids
}

// A sub-agent's children that ran on an instance that was killed reach the
// top owner's loop on another instance exactly once, through the reaper's
// notices (addressed up the lineage, since the sub-agent that owns them is
// gone) and the owner's Restore, whatever the order of the reap and the
// run start: every sub-agent and child is handed to the model once across
// the run and a restart of the owner's instance, and no notice is left
// that nobody will take.
func TestReapedChildrenReachOwnerOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		levels    int  // sub-agents in the chain: 2 is a sub-agent's sub-agent
		ends      bool // the sub-agent that owns the children completed before the kill
		reapFirst bool // the reap lands before the owner's run starts on the other instance
	}{
		{"reap before RunStart", 1, false, true},
		{"RunStart before reap", 1, false, false},
		{"sub-agent ended, reap before RunStart", 1, true, true},
		{"sub-agent ended, RunStart before reap", 1, true, false},
		{"two levels, reap before RunStart", 2, false, true},
		{"two levels, RunStart before reap", 2, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDSN(t)
			_, ma, _ := instanceStore(t, dsn, "inst_a")
			sb, mb, stopB := instanceStore(t, dsn, "inst_b")
			subs, kids := subAgentTree(t, ma, "alice", tt.levels, 3, tt.ends)
			want := map[string]int{}
			for _, id := range append(slices.Clone(subs), kids...) {
				want[id] = 1
			}

			seen := map[string]int{}
			reap := func() {
				killInstance(t, dsn, "inst_a")
				wantN := len(subs) + len(kids)
				if tt.ends {
					wantN-- // the sub-agent that completed
				}
				if n, err := sb.Reap(t.Context()); err != nil || n != wantN {
					t.Fatalf("Reap = %d, %v; want %d", n, err, wantN)
				}
			}
			if tt.reapFirst {
				reap()
			}
			run := startRun(t, mb, "alice", "run_b", seen)
			if !tt.reapFirst {
				run.step()
				reap()
			}
			run.step()
			run.step()
			run.end()
			stopB()

			// The owner's instance restarts: nothing comes again.
			_, mc, _ := instanceStore(t, dsn, "inst_c")
			again := startRun(t, mc, "alice", "run_c", seen)
			again.step()
			again.step()
			again.end()

			if !maps.Equal(seen, want) {
				t.Errorf("terminal events handed out, by task: %v\nwant each once: %v", seen, want)
			}
			var stranded []string
			conn := sqlConn(t, dsn)
			rs, err := conn.Query(t.Context(), `SELECT owner || ':' || (event->>'task_id') FROM bgtask_notices WHERE delivered_at IS NULL ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			for rs.Next() {
				var s string
				if err := rs.Scan(&s); err != nil {
					t.Fatal(err)
				}
				stranded = append(stranded, s)
			}
			if rs.Err() != nil || len(stranded) > 0 {
				t.Errorf("notices nobody took: %q (%v)", stranded, rs.Err())
			}
		})
	}
}
