package pgstore_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/storetest"
)

// dsns maps each store the conformance suite made to its database.
var dsns sync.Map

func TestConformance(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, opts ...pgstore.Option) store.Store {
		s, dsn := openStore(t, opts...)
		dsns.Store(s, dsn)
		t.Cleanup(func() { dsns.Delete(s) })
		return s
	}
	storetest.Run(t, storetest.Config{
		New: func(t *testing.T) store.Store { return open(t) },
		NewRetaining: func(t *testing.T, perOwner int) store.Store {
			return open(t, pgstore.WithRetainPerOwner(perOwner))
		},
		Corrupt: func(t *testing.T, s store.Store, id string, kind storetest.CorruptKind) {
			dsn, _ := dsns.Load(s)
			sql := map[storetest.CorruptKind]string{
				storetest.CorruptStatus: `UPDATE bgtask_tasks SET status = 'paused' WHERE id = $1`,
				storetest.CorruptResult: `UPDATE bgtask_tasks SET result = '{"a":' WHERE id = $1`,
			}[kind]
			if n := sqlExec(t, dsn.(string), sql, id); n != 1 {
				t.Fatalf("corrupt %s: %d rows", id, n)
			}
		},
		Stale: func(t *testing.T, s store.Store, records ...bgtype.TaskMeta) {
			dsn, _ := dsns.Load(s)
			stale(t, s, dsn.(string), records...)
		},
	})
}

// stale writes records through s, then registers the instances they name
// as gone, the two ways the reaper knows: the first one named closed (state
// stopped), the others alive but with a heartbeat a day old, far beyond
// any grace period.
func stale(t *testing.T, s store.Store, dsn string, records ...bgtype.TaskMeta) {
	t.Helper()
	var instances []string
	for _, m := range records {
		if err := s.Commit(t.Context(), m.Owner, store.UpsertAction(m)); err != nil {
			t.Fatalf("Commit(%s): %v", m.ID, err)
		}
		if !slices.Contains(instances, m.Instance) {
			instances = append(instances, m.Instance)
		}
	}
	for i, id := range instances {
		state := "alive"
		if i == 0 {
			state = "stopped"
		}
		if n := sqlExec(t, dsn, `INSERT INTO bgtask_instances (id, heartbeat_at, started_at, state)
			VALUES ($1, now() - interval '1 day', now() - interval '2 days', $2)`, id, state); n != 1 {
			t.Fatalf("register gone instance %q: %d rows", id, n)
		}
	}
}
