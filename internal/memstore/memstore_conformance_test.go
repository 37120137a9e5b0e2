package memstore_test

import (
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/storetest"
)

// TestMemoryStoreConformance runs the Store conformance suite on the
// in-memory store. Its records are typed, so it has no corrupt form.
func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Config{
		New: func(*testing.T) store.Store { return memstore.New() },
		NewRetaining: func(_ *testing.T, perOwner int) store.Store {
			return memstore.New(memstore.WithRetainPerOwner(perOwner))
		},
	})
}
