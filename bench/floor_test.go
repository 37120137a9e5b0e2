package main

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/benchfloor"

	"github.com/cloudwego/eino/adk/backgroundtask"

	"github.com/bgtask/bgtask"
)

// The benchmarks below put bgtask, eino's background-task registry and the
// hand-kept floor side by side in one test binary, so that bench/ratios.py
// interleaves them and gives medians of their ratios:
//
//	go test -c -o /tmp/bench.test . && ../bench/ratios.py -rounds 7 -benchtime 20x \
//	    -pair BgtaskBurst10k/EinoBurst10k -pair FloorBurst10k/EinoBurst10k bench=/tmp/bench.test
//
// The floor (internal/benchfloor's ByHand, which the root package's floor
// benchmarks use too) is the plainest Go that keeps bgtask's promises by
// hand: a running
// record stored before the spawn returns, the terminal record stored
// before the completed event is queued for the owner, who waits and
// drains. A burst makes a new Manager (or floor) per iteration, as the
// table's rows do per sample; spawn+complete keeps one.

const floorBurst = 10_000

func floorAnswer(context.Context) (any, error) { return 42, nil }

func BenchmarkFloorBurst10k(b *testing.B) {
	buf := make([]bgtype.Event, 0, 1024) // kept across bursts, as EinoBurst10k keeps its ids
	b.ReportAllocs()
	for b.Loop() {
		h := benchfloor.New(benchOwner)
		for range floorBurst {
			h.Spawn(floorAnswer)
		}
		for got := 0; got < floorBurst; {
			buf = h.Drain(buf[:0])
			for i := range buf {
				if buf[i].Kind != bgtype.EventCompleted || string(buf[i].Result) != "42" {
					b.Fatalf("event %+v, want completed with 42", buf[i])
				}
			}
			got += len(buf)
		}
	}
}

func BenchmarkBgtaskBurst10k(b *testing.B) {
	ctx := context.Background()
	buf := make([]bgtype.Event, 0, 1024) // kept across bursts, as EinoBurst10k keeps its ids
	b.ReportAllocs()
	defer reportGoStarts(b)()
	for b.Loop() {
		err := withManager(ctx, func(m *bgtask.Manager) error {
			o := m.Owner(benchOwner)
			ib, err := o.Inbox()
			if err != nil {
				return err
			}
			for range floorBurst {
				if _, err := o.Spawn(ctx, answer); err != nil {
					return err
				}
			}
			buf, err = awaitKind(ctx, ib, bgtype.EventCompleted, floorBurst, buf)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEinoBurst10k(b *testing.B) {
	ctx := context.Background()
	ids := make([]string, floorBurst)
	b.ReportAllocs()
	defer reportGoStarts(b)()
	for b.Loop() {
		err := withEino(ctx, func(m *backgroundtask.Manager) error {
			for i := range ids {
				id, err := einoRun(ctx, m, einoAnswer)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			for _, id := range ids {
				if err := einoAwait(ctx, m, id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorSpawnComplete(b *testing.B) {
	h := benchfloor.New(benchOwner)
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id := h.Spawn(floorAnswer)
		for done := false; !done; {
			buf = h.Drain(buf[:0])
			for i := range buf {
				done = done || buf[i].TaskID == id && string(buf[i].Result) == "42"
			}
			h.Forget(buf) // retention is not measured here
		}
	}
}

func BenchmarkBgtaskSpawnComplete(b *testing.B) {
	ctx := context.Background()
	err := withManager(ctx, func(m *bgtask.Manager) error {
		o := m.Owner(benchOwner)
		ib, err := o.Inbox()
		if err != nil {
			return err
		}
		buf := make([]bgtype.Event, 0, 16)
		b.ReportAllocs()
		defer reportGoStarts(b)()
		for b.Loop() {
			id, err := o.Spawn(ctx, answer)
			if err != nil {
				return err
			}
			for done := false; !done; {
				if err := ib.Wait(ctx); err != nil {
					return err
				}
				buf = ib.AppendDrain(buf[:0])
				for i := range buf {
					done = done || buf[i].TaskID == id && string(buf[i].Result) == "42"
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkEinoSpawnComplete(b *testing.B) {
	ctx := context.Background()
	err := withEino(ctx, func(m *backgroundtask.Manager) error {
		b.ReportAllocs()
		defer reportGoStarts(b)()
		for b.Loop() {
			id, err := einoRun(ctx, m, einoAnswer)
			if err != nil {
				return err
			}
			if err := einoAwait(ctx, m, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
