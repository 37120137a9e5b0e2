package sqlitestore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// The writer's shortcuts (records kept from earlier commits, new records
// inserted without a read) give what store.Apply gives on the rows
// the file holds: random commits, some after another program changed the
// file, are run through the store and through the reducer on a snapshot
// of the file, and the owner's records must be the same after each.
func TestCommitMatchesTheReducer(t *testing.T) {
	t.Parallel()
	statuses := []bgtype.Status{"", bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 1))
			s, path := open(t)
			raw := rawDB(t, path)
			commit(t, s, "b", store.UpsertAction(rec("b", 0, bgtype.StatusRunning)))
			ref := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}} // owner a's records, as the file holds them
			id := func() string {
				if rng.IntN(8) == 0 {
					return rec("b", 0, "").ID // another owner's: never touched
				}
				return rec("a", rng.IntN(4), "").ID
			}
			for step := range 60 {
				var a store.Action
				switch k := rng.IntN(10); {
				case k == 0: // another program changes the file
					target := rec("a", rng.IntN(4), "").ID
					switch rng.IntN(3) {
					case 0:
						execSQL(t, raw, `UPDATE tasks SET status = 'cancelled', finished_at = 1 WHERE id = ? AND status IN ('queued', 'running')`, target)
					case 1:
						execSQL(t, raw, `UPDATE tasks SET description = 'edited elsewhere' WHERE id = ?`, target)
					default:
						execSQL(t, raw, `DELETE FROM tasks WHERE id = ?`, target)
					}
					snap, err := s.Load(t.Context(), "a")
					if err != nil {
						t.Fatal(err)
					}
					ref = snap
					continue
				case k == 1:
					a = store.AnnounceAction(id())
				case k == 2:
					a = store.RemoveAction(id())
				default:
					tid := id()
					var n int
					var owner string
					fmt.Sscanf(tid, "task_%1s_%02d", &owner, &n)
					m := rec("a", n, statuses[rng.IntN(len(statuses))])
					m.ID = tid
					m.Attempt = int64(rng.IntN(2))
					if m.Status == "" {
						m.Type, m.CreatedAt = "", time.Time{}
						m.Progress = &bgtype.Progress{Done: int64(rng.IntN(5)), Total: 5, At: base.Add(time.Duration(step) * time.Second)}
					}
					if m.Status == bgtype.StatusRunning || m.Status == "" {
						m.Description = fmt.Sprint("step ", step)
					}
					a = store.UpsertAction(m)
				}
				if err := s.Commit(t.Context(), "a", a); err != nil {
					t.Fatalf("step %d: Commit(%+v): %v", step, a, err)
				}
				if a.Op == store.OpUpsert && a.Tasks[0].Owner == "a" && a.Tasks[0].ID == rec("b", 0, "").ID {
					a = store.Action{} // another owner's id: the store leaves it alone
				}
				if a.Op == store.OpRemove || a.Op == store.OpAnnounce {
					if a.IDs[0] == rec("b", 0, "").ID {
						a = store.Action{}
					}
				}
				store.Apply(&ref, a)
				got, err := s.Load(t.Context(), "a")
				if err != nil {
					t.Fatal(err)
				}
				if g, w := canon(t, got), canon(t, ref); g != w {
					t.Fatalf("step %d after %+v:\nstore   %s\nreducer %s", step, a, g, w)
				}
			}
		})
	}
}

// canon is a snapshot's records as JSON, by id.
func canon(t *testing.T, s store.Snapshot) string {
	t.Helper()
	b, err := json.Marshal(s.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
