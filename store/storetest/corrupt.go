package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testCorrupt: a record damaged in storage is reported by Get, Load and
// List as an error matching ErrCorrupt that names the task; List yields the
// owner's good records first, then that error; the owner's other records
// and other owners' data stay readable.
func testCorrupt(t *testing.T, c Config) {
	if c.Corrupt == nil {
		t.Skip("storetest: Config.Corrupt is nil, corrupt data not checked")
	}
	for _, kind := range []CorruptKind{CorruptStatus, CorruptResult} {
		t.Run(kind.String(), func(t *testing.T) {
			s := c.New(t)
			const a, b = "owner-a", "owner-b"
			bad := ended(rec("task_bad", a, bgtype.StatusRunning, 2), bgtype.StatusCompleted, 5)
			bad.Result = []byte(`{"ok":true}`)
			good := rec("task_good", a, bgtype.StatusRunning, 1)
			other := rec("task_other", b, bgtype.StatusRunning, 1)
			child := rec("task_child", a, bgtype.StatusRunning, 3)
			child.Parent.TaskID = "task_good"
			commit(t, s, a, store.UpsertAction(good), store.UpsertAction(bad), store.UpsertAction(child))
			commit(t, s, b, store.UpsertAction(other))
			c.Corrupt(t, s, bad.ID, kind)

			named := func(what string, err error) {
				t.Helper()
				wantErr(t, what, err, bgtype.ErrCorrupt)
				if err != nil && !strings.Contains(err.Error(), bad.ID) {
					t.Errorf("%s: error %q does not name the task %s", what, err, bad.ID)
				}
			}
			_, err := s.Get(t.Context(), bad.ID)
			named("Get of the corrupt record", err)
			_, err = s.Load(t.Context(), a)
			named("Load of the owner of the corrupt record", err)
			// List yields every good record, then one error naming the
			// corrupt ones: one bad row hides none of its owner's others.
			ms, err, after := collect(s.List(t.Context(), a))
			named("List of the owner of the corrupt record", err)
			if after != 0 {
				t.Errorf("List yielded %d pairs after its error, want none", after)
			}
			wantIDs(t, "List of the owner of the corrupt record, before its error", idsOf(ms), []string{good.ID, child.ID})

			// Nothing else is lost.
			for _, m := range []bgtype.TaskMeta{good, other, child} {
				if d := diffMeta(m, get(t, s, m.ID)); d != "" {
					t.Errorf("Get(%s) next to the corrupt record:\n%s", m.ID, d)
				}
			}
			if d := diffSnap(store.Snapshot{Tasks: map[string]bgtype.TaskMeta{other.ID: other}}, load(t, s, b)); d != "" {
				t.Errorf("Load(%s) of another owner:\n%s", b, d)
			}
			wantIDs(t, fmt.Sprintf("List(%s)", b), idsOf(list(t, "List(owner-b)", s.List(t.Context(), b))), []string{other.ID})
			wantIDs(t, "Children(task_good)", idsOf(list(t, "Children(task_good)", s.Children(t.Context(), "task_good"))), []string{child.ID})
		})
	}
}
