package storetest

import (
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// undelivered collects the owners s yields, sorted, failing on an error or
// an owner yielded twice.
func undelivered(t *testing.T, l store.UndeliveredLister) []string {
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

// testUndeliveredOwners: a store.UndeliveredLister yields each owner with
// a terminal record that is neither announced nor silent, once, whatever
// its other records; an owner whose ends are all announced or silent, or
// whose records are all live, is not yielded; Announce takes an owner off.
func testUndeliveredOwners(t *testing.T, c Config) {
	s := c.New(t)
	l, ok := s.(store.UndeliveredLister)
	if !ok {
		t.Skip("storetest: the store is not a store.UndeliveredLister")
	}
	if got := undelivered(t, l); len(got) != 0 {
		t.Fatalf("empty store: %q, want none", got)
	}
	announced := func(m bgtype.TaskMeta) bgtype.TaskMeta { m.Announced = true; return m }
	wake := func(m bgtype.TaskMeta, w bgtype.WakePolicy) bgtype.TaskMeta { m.Wake = w; return m }
	news := ended(rec("task_u1", "owner-news", bgtype.StatusRunning, 1), bgtype.StatusCompleted, 2)
	twice := []bgtype.TaskMeta{
		ended(rec("task_u2", "owner-twice", bgtype.StatusRunning, 1), bgtype.StatusFailed, 2),
		ended(rec("task_u3", "owner-twice", bgtype.StatusRunning, 3), bgtype.StatusInterrupted, 4),
		announced(ended(rec("task_u4", "owner-twice", bgtype.StatusRunning, 5), bgtype.StatusCanceled, 6)),
		rec("task_u5", "owner-twice", bgtype.StatusRunning, 7),
	}
	commit(t, s, news.Owner, store.UpsertAction(news))
	quiet := []bgtype.TaskMeta{
		announced(ended(rec("task_u6", "owner-quiet", bgtype.StatusRunning, 1), bgtype.StatusCompleted, 2)),
		wake(ended(rec("task_u7", "owner-quiet", bgtype.StatusRunning, 3), bgtype.StatusFailed, 4), bgtype.WakeSilent),
		rec("task_u8", "owner-quiet", bgtype.StatusQueued, 5),
		wake(rec("task_u9", "owner-quiet", bgtype.StatusRunning, 6), bgtype.WakeOnActivity),
	}
	for _, m := range append(twice, quiet...) {
		commit(t, s, m.Owner, store.UpsertAction(m))
	}
	commit(t, s, "owner-other-wake", store.UpsertAction(
		wake(ended(rec("task_u10", "owner-other-wake", bgtype.StatusRunning, 1), bgtype.StatusCompleted, 2), bgtype.WakeOnActivity)))
	want := []string{"owner-news", "owner-other-wake", "owner-twice"}
	if got := undelivered(t, l); !slices.Equal(got, want) {
		t.Fatalf("UndeliveredOwners = %q, want %q", got, want)
	}
	commit(t, s, "owner-twice", store.AnnounceAction("task_u2", "task_u3"))
	commit(t, s, "owner-news", store.AnnounceAction("task_u1"))
	if got, want := undelivered(t, l), []string{"owner-other-wake"}; !slices.Equal(got, want) {
		t.Fatalf("after Announce: %q, want %q", got, want)
	}
}
