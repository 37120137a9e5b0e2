package main

import (
	"context"
	"sync"
)

// holds tracks the hold tool's calls by label, so that the release and
// probe tools (called later, in the same process) can end one or watch it.
// A label's entry is made by whichever call names it first, so a release
// or probe may come before the hold it names. Safe for concurrent use.
type holds struct {
	mu      sync.Mutex // guards byLabel
	byLabel map[string]*hold
}

// hold is one label's state. Its channels are closed once each.
type hold struct {
	started  chan struct{} // closed when the hold call reported its progress and began waiting
	released chan struct{} // closed by the release tool
	stopped  chan struct{} // closed when the hold call returned; ctxErr and cause are set before

	mu      sync.Mutex // guards used and the release flag
	used    bool       // a hold call took this label
	release bool       // released was closed

	ctxErr, cause string // the hold ctx's error and cause, if it ended before a release
}

func (h *holds) get(label string) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byLabel == nil {
		h.byLabel = map[string]*hold{}
	}
	e, ok := h.byLabel[label]
	if !ok {
		e = &hold{started: make(chan struct{}), released: make(chan struct{}), stopped: make(chan struct{})}
		h.byLabel[label] = e
	}
	return e
}

// take marks the hold as used by a hold call; false if one already did.
func (e *hold) take() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used {
		return false
	}
	e.used = true
	return true
}

// open releases the hold (idempotent).
func (e *hold) open() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.release {
		e.release = true
		close(e.released)
	}
}

// wait blocks until the hold is released (true) or ctx ends (false, with
// ctx's error and cause recorded for the probe).
func (e *hold) wait(ctx context.Context) bool {
	close(e.started)
	select {
	case <-e.released:
		return true
	case <-ctx.Done():
		e.ctxErr = ctx.Err().Error()
		e.cause = context.Cause(ctx).Error()
		return false
	}
}
