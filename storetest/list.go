package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"
)

// listFixture commits, under owner-a, one record per status (two running
// ones created at the same instant, committed in the reverse of their id
// order), and one record under owner-b.
func listFixture(t *testing.T, c Config) bgtask.Store {
	s := c.New(t)
	const a = "owner-a"
	commit(t, s, a,
		bgtask.Upsert(rec("task_queued", a, bgtask.StatusQueued, 6)),
		bgtask.Upsert(rec("task_run_z", a, bgtask.StatusRunning, 2)),
		bgtask.Upsert(rec("task_run_m", a, bgtask.StatusRunning, 2)),
		bgtask.Upsert(rec("task_await", a, bgtask.StatusAwaitingInput, 3)),
	)
	commit(t, s, a, bgtask.Upsert(ended(rec("task_done", a, bgtask.StatusRunning, 0), bgtask.StatusCompleted, 7)))
	commit(t, s, a, bgtask.Upsert(ended(rec("task_failed", a, bgtask.StatusRunning, 5), bgtask.StatusFailed, 8)))
	commit(t, s, a, bgtask.Upsert(ended(rec("task_cancelled", a, bgtask.StatusRunning, 4), bgtask.StatusCancelled, 9)))
	commit(t, s, "owner-b", bgtask.Upsert(rec("task_b", "owner-b", bgtask.StatusRunning, 1)))
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
		statuses []bgtask.TaskStatus
		want     []string
		wantErr  error
	}{
		{"all", "owner-a", nil, all, nil},
		{"running", "owner-a", []bgtask.TaskStatus{bgtask.StatusRunning}, []string{"task_run_m", "task_run_z"}, nil},
		{"running twice", "owner-a", []bgtask.TaskStatus{bgtask.StatusRunning, bgtask.StatusRunning}, []string{"task_run_m", "task_run_z"}, nil},
		{"live", "owner-a", []bgtask.TaskStatus{bgtask.StatusAwaitingInput, bgtask.StatusQueued, bgtask.StatusRunning},
			[]string{"task_run_m", "task_run_z", "task_await", "task_queued"}, nil},
		{"terminal", "owner-a", []bgtask.TaskStatus{bgtask.StatusCompleted, bgtask.StatusFailed, bgtask.StatusCancelled, bgtask.StatusInterrupted},
			[]string{"task_done", "task_cancelled", "task_failed"}, nil},
		{"every status", "owner-a", bgtask.Statuses(), all, nil},
		{"none match", "owner-a", []bgtask.TaskStatus{bgtask.StatusInterrupted}, nil, nil},
		{"other owner", "owner-b", nil, []string{"task_b"}, nil},
		{"unknown owner", "owner-nobody", []bgtask.TaskStatus{bgtask.StatusRunning}, nil, nil},
		{"unknown status", "owner-a", []bgtask.TaskStatus{"paused"}, nil, bgtask.ErrInvalidStatus},
		{"unknown status after a known one", "owner-a", []bgtask.TaskStatus{bgtask.StatusRunning, "paused"}, nil, bgtask.ErrInvalidStatus},
		{"empty status", "owner-a", []bgtask.TaskStatus{""}, nil, bgtask.ErrInvalidStatus},
		{"unknown status, unknown owner", "owner-nobody", []bgtask.TaskStatus{"Running"}, nil, bgtask.ErrInvalidStatus},
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

// testListEarlyBreak: a range over List or Children may stop early, and
// the store keeps working (a database store must release its rows).
func testListEarlyBreak(t *testing.T, c Config) {
	s := listFixture(t, c)
	const a = "owner-a"
	for range 3 { // more times than a small connection pool has connections
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
		for _, err := range s.List(t.Context(), a, bgtask.StatusRunning) {
			if err != nil {
				t.Fatalf("List(running): %v", err)
			}
			if n++; n == 2 {
				break
			}
		}
	}
	commit(t, s, a, bgtask.Upsert(rec("task_child", a, bgtask.StatusRunning, 1)), bgtask.Upsert(
		func() bgtask.TaskMeta {
			m := rec("task_child2", a, bgtask.StatusRunning, 2)
			m.Parent.TaskID = "task_run_m"
			return m
		}()))
	for range 3 {
		for _, err := range s.Children(t.Context(), "task_run_m") {
			if err != nil {
				t.Fatalf("Children: %v", err)
			}
			break
		}
	}
	// The store still answers after every early break.
	commit(t, s, a, bgtask.Upsert(ended(get(t, s, "task_run_m"), bgtask.StatusCompleted, 10)))
	if got := get(t, s, "task_run_m"); got.Status != bgtask.StatusCompleted {
		t.Errorf("task_run_m = %s, want completed", got.Status)
	}
	if n := len(load(t, s, a).Tasks); n != 9 {
		t.Errorf("Load(%s) holds %d tasks, want 9", a, n)
	}
}

// testChildren: Children yields the records whose Parent.TaskID is the
// id, of any owner, oldest first; nothing for an unknown or empty id.
func testChildren(t *testing.T, c Config) {
	s := c.New(t)
	child := func(id, owner, parent string, created int) bgtask.TaskMeta {
		m := rec(id, owner, bgtask.StatusRunning, created)
		m.Parent = bgtask.Parent{TaskID: parent, RunID: "run_1", AgentID: owner}
		return m
	}
	commit(t, s, "owner-a",
		bgtask.Upsert(rec("task_p", "owner-a", bgtask.StatusRunning, 0)),
		bgtask.Upsert(child("task_c_late", "owner-a", "task_p", 5)),
		bgtask.Upsert(child("task_c_z", "owner-a", "task_p", 2)),
		bgtask.Upsert(child("task_grandchild", "owner-a", "task_c_z", 3)),
		bgtask.Upsert(child("task_of_gone", "owner-a", "task_never_stored", 1)),
		bgtask.Upsert(func() bgtask.TaskMeta {
			m := rec("task_same_run", "owner-a", bgtask.StatusRunning, 1)
			m.Parent = bgtask.Parent{RunID: "task_p", CallID: "task_p", AgentID: "task_p"} // not a child: only TaskID counts
			return m
		}()),
	)
	commit(t, s, "task_p", // a sub-agent's tasks are owned by its task id
		bgtask.Upsert(child("task_c_m", "task_p", "task_p", 2)),
		bgtask.Upsert(ended(child("task_c_done", "task_p", "task_p", 4), bgtask.StatusCompleted, 6)),
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
