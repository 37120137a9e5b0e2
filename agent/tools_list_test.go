package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// listT0 is the creation time of the first record putRecord makes.
var listT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// putRecord commits a completed record of owner to s, created sec seconds after
// listT0, and returns its id.
func putRecord(t *testing.T, s store.Store, owner, id string, sec int, opts ...func(*bgtype.TaskMeta)) string {
	t.Helper()
	at := listT0.Add(time.Duration(sec) * time.Second)
	m := bgtype.TaskMeta{ID: id, Owner: owner, Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, CreatedAt: at, StartedAt: at, FinishedAt: at, Attempt: 1}
	for _, o := range opts {
		o(&m)
	}
	if err := s.Commit(t.Context(), owner, store.UpsertAction(m)); err != nil {
		t.Fatalf("commit %s: %v", id, err)
	}
	return id
}

// pagesOf calls list_tasks with args and then with each next_cursor, and
// returns the ids of each page, each page's total, and the cursors given.
func pagesOf(t *testing.T, tool Tool, args map[string]any) (pages [][]string, totals []int, cursors []string) {
	t.Helper()
	for range 100 {
		var page listResult
		callTool(t, t.Context(), tool, toJSON(args), &page)
		var ids []string
		for _, tk := range page.Tasks {
			ids = append(ids, tk.TaskID)
		}
		pages, totals = append(pages, ids), append(totals, page.Total)
		if page.NextCursor == "" {
			return pages, totals, cursors
		}
		cursors = append(cursors, page.NextCursor)
		args["cursor"] = page.NextCursor
	}
	t.Fatal("list_tasks never ended")
	return nil, nil, nil
}

// TestListTasksPages: pages of limit tasks in creation order (then id),
// each with the total that matches the filter and a next_cursor but the
// last; another owner's tasks never appear nor count.
func TestListTasksPages(t *testing.T) {
	s := memstore.New()
	m := newTestManager(t, bgtask.WithStore(s))
	putRecord(t, s, "thread-2", "task_0", 0)
	a := putRecord(t, s, "thread-1", "task_a", 1)
	c := putRecord(t, s, "thread-1", "task_c", 2) // c and b: same time, ordered by id
	b := putRecord(t, s, "thread-1", "task_b", 2, func(m *bgtype.TaskMeta) { m.Type = "report" })
	putRecord(t, s, "thread-2", "task_bb", 2)
	d := putRecord(t, s, "thread-1", "task_d", 3, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt = bgtype.StatusFailed, m.CreatedAt })
	e := putRecord(t, s, "thread-1", "task_e", 4, func(m *bgtype.TaskMeta) { m.Type = "report" })
	f := putRecord(t, s, "thread-1", "task_f", 5)
	g := putRecord(t, s, "thread-1", "task_g", 6, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt = bgtype.StatusFailed, m.CreatedAt })
	putRecord(t, s, "thread-2", "task_z", 7)
	list := toolNamed(t, m.Owner("thread-1"), "list_tasks")
	cur := func(sec int, id string) string {
		return fmt.Sprintf("%016x", listT0.Add(time.Duration(sec)*time.Second).UnixNano()) + fmt.Sprintf("%x", id)
	}
	for _, tc := range []struct {
		args    map[string]any
		pages   [][]string
		total   int
		cursors []string
	}{
		{map[string]any{"limit": 3}, [][]string{{a, b, c}, {d, e, f}, {g}}, 7, []string{cur(2, c), cur(5, f)}},
		{map[string]any{"limit": 7}, [][]string{{a, b, c, d, e, f, g}}, 7, nil},
		{map[string]any{"limit": 6}, [][]string{{a, b, c, d, e, f}, {g}}, 7, []string{cur(5, f)}},
		{map[string]any{"limit": 1.0, "type": "report"}, [][]string{{b}, {e}}, 2, []string{cur(2, b)}},
		{map[string]any{"limit": 2, "status": []string{"failed", "running"}}, [][]string{{d, g}}, 2, nil},
		{map[string]any{"limit": 1, "status": []string{"failed"}}, [][]string{{d}, {g}}, 2, []string{cur(3, d)}},
		{map[string]any{"status": []string{"cancelled"}}, [][]string{nil}, 0, nil},
		{map[string]any{"limit": 4, "cursor": cur(2, b)}, [][]string{{c, d, e, f}, {g}}, 7, []string{cur(5, f)}},
		{map[string]any{"cursor": cur(6, g)}, [][]string{nil}, 7, nil},
		{map[string]any{"cursor": cur(-1, "task_a")}, [][]string{{a, b, c, d, e, f, g}}, 7, nil},
	} {
		pages, totals, cursors := pagesOf(t, list, tc.args)
		if fmt.Sprint(pages) != fmt.Sprint(tc.pages) || fmt.Sprint(cursors) != fmt.Sprint(tc.cursors) {
			t.Errorf("list_tasks(%v): pages %v, cursors %v; want %v, %v", tc.args, pages, cursors, tc.pages, tc.cursors)
		}
		for _, total := range totals {
			if total != tc.total {
				t.Errorf("list_tasks(%v): totals %v, want %d on each page", tc.args, totals, tc.total)
				break
			}
		}
	}
}

