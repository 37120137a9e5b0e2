package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// BenchRestore times Manager.Restore of n running records of one owner that
// a gone process left in a store made by open, once per op: each op
// interrupts all of them and delivers their events. Making and filling the
// store is not timed. open may register the store's Close with b.Cleanup.
func BenchRestore(b *testing.B, n int, open func(b *testing.B) store.Store) {
	BenchRestoreSeeded(b, n, func(b *testing.B, seed func(store.Store)) store.Store {
		st := open(b)
		seed(st)
		return st
	})
}

// BenchRestoreSeeded is BenchRestore for a store that must be filled
// through another handle than the one Restore uses: open calls seed with a
// store that writes the records (as the gone process did), and returns the
// store for the new process. A store that knows the instances whose records
// it wrote alive (store.InstanceLiveness) needs it: filled through the
// store Restore uses, the records would belong to a live instance.
func BenchRestoreSeeded(b *testing.B, n int, open func(b *testing.B, seed func(store.Store)) store.Store) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		store := open(b, func(s store.Store) { fillStale(b, s, "thread-1", n) })
		m, err := bgtask.New(bgtask.WithStore(store), bgtask.WithInstance("new"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := m.Restore(b.Context(), "thread-1")
		b.StopTimer()
		if err != nil || len(got) != n {
			b.Fatalf("Restore = %d records, %v; want %d", len(got), err, n)
		}
		if err := m.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// fillStale commits n running records of owner, as a process that is gone
// left them, 500 to a Commit.
func fillStale(b *testing.B, st store.Store, owner string, n int) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	actions := make([]store.Action, 0, 500)
	for i := range n {
		actions = append(actions, store.UpsertAction(bgtype.TaskMeta{
			ID: fmt.Sprintf("task_%08d", i), Owner: owner, Type: bgtype.TypeTask, Name: "research",
			Status: bgtype.StatusRunning, CreatedAt: at.Add(time.Duration(i) * time.Millisecond), StartedAt: at,
			Instance: "gone", Attempt: 1,
		}))
		if len(actions) == cap(actions) || i == n-1 {
			if err := st.Commit(b.Context(), owner, actions...); err != nil {
				b.Fatal(err)
			}
			actions = actions[:0]
		}
	}
}
