package storetest

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testInstanceLiveness: a store that tells live runtime instances apart
// knows alive every instance that committed a live record through it, as
// long as it is open; Restore would otherwise interrupt that instance's
// running tasks. (An unknown instance may be reported alive when the store
// is unsure, so that direction is not checked, but for "".)
func testInstanceLiveness(t *testing.T, c Config) {
	s := c.New(t)
	l, ok := s.(store.InstanceLiveness)
	if !ok {
		t.Skip("storetest: the store is not a store.InstanceLiveness, liveness not checked")
	}
	running := rec("task_il", "owner-a", bgtype.StatusRunning, 1)
	running.Instance, running.StartedAt = "inst-here", at(1)
	commit(t, s, "owner-a", store.UpsertAction(running))
	if alive, err := l.InstanceAlive(t.Context(), "inst-here"); err != nil || !alive {
		t.Fatalf("InstanceAlive of the instance that committed a running record = %v, %v; want true, nil", alive, err)
	}
	if alive, err := l.InstanceAlive(t.Context(), ""); err != nil || alive {
		t.Fatalf(`InstanceAlive("") = %v, %v; want false, nil`, alive, err)
	}
}
