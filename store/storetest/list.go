package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// listFixture commits, under owner-a, one record per status (two running
// ones created at the same instant, committed in the reverse of their id
// order), and one record under owner-b.
func listFixture(t *testing.T, c Config) store.Store {
	s := c.New(t)
	const a = "owner-a"
	commit(t, s, a,
		store.UpsertAction(rec("task_queued", a, bgtype.StatusQueued, 6)),
		store.UpsertAction(rec("task_run_z", a, bgtype.StatusRunning, 2)),
		store.UpsertAction(rec("task_run_m", a, bgtype.StatusRunning, 2)),
		store.UpsertAction(rec("task_await", a, bgtype.StatusAwaitingInput, 3)),
	)
	commit(t, s, a, store.UpsertAction(ended(rec("task_done", a, bgtype.StatusRunning, 0), bgtype.StatusCompleted, 7)))
	commit(t, s, a, store.UpsertAction(ended(rec("task_failed", a, bgtype.StatusRunning, 5), bgtype.StatusFailed, 8)))
	commit(t, s, a, store.UpsertAction(ended(rec("task_cancelled", a, bgtype.StatusRunning, 4), bgtype.StatusCanceled, 9)))
	commit(t, s, "owner-b", store.UpsertAction(rec("task_b", "owner-b", bgtype.StatusRunning, 1)))
	return s
}

// testList: List filters by status and yields oldest first (CreatedAt,
// then ID); an unknown status is an error matching ErrInvalidStatus,
// yielded once as the last pair.
func testList(t *testing.T, c Config) {
	s := listFixture(t, c)
	all := []string{"task_done", "task_run_m", "task_run_z", "task_await", "task_cancelled", "task_failed", "task_queued"}
	cases := []struct {
		name     string
		owner    string
		statuses []bgtype.Status
		want     []string
		wantErr  error
	}{
		{"all", "owner-a", nil, all, nil},
		{"running", "owner-a", []bgtype.Status{bgtype.StatusRunning}, []string{"task_run_m", "task_run_z"}, nil},
		{"running twice", "owner-a", []bgtype.Status{bgtype.StatusRunning, bgtype.StatusRunning}, []string{"task_run_m", "task_run_z"}, nil},
		{"live", "owner-a", []bgtype.Status{bgtype.StatusAwaitingInput, bgtype.StatusQueued, bgtype.StatusRunning},
			[]string{"task_run_m", "task_run_z", "task_await", "task_queued"}, nil},
		{"terminal", "owner-a", []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted},
			[]string{"task_done", "task_cancelled", "task_failed"}, nil},
		{"every status", "owner-a", bgtype.Statuses(), all, nil},
		{"none match", "owner-a", []bgtype.Status{bgtype.StatusInterrupted}, nil, nil},
		{"other owner", "owner-b", nil, []string{"task_b"}, nil},
		{"unknown owner", "owner-nobody", []bgtype.Status{bgtype.StatusRunning}, nil, nil},
		{"unknown status", "owner-a", []bgtype.Status{"paused"}, nil, bgtype.ErrInvalidStatus},
		{"unknown status after a known one", "owner-a", []bgtype.Status{bgtype.StatusRunning, "paused"}, nil, bgtype.ErrInvalidStatus},
		{"empty status", "owner-a", []bgtype.Status{""}, nil, bgtype.ErrInvalidStatus},
		{"unknown status, unknown owner", "owner-nobody", []bgtype.Status{"Running"}, nil, bgtype.ErrInvalidStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, err, after := collect(s.List(t.Context(), tc.owner, tc.statuses...))
			what := fmt.Sprintf("List(%q, %q)", tc.owner, tc.statuses)
			switch {
			case tc.wantErr != nil:
				wantErr(t, what, err, tc.wantErr)
				if len(ms) != 0 {
					t.Errorf("%s yielded %q before its error, want nothing", what, idsOf(ms))
				}
			case err != nil:
				t.Errorf("%s: %v", what, err)
			}
			if after != 0 {
				t.Errorf("%s yielded %d pairs after its error, want none", what, after)
			}
			if tc.want == nil {
				tc.want = []string{}
			}
			wantIDs(t, what, idsOf(ms), tc.want)
		})
	}
}

// earlyBreaks is how many times ListEarlyBreak stops each listing early:
// more than a connection pool has connections by default.
const earlyBreaks = 12

