package bgtask_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// recordedByHand is the plainest Go that keeps bgtask's promises by hand,
// the floor the spawn benchmarks are read against: a spawn makes an id,
// stores a running record (a TaskMeta in a map under a mutex) before it
// returns and starts a goroutine with its own cancellable context; the
// goroutine encodes the result, stores the terminal record, and only then
// appends the completed event to the owner's queue and wakes the owner,
// who waits and drains it. No retention, lineage, limits, wake policy,
// caps, escaping, observer or panic recovery: what it leaves out is what
// bgtask adds on top of the promises.
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

// spawn records a running task, runs fn on a goroutine and returns its id.
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

// drain waits for events and appends them to buf.
func (h *recordedByHand) drain(buf []bgtype.Event) []bgtype.Event {
	<-h.wake
	h.inboxMu.Lock()
	buf = append(buf, h.events...)
	h.events = h.events[:0]
	h.inboxMu.Unlock()
	return buf
}

// forget drops the records of buf's tasks: retention is not measured here.
func (h *recordedByHand) forget(buf []bgtype.Event) {
	h.storeMu.Lock()
	for i := range buf {
		delete(h.store, buf[i].TaskID)
	}
	h.storeMu.Unlock()
}

func answer42(context.Context) (any, error) { return 42, nil }

// BenchmarkRawGoRecordedResult is the floor under BenchmarkSpawnComplete:
// one task at a time, kept by hand as recordedByHand describes.
//
//	go test -run '^$' -bench 'SpawnComplete|RawGoCtxResultChan|RawGoRecordedResult' .
func BenchmarkRawGoRecordedResult(b *testing.B) {
	h := newRecordedByHand()
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id := h.spawn(answer42)
		for done := false; !done; {
			buf = h.drain(buf[:0])
			for i := range buf {
				if buf[i].TaskID == id && string(buf[i].Result) == "42" {
					done = true
				}
			}
			h.forget(buf)
		}
	}
}

// BenchmarkRawBurst10kRecorded is the floor under BenchmarkSpawnBurst10k:
// burstK tasks kept by hand as recordedByHand describes, then every
// completed event awaited.
func BenchmarkRawBurst10kRecorded(b *testing.B) {
	h := newRecordedByHand()
	buf := make([]bgtype.Event, 0, burstK)
	b.ReportAllocs()
	for b.Loop() {
		for range burstK {
			h.spawn(answer42)
		}
		for got := 0; got < burstK; {
			buf = h.drain(buf[:0])
			for i := range buf {
				if buf[i].Kind != bgtype.EventCompleted || string(buf[i].Result) != "42" {
					b.Fatalf("event %+v, want completed with result 42", buf[i])
				}
			}
			got += len(buf)
			h.forget(buf)
		}
	}
}
