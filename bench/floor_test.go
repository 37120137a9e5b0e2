package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"

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
// The floor (recordedByHand, as in the root package's bench_floor_test.go)
// is the plainest Go that keeps bgtask's promises by hand: a running
// record stored before the spawn returns, the terminal record stored
// before the completed event is queued for the owner, who waits and
// drains. A burst makes a new Manager (or floor) per iteration, as the
// table's rows do per sample; spawn+complete keeps one.

const floorBurst = 10_000

type recordedByHand struct {
	storeMu sync.Mutex
	store   map[string]*bgtype.TaskMeta

	inboxMu sync.Mutex
	events  []bgtype.Event
	wake    chan struct{}
}

func newRecordedByHand() *recordedByHand {
	return &recordedByHand{store: make(map[string]*bgtype.TaskMeta), wake: make(chan struct{}, 1)}
}

func (h *recordedByHand) spawn(fn func(context.Context) (any, error)) string {
	var raw [16]byte
	for i := range 2 {
		v := rand.Uint64()
		for j := range 8 {
			raw[i*8+j] = byte(v >> (8 * j))
		}
	}
	id := "task_" + hex.EncodeToString(raw[:])
	now := time.Now().UTC()
	rec := &bgtype.TaskMeta{ID: id, Owner: benchOwner, Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: now, StartedAt: now}
	h.storeMu.Lock()
	h.store[id] = rec
	h.storeMu.Unlock()
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		defer cancel(nil)
		v, err := fn(ctx)
		if err != nil {
			panic(err)
		}
		res, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		h.storeMu.Lock()
		rec.Status, rec.Result, rec.FinishedAt = bgtype.StatusCompleted, res, time.Now().UTC()
		h.storeMu.Unlock()
		h.inboxMu.Lock()
		h.events = append(h.events, bgtype.Event{Kind: bgtype.EventCompleted, TaskID: id, Result: res})
		h.inboxMu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}()
	return id
}

func (h *recordedByHand) drain(buf []bgtype.Event) []bgtype.Event {
	<-h.wake
	h.inboxMu.Lock()
	buf = append(buf, h.events...)
	h.events = h.events[:0]
	h.inboxMu.Unlock()
	return buf
}

func floorAnswer(context.Context) (any, error) { return 42, nil }

func BenchmarkFloorBurst10k(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		h := newRecordedByHand()
		buf := make([]bgtype.Event, 0, 1024)
		for range floorBurst {
			h.spawn(floorAnswer)
		}
		for got := 0; got < floorBurst; {
			buf = h.drain(buf[:0])
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
	b.ReportAllocs()
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
			_, err = awaitKind(ctx, ib, bgtype.EventCompleted, floorBurst, make([]bgtype.Event, 0, 1024))
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
	h := newRecordedByHand()
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id := h.spawn(floorAnswer)
		for done := false; !done; {
			buf = h.drain(buf[:0])
			for i := range buf {
				done = done || buf[i].TaskID == id && string(buf[i].Result) == "42"
			}
			h.storeMu.Lock()
			for i := range buf { // retention is not measured here
				delete(h.store, buf[i].TaskID)
			}
			h.storeMu.Unlock()
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
