package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

func TestTagsFilterListsAndTools(t *testing.T) {
	m := newTestManager(t)
	alice, bob := m.Owner("alice"), m.Owner("bob")
	a := spawnFor(t, m, "alice", doneTask, bgtask.WithTags("deploy", "eu"))
	b := spawnFor(t, m, "alice", doneTask, bgtask.WithTags("eu"))
	c := spawnFor(t, m, "alice", doneTask)
	spawnFor(t, m, "bob", doneTask, bgtask.WithTags("deploy"))
	for _, id := range []string{a, b, c} {
		waitTask(t, alice, id)
	}
	for _, tc := range []struct {
		tag  string
		want []string
	}{
		{"deploy", []string{a}},
		{"eu", []string{a, b}},
		{"", []string{a, b, c}},
		{"none", []string{}},
	} {
		metas, err := listed(alice.ListTagged(t.Context(), tc.tag, bgtype.StatusCompleted))
		if err != nil {
			t.Fatal(err)
		}
		if got := taskIDs(metas); !slices.Equal(got, tc.want) {
			t.Errorf("ListTagged(%q) = %v, want %v", tc.tag, got, tc.want)
		}
		var page listResult
		args := `{"tag":null}`
		if tc.tag != "" {
			args = `{"tag":"` + tc.tag + `"}`
		}
		callTool(t, t.Context(), toolNamed(t, alice, "list_tasks"), args, &page)
		if got := taskIDs(toolMetas(page.Tasks)); !slices.Equal(got, tc.want) || page.Total != len(tc.want) {
			t.Errorf("list_tasks(%s) = %v total %d, want %v", args, got, page.Total, tc.want)
		}
	}
	bobs, err := listed(bob.ListTagged(t.Context(), "eu"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bobs) != 0 {
		t.Errorf("bob's ListTagged(eu) = %v, want none (alice's tasks)", taskIDs(bobs))
	}
	var got getResult
	callTool(t, t.Context(), toolNamed(t, alice, "get_task"), `{"task_id":"`+a+`"}`, &got)
	if !slices.Equal(got.Task.Tags, []string{"deploy", "eu"}) {
		t.Errorf("get_task tags = %q", got.Task.Tags)
	}
	raw := callTool(t, t.Context(), toolNamed(t, alice, "list_tasks"), `{"tag":"deploy"}`, nil)
	if !strings.Contains(string(raw), `"tags":["deploy","eu"]`) {
		t.Errorf("list_tasks = %s, want the tags shown", raw)
	}
	if err := callToolErr(t, t.Context(), toolNamed(t, alice, "list_tasks"), `{"tag":" "}`); err.Error() != `invalid arguments: "tag" is blank` {
		t.Errorf("list_tasks blank tag: %v", err)
	}
}

func toolMetas(ts []toolTask) []bgtype.TaskMeta {
	out := make([]bgtype.TaskMeta, len(ts))
	for i, v := range ts {
		out[i].ID = v.TaskID
	}
	return out
}
