package bgtask_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
)

// BenchmarkRestore10k is Restore after a crash that left 10,000 records of
// one owner running: each op interrupts all of them and delivers their
// events. Filling the store is not timed.
//
//	go test -run '^$' -bench Restore10k -benchtime 5x .
func BenchmarkRestore10k(b *testing.B) {
	benchRestore(b, 10_000, func(b *testing.B) bgtask.Store { return bgtask.NewMemoryStore() })
}

// benchRestore times Restore of n stale running records in a store made by
// open for each op.
func benchRestore(b *testing.B, n int, open func(b *testing.B) bgtask.Store) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		store := open(b)
		fillStale(b, store, "thread-1", n)
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
// left them.
func fillStale(b *testing.B, store bgtask.Store, owner string, n int) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	actions := make([]bgtask.Action, 0, 500)
	for i := range n {
		actions = append(actions, bgtask.Upsert(bgtask.TaskMeta{
			ID: fmt.Sprintf("task_%08d", i), Owner: owner, Type: bgtask.TypeTask, Name: "research",
			Status: bgtask.StatusRunning, CreatedAt: at.Add(time.Duration(i) * time.Millisecond), StartedAt: at,
			Instance: "gone", Attempt: 1,
		}))
		if len(actions) == cap(actions) || i == n-1 {
			if err := store.Commit(b.Context(), owner, actions...); err != nil {
				b.Fatal(err)
			}
			actions = actions[:0]
		}
	}
}
