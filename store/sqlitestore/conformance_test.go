package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/store/storetest"
)

// paths remembers each store's file, so Corrupt can reach it with SQL that
// bypasses the store.
type paths map[store.Store]string

func (p paths) open(t *testing.T, opts ...sqlitestore.Option) store.Store {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openAt(t, path, opts...)
	p[s] = path
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	p := paths{} // checks run one after another: no lock needed
	storetest.Run(t, storetest.Config{
		New: func(t *testing.T) store.Store { return p.open(t, sqlitestore.WithRetainFor(0)) },
		NewRetaining: func(t *testing.T, perOwner int) store.Store {
			return p.open(t, sqlitestore.WithRetainPerOwner(perOwner), sqlitestore.WithRetainFor(0))
		},
		Corrupt: func(t *testing.T, s store.Store, id string, kind storetest.CorruptKind) {
			corrupt(t, p[s], id, kind)
		},
		Stale: func(t *testing.T, s store.Store, records ...bgtype.TaskMeta) {
			stale(t, p[s], records...)
		},
	})
}

// stale writes records into the file at path through a second Store, one
// that never recovers and is closed before it returns: as a process that
// is gone left them. The Store under test did not write them, so it does
// not take their instances for its own.
func stale(t *testing.T, path string, records ...bgtype.TaskMeta) {
	t.Helper()
	gone, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithoutRecovery(), sqlitestore.WithRetainFor(0))
	if err != nil {
		t.Fatalf("Open(%s) of the gone process: %v", path, err)
	}
	for _, m := range records {
		if err := gone.Commit(t.Context(), m.Owner, store.UpsertAction(m)); err != nil {
			gone.Close()
			t.Fatalf("gone process: Commit(%s): %v", m.ID, err)
		}
	}
	if err := gone.Close(); err != nil {
		t.Fatalf("Close of the gone process: %v", err)
	}
}

// corrupt damages task id's row in the file at path, as a bug or another
// program could.
func corrupt(t testing.TB, path, id string, kind storetest.CorruptKind) {
	t.Helper()
	db := rawDB(t, path)
	switch kind {
	case storetest.CorruptStatus:
		execSQL(t, db, "UPDATE tasks SET status = 'paused' WHERE id = ?", id)
	case storetest.CorruptResult:
		execSQL(t, db, `UPDATE tasks SET result = '{"a":' WHERE id = ?`, id)
	default:
		t.Fatalf("corrupt: unknown kind %v", kind)
	}
}
