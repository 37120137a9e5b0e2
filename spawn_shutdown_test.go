package bgtask

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/storefake"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// shutdownRace is a durable-like store whose insert of a running record
// named "child" blocks until the spawner's context ends (Shutdown has
// begun: it cancelled the task that spawns), then lands or not, and
// returns the context's error, as a driver that saw the cancel after it
// sent the statement does.
type shutdownRace struct {
	*storefake.DurableMem
	lands   bool
	entered chan struct{} // closed when the insert blocks
}

func (s *shutdownRace) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if len(actions) != 1 || actions[0].Op != store.OpUpsert || actions[0].Tasks[0].Name != "child" ||
		actions[0].Tasks[0].Status != bgtype.StatusRunning {
		return s.DurableMem.Commit(ctx, owner, actions...)
	}
	close(s.entered)
	<-ctx.Done()
	if s.lands {
		if err := s.DurableMem.Commit(context.WithoutCancel(ctx), owner, actions...); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// A spawn that Shutdown races, whose error says the Manager shut down,
// leaves no record of its task, whether its insert landed or not: no one
// is told of a task whose Spawn returned an error, not by
// UndeliveredOwners, not by a later run's Receiver.
func TestSpawnRacingShutdownLeavesNoRecord(t *testing.T) {
	t.Parallel()
	for _, lands := range []bool{true, false} {
		t.Run(map[bool]string{true: "insert landed", false: "insert refused"}[lands], func(t *testing.T) {
			t.Parallel()
			s := &shutdownRace{DurableMem: &storefake.DurableMem{Store: memstore.New()}, lands: lands, entered: make(chan struct{})}
			m := newTestManager(t, WithStore(s))
			o := m.Owner("thread-1")
			spawnErr := make(chan error, 1)
			parent, err := o.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
				_, err := o.Spawn(ctx, func(context.Context, *Task) (any, error) { return "ran", nil }, WithName("child"))
				spawnErr <- err
				return nil, ctx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			<-s.entered
			shutdownManager(t, m)

			err = <-spawnErr
			if !errors.Is(err, ErrShutdown) || err.Error() != "bgtask: spawn: bgtask: manager shut down" {
				t.Fatalf("Spawn = %v, want the shutdown's error", err)
			}
			var ids []string
			for meta, err := range s.List(context.Background(), "thread-1") {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, meta.ID)
			}
			if len(ids) != 1 || ids[0] != parent {
				t.Fatalf("records of thread-1 = %q, want only the parent %s", ids, parent)
			}
			// The parent's end is heard elsewhere: only the child could be news.
			if err := s.Commit(context.Background(), "thread-1", store.AnnounceAction(parent)); err != nil {
				t.Fatal(err)
			}

			m2 := newTestManager(t, WithStore(s))
			for owner, err := range m2.UndeliveredOwners(t.Context()) {
				t.Errorf("UndeliveredOwners yields %q, %v; want nothing", owner, err)
			}
			r, err := m2.NewReceiver("thread-1", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			evs, err := r.Deliver(t.Context())
			if err != nil || len(evs) != 0 {
				t.Fatalf("first Deliver of the next run = %v, %v; want nothing", messageKinds(evs), err)
			}
			shutdownManager(t, m2)
		})
	}
}