// TestListTasksDefaultLimit: without limit a page has 50 tasks; limit
// goes up to 200.
func TestListTasksDefaultLimit(t *testing.T) {
	s := memstore.New()
	m := newTestManager(t, bgtask.WithStore(s))
	for i := range 230 {
		putRecord(t, s, "thread-1", fmt.Sprintf("task_%03d", i), i)
	}
	list := toolNamed(t, m.Owner("thread-1"), "list_tasks")
	for _, tc := range []struct {
		args  map[string]any
		sizes string
	}{
		{map[string]any{}, "[50 50 50 50 30]"},
		{map[string]any{"limit": 200}, "[200 30]"},
		{map[string]any{"limit": 2e2, "status": []string{"completed"}}, "[200 30]"},
	} {
		pages, totals, _ := pagesOf(t, list, tc.args)
		var sizes []int
		var ids []string
		for _, p := range pages {
			sizes = append(sizes, len(p))
			ids = append(ids, p...)
		}
		if fmt.Sprint(sizes) != tc.sizes || totals[0] != 230 || len(ids) != 230 || ids[0] != "task_000" || ids[229] != "task_229" {
			t.Errorf("list_tasks(%v): page sizes %v, totals %v; want %s of 230", tc.args, sizes, totals, tc.sizes)
		}
	}
}

// TestListTasksCursorStable: tasks spawned or forgotten between two pages
// neither repeat nor skip a task; the next page takes up after the last
// task shown, even once that task is forgotten.
func TestListTasksCursorStable(t *testing.T) {
	s := memstore.New()
	m := newTestManager(t, bgtask.WithStore(s))
	o := m.Owner("thread-1")
	list := toolNamed(t, o, "list_tasks")
	a := putRecord(t, s, "thread-1", "task_a", 1)
	b := putRecord(t, s, "thread-1", "task_b", 2)
	c := putRecord(t, s, "thread-1", "task_c", 3)
	var p1 listResult
	callTool(t, t.Context(), list, `{"limit":2}`, &p1)
	if len(p1.Tasks) != 2 || p1.Tasks[1].TaskID != b || p1.Total != 3 || p1.NextCursor == "" {
		t.Fatalf("page 1: %+v", p1)
	}
	// Between the pages: b, the last task shown, is forgotten; a live task
	// is spawned (created now, after every record above).
	if err := s.Commit(t.Context(), "thread-1", store.RemoveAction(b)); err != nil {
		t.Fatal(err)
	}
	live, _ := spawnProbe(t, t.Context(), o)
	var p2 listResult
	callTool(t, t.Context(), list, toJSON(map[string]any{"limit": 2, "cursor": p1.NextCursor}), &p2)
	if len(p2.Tasks) != 2 || p2.Tasks[0].TaskID != c || p2.Tasks[1].TaskID != live || p2.Total != 3 || p2.NextCursor != "" {
		t.Fatalf("page 2 after %s: %+v; want %s, %s of 3 (%s gone)", p1.NextCursor, p2, c, live, a)
	}
}

