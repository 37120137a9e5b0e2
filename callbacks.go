package bgtask

import (
	"log/slog"
	"sync"
)

// hostCalls is the one place that calls the host's callbacks. A callback
// due where no lock of bgtask is held, and whose caller must not go on
// before it was made, is called at once (callNow): the observers
// (WithObserver on the goroutine that committed, WithEventObserver on the
// emitter's; a Restore's, once it released its lock) and OnRunCanceled.
// The others are queued (call): OnWake and WithOnPendingOwner.
// Under its own locks bgtask only appends a call to the queue; one goroutine at a time, the Manager's, takes the calls in the
// order they were queued and makes them with no lock of bgtask held, so a
// callback may call the Manager, an Owner or a Receiver (net/http runs its
// hooks off its lock the same way). A panic in a callback is recovered and
// logged with the callback's name, and the next call is made.
//
// The goroutine is started when the first call is queued and exits when
// the queue is empty, so a Manager whose host registered no callback, or
// whose callbacks are quiet, has none, and a spawn without callbacks never
// touches the queue. Shutdown and Stop wait for it (wait), after the last
// task ended.
type hostCalls struct {
	log *slog.Logger

	mu      sync.Mutex    // guards the fields below; nothing is locked under it
	queue   []hostCall    // calls not yet made, oldest first
	spare   []hostCall    // the drained batch's array, reused
	running bool          // a goroutine makes the queued calls
	idle    chan struct{} // made by wait, closed when that goroutine exits; nil when nobody waits
}

// hostCall is one queued call of a host callback.
type hostCall struct {
	name  string // the callback's name in the log: "WithObserver", "OnWake", ...
	about string // the task id or owner the call is about, for the log
	f     func()
}

// call queues f, the call of the host callback name about a task or an
// owner, and starts the goroutine that makes the calls if none runs. It
// takes only hostCalls.mu, so any lock of bgtask may be held.
func (h *hostCalls) call(name, about string, f func()) {
	h.mu.Lock()
	h.queue = append(h.queue, hostCall{name: name, about: about, f: f})
	if h.running {
		h.mu.Unlock()
		return
	}
	h.running = true
	h.mu.Unlock()
	go h.drain()
}

// drain makes the queued calls in order until the queue is empty.
func (h *hostCalls) drain() {
	for {
		h.mu.Lock()
		batch := h.queue
		if len(batch) == 0 {
			h.running = false
			if h.idle != nil {
				close(h.idle)
				h.idle = nil
			}
			h.mu.Unlock()
			return
		}
		h.queue, h.spare = h.spare[:0], nil
		h.mu.Unlock()
		for i := range batch {
			h.invoke(&batch[i])
			batch[i] = hostCall{} // let the call's captures go
		}
		h.mu.Lock()
		if h.spare == nil {
			h.spare = batch[:0]
		}
		h.mu.Unlock()
	}
}

// callNow makes the call of the host callback name at once, on the
// caller's goroutine, as invoke does. The caller holds no lock of bgtask.
func (h *hostCalls) callNow(name, about string, f func()) {
	h.invoke(&hostCall{name: name, about: about, f: f})
}

// invoke makes one call, recovering and logging a panic in it.
func (h *hostCalls) invoke(c *hostCall) {
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("bgtask: callback panicked", "callback", c.name, "about", c.about, "panic", r)
		}
	}()
	c.f()
}

// wait returns once every call queued so far, and every call those queue
// in turn, has been made and the goroutine that made them has exited. A
// callback that calls wait (through Shutdown or Stop) would wait for
// itself: the callbacks' docs say so.
func (h *hostCalls) wait() {
	h.mu.Lock()
	if !h.running {
		h.mu.Unlock()
		return
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.mu.Unlock()
	<-idle
}
