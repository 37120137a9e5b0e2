package bgtask_test

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// benchCursor is a small checkpoint, a cursor.
type benchCursor struct {
	Next int `json:"next"`
}

// BenchmarkKindSpawnComplete is BenchmarkSpawnComplete for a resumable
// kind: the spec encoded and kept on the record, the end heard once.
// With -checkpoint-style work, see BenchmarkCheckpointSave.
func BenchmarkKindSpawnComplete(b *testing.B) {
	k, err := bgtask.NewKind("bench/v1", func(context.Context, *bgtask.Task, CrawlSpec, *bgtask.Checkpoint[benchCursor]) (any, error) {
		return 42, nil
	}, bgtask.KindConfig{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithKinds(k))
	if err != nil {
		b.Fatal(err)
	}
	defer shutdownBench(b, m)
	o := m.Owner(benchOwner)
	ib, err := o.Inbox()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	spec := CrawlSpec{URL: "https://example.com", Pages: 4}
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id, err := k.Spawn(ctx, o, spec)
		if err != nil {
			b.Fatalf("Spawn: %v", err)
		}
		for done := false; !done; {
			if err := ib.Wait(ctx); err != nil {
				b.Fatalf("Inbox.Wait: %v", err)
			}
			buf = ib.AppendDrain(buf[:0])
			for i := range buf {
				if buf[i].TaskID == id {
					done = true
				}
			}
		}
	}
}

// BenchmarkCheckpointSave is one durable Save of a small cursor by a
// running attempt, on the MemoryStore: the commit and its read back.
func BenchmarkCheckpointSave(b *testing.B) {
	start, stop := make(chan *bgtask.Checkpoint[benchCursor]), make(chan struct{})
	k, err := bgtask.NewKind("bench/v1", func(ctx context.Context, _ *bgtask.Task, _ CrawlSpec, cp *bgtask.Checkpoint[benchCursor]) (any, error) {
		start <- cp
		<-stop
		return nil, nil
	}, bgtask.KindConfig{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithKinds(k))
	if err != nil {
		b.Fatal(err)
	}
	defer shutdownBench(b, m)
	ctx := context.Background()
	if _, err := k.Spawn(ctx, m.Owner(benchOwner), CrawlSpec{}); err != nil {
		b.Fatal(err)
	}
	cp := <-start
	defer close(stop)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if err := cp.Save(ctx, benchCursor{Next: n}); err != nil {
			b.Fatalf("Save: %v", err)
		}
	}
}