// testListEarlyBreak: a range over List or Children may stop early, and
// the store keeps working (a database store must release its rows and
// their connection; a leak shows as a Commit that waits for a connection
// until the deadline below, a guard against a hang, not a timing check).
func testListEarlyBreak(t *testing.T, c Config) {
	s := listFixture(t, c)
	const a = "owner-a"
	for range earlyBreaks {
		for m, err := range s.List(t.Context(), a) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if m.ID != "task_done" {
				t.Errorf("List's first record = %s, want task_done", m.ID)
			}
			break
		}
		n := 0
		for _, err := range s.List(t.Context(), a, bgtype.StatusRunning) {
			if err != nil {
				t.Fatalf("List(running): %v", err)
			}
			if n++; n == 2 {
				break
			}
		}
	}
	commit(t, s, a, store.UpsertAction(rec("task_child", a, bgtype.StatusRunning, 1)), store.UpsertAction(
		func() bgtype.TaskMeta {
			m := rec("task_child2", a, bgtype.StatusRunning, 2)
			m.Parent.TaskID = "task_run_m"
			return m
		}()))
	for range earlyBreaks {
		for _, err := range s.Children(t.Context(), "task_run_m") {
			if err != nil {
				t.Fatalf("Children: %v", err)
			}
			break
		}
	}
	// The store still answers after every early break.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	m := rec("task_run_m", a, bgtype.StatusRunning, 2)
	if err := s.Commit(ctx, a, store.UpsertAction(ended(m, bgtype.StatusCompleted, 10))); err != nil {
		t.Fatalf("Commit after early breaks: %v (are rows or connections leaked?)", err)
	}
	got, err := s.Get(ctx, "task_run_m")
	if err != nil || got.Status != bgtype.StatusCompleted {
		t.Errorf("Get after early breaks = %s, %v; want completed", got.Status, err)
	}
	snap, err := s.Load(ctx, a)
	if err != nil || len(snap.Tasks) != 9 {
		t.Errorf("Load(%s) after early breaks holds %d tasks, %v; want 9", a, len(snap.Tasks), err)
	}
}

// testChildren: Children yields the records whose Parent.TaskID is the
// id, of any owner, oldest first; nothing for an unknown or empty id.
func testChildren(t *testing.T, c Config) {
	s := c.New(t)
	child := func(id, owner, parent string, created int) bgtype.TaskMeta {
		m := rec(id, owner, bgtype.StatusRunning, created)
		m.Parent = bgtype.Parent{TaskID: parent, RunID: "run_1", AgentID: owner}
		return m
	}
	commit(t, s, "owner-a",
		store.UpsertAction(rec("task_p", "owner-a", bgtype.StatusRunning, 0)),
		store.UpsertAction(child("task_c_late", "owner-a", "task_p", 5)),
		store.UpsertAction(child("task_c_z", "owner-a", "task_p", 2)),
		store.UpsertAction(child("task_grandchild", "owner-a", "task_c_z", 3)),
		store.UpsertAction(child("task_of_gone", "owner-a", "task_never_stored", 1)),
		store.UpsertAction(func() bgtype.TaskMeta {
			m := rec("task_same_run", "owner-a", bgtype.StatusRunning, 1)
			m.Parent = bgtype.Parent{RunID: "task_p", CallID: "task_p", AgentID: "task_p"} // not a child: only TaskID counts
			return m
		}()),
	)
	commit(t, s, "task_p", // a sub-agent's tasks are owned by its task id
		store.UpsertAction(child("task_c_m", "task_p", "task_p", 2)),
		store.UpsertAction(ended(child("task_c_done", "task_p", "task_p", 4), bgtype.StatusCompleted, 6)),
	)
	cases := []struct {
		id   string
		want []string
	}{
		{"task_p", []string{"task_c_m", "task_c_z", "task_c_done", "task_c_late"}},
		{"task_c_z", []string{"task_grandchild"}},
		{"task_never_stored", []string{"task_of_gone"}},
		{"task_c_late", []string{}},
		{"task_unknown", []string{}},
		{"", []string{}},
	}
	for _, tc := range cases {
		t.Run("of "+cmpName(tc.id), func(t *testing.T) {
			ms := list(t, fmt.Sprintf("Children(%q)", tc.id), s.Children(t.Context(), tc.id))
			wantIDs(t, fmt.Sprintf("Children(%q)", tc.id), idsOf(ms), tc.want)
			for _, m := range ms {
				if m.Parent.TaskID != tc.id {
					t.Errorf("Children(%q) yields %s whose parent is %q", tc.id, m.ID, m.Parent.TaskID)
				}
			}
		})
	}
}

func cmpName(id string) string {
	if id == "" {
		return "empty id"
	}
	return strings.TrimPrefix(id, "task_")
}