// TestListTasksCursorOfAnotherOwner: a cursor only positions a page within
// the caller's own tasks: another owner's cursor, or one naming another
// owner's task, shows the caller's tasks after that point and nothing of
// the other owner's.
func TestListTasksCursorOfAnotherOwner(t *testing.T) {
	s := memstore.New()
	m := newTestManager(t, bgtask.WithStore(s))
	putRecord(t, s, "thread-2", "task_secret1", 1)
	putRecord(t, s, "thread-2", "task_secret2", 2)
	mine := putRecord(t, s, "thread-1", "task_mine", 3)
	putRecord(t, s, "thread-2", "task_secret3", 4)
	var theirs listResult
	callTool(t, t.Context(), toolNamed(t, m.Owner("thread-2"), "list_tasks"), `{"limit":1}`, &theirs)
	list := toolNamed(t, m.Owner("thread-1"), "list_tasks")
	for _, cursor := range []string{theirs.NextCursor, newListCursor(bgtype.TaskMeta{ID: "task_secret3", CreatedAt: listT0}).String()} {
		var got listResult
		res := callTool(t, t.Context(), list, toJSON(map[string]any{"cursor": cursor}), &got)
		if len(got.Tasks) != 1 || got.Tasks[0].TaskID != mine || got.Total != 1 || got.NextCursor != "" || strings.Contains(string(res), "secret") {
			t.Errorf("list_tasks(cursor %s) = %s; want only %s, total 1", cursor, res, mine)
		}
	}
}

// TestListTasksEntryCaps: list_tasks shows at most 200 bytes of a
// description and 128 of a type, cut at a character boundary with "…";
// get_task shows them whole.
func TestListTasksEntryCaps(t *testing.T) {
	s := memstore.New()
	m := newTestManager(t, bgtask.WithStore(s))
	for i, tc := range []struct {
		desc, typ         string
		wantDesc, wantTyp string
	}{
		{strings.Repeat("d", 200), "report", strings.Repeat("d", 200), "report"},
		{strings.Repeat("d", 201), strings.Repeat("t", 129), strings.Repeat("d", 197) + "…", strings.Repeat("t", 125) + "…"},
		{strings.Repeat("é", 300), strings.Repeat("t", 128), strings.Repeat("é", 98) + "…", strings.Repeat("t", 128)},
		{"a" + strings.Repeat("€", 100), "x" + strings.Repeat("€", 50), "a" + strings.Repeat("€", 65) + "…", "x" + strings.Repeat("€", 41) + "…"},
	} {
		owner := fmt.Sprintf("thread-%d", i)
		o := m.Owner(owner)
		id := putRecord(t, s, owner, fmt.Sprintf("task_%d", i), 1, func(m *bgtype.TaskMeta) { m.Description, m.Type = tc.desc, tc.typ })
		var list listResult
		callTool(t, t.Context(), toolNamed(t, o, "list_tasks"), `{}`, &list)
		if got := list.Tasks[0]; got.Description != tc.wantDesc || got.TaskType != tc.wantTyp {
			t.Errorf("list_tasks shows %q, %q; want %q, %q", got.Description, got.TaskType, tc.wantDesc, tc.wantTyp)
		}
		var full getResult
		callTool(t, t.Context(), toolNamed(t, o, "get_task"), toJSON(map[string]string{"task_id": id}), &full)
		if full.Task.Description != tc.desc || full.Task.TaskType != tc.typ {
			t.Errorf("get_task shows %q, %q; want them whole", full.Task.Description, full.Task.TaskType)
		}
	}
}

// TestListCursorText: a cursor is 16 hex digits of the creation time in
// Unix nanoseconds and the id's bytes in hex; parsing takes exactly those.
func TestListCursorText(t *testing.T) {
	for _, tc := range []struct {
		meta bgtype.TaskMeta
		text string
	}{
		{bgtype.TaskMeta{ID: "task_x", CreatedAt: time.Unix(0, 1)}, "00000000000000017461736b5f78"},
		{bgtype.TaskMeta{ID: "é", CreatedAt: time.Unix(0, -1)}, "ffffffffffffffffc3a9"},
		{bgtype.TaskMeta{ID: strings.Repeat("i", 129), CreatedAt: time.Unix(1, 0)}, "000000003b9aca00" + strings.Repeat("69", 128)},
	} {
		c := newListCursor(tc.meta)
		if got := c.String(); got != tc.text {
			t.Errorf("cursor of %s = %s, want %s", tc.meta.ID, got, tc.text)
		}
		if back, ok := parseListCursor(tc.text); !ok || back != c {
			t.Errorf("parse(%s) = %+v, %v; want %+v", tc.text, back, ok, c)
		}
	}
	for _, bad := range []string{"", "0000000000000001", "00000000000000017", "0000000000000001746", "00000000000000017461736B5F78",
		"0x000000000000017461736b5f78", "+000000000000001aa", "0000000000000001" + strings.Repeat("aa", 129), "000000000000000g61"} {
		if c, ok := parseListCursor(bad); ok {
			t.Errorf("parse(%q) = %+v, want refused", bad, c)
		}
	}
}
