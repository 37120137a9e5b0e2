package pgstore_test

import (
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/storetest"
)

// dsns maps each store the conformance suite made to its database.
var dsns sync.Map

func TestConformance(t *testing.T) {
	open := func(t *testing.T, opts ...pgstore.Option) bgtask.Store {
		s, dsn := openStore(t, opts...)
		dsns.Store(s, dsn)
		t.Cleanup(func() { dsns.Delete(s) })
		return s
	}
	storetest.Run(t, storetest.Config{
		New: func(t *testing.T) bgtask.Store { return open(t) },
		NewRetaining: func(t *testing.T, perOwner int) bgtask.Store {
			return open(t, pgstore.WithRetainPerOwner(perOwner))
		},
		Corrupt: func(t *testing.T, s bgtask.Store, id string, kind storetest.CorruptKind) {
			dsn, _ := dsns.Load(s)
			sql := map[storetest.CorruptKind]string{
				storetest.CorruptStatus: `UPDATE bgtask_tasks SET status = 'paused' WHERE id = $1`,
				storetest.CorruptResult: `UPDATE bgtask_tasks SET result = '{"a":' WHERE id = $1`,
			}[kind]
			if n := sqlExec(t, dsn.(string), sql, id); n != 1 {
				t.Fatalf("corrupt %s: %d rows", id, n)
			}
		},
	})
}
