package storetest

import (
	"slices"
	"testing"

	"github.com/bgtask/bgtask"
)

// undelivered collects the owners s yields, sorted, failing on an error or
// an owner yielded twice.
func undelivered(t *testing.T, l bgtask.UndeliveredLister) []string {
	t.Helper()
	var got []string
	for o, err := range l.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatalf("UndeliveredOwners: %v", err)
		}
		if slices.Contains(got, o) {
			t.Fatalf("UndeliveredOwners yielded %q twice", o)
		}
		got = append(got, o)
	}
	slices.Sort(got)
	return got
}

// testUndeliveredOwners: a bgtask.UndeliveredLister yields each owner with
// a terminal record that is neither announced nor silent, once, whatever
// its other records; an owner whose ends are all announced or silent, or
// whose records are all live, is not yielded; Announce takes an owner off.
func testUndeliveredOwners(t *testing.T, c Config) {
	s := c.New(t)
	l, ok := s.(bgtask.UndeliveredLister)
	if !ok {
		t.Skip("storetest: the store is not a bgtask.UndeliveredLister")
	}
	if got := undelivered(t, l); len(got) != 0 {
		t.Fatalf("empty store: %q, want none", got)
	}
	announced := func(m bgtask.TaskMeta) bgtask.TaskMeta { m.Announced = true; return m }
	wake := func(m bgtask.TaskMeta, w bgtask.WakePolicy) bgtask.TaskMeta { m.Wake = w; return m }
	news := ended(rec("task_u1", "owner-news", bgtask.StatusRunning, 1), bgtask.StatusCompleted, 2)
	twice := []bgtask.TaskMeta{
		ended(rec("task_u2", "owner-twice", bgtask.StatusRunning, 1), bgtask.StatusFailed, 2),
		ended(rec("task_u3", "owner-twice", bgtask.StatusRunning, 3), bgtask.StatusInterrupted, 4),
		announced(ended(rec("task_u4", "owner-twice", bgtask.StatusRunning, 5), bgtask.StatusCancelled, 6)),
		rec("task_u5", "owner-twice", bgtask.StatusRunning, 7),
	}
	commit(t, s, news.Owner, bgtask.Upsert(news))
	quiet := []bgtask.TaskMeta{
		announced(ended(rec("task_u6", "owner-quiet", bgtask.StatusRunning, 1), bgtask.StatusCompleted, 2)),
		wake(ended(rec("task_u7", "owner-quiet", bgtask.StatusRunning, 3), bgtask.StatusFailed, 4), bgtask.WakeSilent),
		rec("task_u8", "owner-quiet", bgtask.StatusQueued, 5),
		wake(rec("task_u9", "owner-quiet", bgtask.StatusRunning, 6), bgtask.WakeOnActivity),
	}
	for _, m := range append(twice, quiet...) {
		commit(t, s, m.Owner, bgtask.Upsert(m))
	}
	commit(t, s, "owner-other-wake", bgtask.Upsert(
		wake(ended(rec("task_u10", "owner-other-wake", bgtask.StatusRunning, 1), bgtask.StatusCompleted, 2), bgtask.WakeOnActivity)))
	want := []string{"owner-news", "owner-other-wake", "owner-twice"}
	if got := undelivered(t, l); !slices.Equal(got, want) {
		t.Fatalf("UndeliveredOwners = %q, want %q", got, want)
	}
	commit(t, s, "owner-twice", bgtask.Announce("task_u2", "task_u3"))
	commit(t, s, "owner-news", bgtask.Announce("task_u1"))
	if got, want := undelivered(t, l), []string{"owner-other-wake"}; !slices.Equal(got, want) {
		t.Fatalf("after Announce: %q, want %q", got, want)
	}
}
