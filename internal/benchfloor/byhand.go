package benchfloor

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// ByHand keeps bgtask's promises by hand: a spawn makes an id, stores a
// running record (a TaskMeta in a map under a mutex) before it returns and
// starts a goroutine with its own cancellable context; the goroutine
// encodes the result, stores the terminal record, and only then appends
// the completed event to the owner's queue and wakes the owner, who waits
// and drains it. No retention, lineage, limits, wake policy, caps,
// escaping, observer or panic recovery: what it leaves out is what bgtask
// adds on top of the promises. Make one with New; safe for concurrent use
// by spawners and one drainer. A function that fails panics.
type ByHand struct {
	owner string

	storeMu sync.Mutex // guards store
	store   map[string]*bgtype.TaskMeta

	inboxMu sync.Mutex // guards events
	events  []bgtype.Event
	wake    chan struct{}
}

// New returns an empty ByHand whose records belong to owner.
func New(owner string) *ByHand {
	return &ByHand{owner: owner, store: make(map[string]*bgtype.TaskMeta), wake: make(chan struct{}, 1)}
}

// Spawn records a running task, runs fn on a goroutine and returns its id.
func (h *ByHand) Spawn(fn func(context.Context) (any, error)) string {
	var raw [16]byte
	for i := range 2 {
		v := rand.Uint64()
		for j := range 8 {
			raw[i*8+j] = byte(v >> (8 * j))
		}
	}
	id := "task_" + hex.EncodeToString(raw[:])
	now := time.Now().UTC()
	rec := &bgtype.TaskMeta{ID: id, Owner: h.owner, Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: now, StartedAt: now}
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

// Drain waits for events and appends them to buf.
func (h *ByHand) Drain(buf []bgtype.Event) []bgtype.Event {
	<-h.wake
	h.inboxMu.Lock()
	buf = append(buf, h.events...)
	h.events = h.events[:0]
	h.inboxMu.Unlock()
	return buf
}

// Forget drops the records of buf's tasks: retention is not measured.
func (h *ByHand) Forget(buf []bgtype.Event) {
	h.storeMu.Lock()
	for i := range buf {
		delete(h.store, buf[i].TaskID)
	}
	h.storeMu.Unlock()
}
