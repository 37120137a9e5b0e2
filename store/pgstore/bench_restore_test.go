package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// BenchmarkPostgresRestore10k measures the commit a batching Restore makes:
// one Commit of 10,000 upserts that turn running records interrupted.
//
//	go test -run '^$' -bench BenchmarkPostgresRestore10k -benchtime 5x ./store/pgstore
func BenchmarkPostgresRestore10k(b *testing.B) {
	const n = 10_000
	ctx := b.Context()
	s, err := pgstore.Open(ctx, pgtest.NewDSN(b), pgstore.WithRetainPerOwner(2*n))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	round := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		running := make([]store.Action, n)
		done := make([]store.Action, n)
		for i := range n {
			m := rec(fmt.Sprintf("task_%d_%d", round, i), "alice", bgtype.StatusRunning)
			running[i] = store.UpsertAction(m)
			m.Status, m.FinishedAt, m.ErrorKind, m.Error = bgtype.StatusInterrupted, m.StartedAt, bgtype.KindInterrupted, "interrupted"
			m.Attempt++
			done[i] = store.UpsertAction(m)
		}
		if err := s.Commit(ctx, "alice", running...); err != nil {
			b.Fatal(err)
		}
		round++
		b.StartTimer()
		if err := s.Commit(ctx, "alice", done...); err != nil {
			b.Fatal(err)
		}
	}
}
