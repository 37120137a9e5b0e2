package bgtask

import (
	"context"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// inputWait is a task's open input request and where its answer goes.
type inputWait struct {
	req    bgtype.InputRequest
	answer chan bgtype.Message // buffered: the answer never blocks the sender
}

// RequestInput asks the task's owner a question and waits for the answer.
// The record becomes awaiting_input with the
// request, the owner gets an EventInputRequested unless the wake policy is
// WakeSilent, and the prompt view and tools show the request either way.
// The owner answers with a Message whose InReplyTo is the request id
// (Owner.Send); the record then goes back to running and the message is
// returned. A prompt longer than Caps.MaxPromptBytes is cut, with a marker
// that gives its length.
//
// If ctx ends first, the record goes back to running and RequestInput
// returns ctx's cause. Errors: ErrInvalidArgument for a blank prompt,
// ErrInputPending while another request of the task is open, ErrTerminal
// after the function returned, or the Store's error.
func (t *Task) RequestInput(ctx context.Context, prompt string) (bgtype.Message, error) {
	if strings.TrimSpace(prompt) == "" {
		return bgtype.Message{}, errBlankPrompt
	}
	prompt, _ = jsoncap.Text(prompt, t.m.cfg.caps.MaxPromptBytes)
	w := &inputWait{req: bgtype.InputRequest{ID: idgen.New("input_", clock.Now()), Prompt: prompt}, answer: make(chan bgtype.Message, 1)}
	if err := t.m.openInput(t, w); err != nil {
		return bgtype.Message{}, err
	}
	select {
	case msg := <-w.answer:
		return msg, t.m.closeInput(t, w)
	case <-ctx.Done():
		_ = t.m.closeInput(t, w)
		return bgtype.Message{}, context.Cause(ctx)
	}
}

// openInput records the request and tells the owner. The Store commit, its
// retries and the observer run without emitMu, so a slow Store does not hold
// up Emit; the task's input-path commits are serialised by beginCommit
// instead, and the task's end waits for the one in flight, so the request
// never lands after the terminal record, and its event never after the
// terminal event.
func (m *Manager) openInput(t *Task, w *inputWait) error {
	t.emitMu.Lock()
	r := t.beginCommit()
	switch {
	case t.ended:
		t.endCommit(r)
		t.emitMu.Unlock()
		return errTaskEnded
	case r.input != nil:
		t.endCommit(r)
		t.emitMu.Unlock()
		return ErrInputPending
	}
	r.opening = w
	t.emitMu.Unlock()

	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	from := u.Status
	u.Status, u.Input = bgtype.StatusAwaitingInput, &w.req
	err := m.commitUpdate(t, &u)
	if err == nil {
		m.notify(from, &u)
	}

	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	defer t.endCommit(r) // after the event: the terminal one waits for it
	r.opening = nil
	switch {
	case err != nil:
		return fmt.Errorf("bgtask: request input: %w", err)
	case t.ended: // the function returned meanwhile: its terminal record follows
		return errTaskEnded
	}
	r.input = w
	if r.inputSig != nil { // wake the waiters of waitSettled
		close(r.inputSig)
		r.inputSig = nil
	}
	if send, _ := route(t.wake(), bgtype.EventInputRequested, ""); send {
		req := w.req
		_ = m.deliver(u.Owner, bgtype.Event{Kind: bgtype.EventInputRequested, TaskID: u.ID, Name: u.Name, Input: &req})
	}
	return nil
}

// closeInput forgets the request, if still open, and records the task as
// running again unless it has ended. Like openInput, it commits without
// emitMu.
func (m *Manager) closeInput(t *Task, w *inputWait) error {
	t.emitMu.Lock()
	r := t.beginCommit()
	if r.input == w {
		r.input = nil
	}
	ended := t.ended
	t.emitMu.Unlock()
	defer t.finishCommit(r)
	if ended {
		return nil
	}
	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	if u.Status != bgtype.StatusAwaitingInput || u.Input == nil || u.Input.ID != w.req.ID {
		return nil
	}
	u.Status, u.Input = bgtype.StatusRunning, nil
	if err := m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: resume after input: %w", err)
	}
	m.notify(bgtype.StatusAwaitingInput, &u)
	return nil
}

// beginCommit waits until no input-path commit of t is in flight, then
// marks one, and returns the task's rare state. Called with emitMu held,
// which it releases while it waits.
func (t *Task) beginCommit() *taskRare {
	r := t.rareState()
	for r.busy != nil {
		busy := r.busy
		t.emitMu.Unlock()
		<-busy
		t.emitMu.Lock()
	}
	r.busy = make(chan struct{})
	return r
}

// endCommit ends the input-path commit that beginCommit marked. Called with
// emitMu held.
func (t *Task) endCommit(r *taskRare) {
	close(r.busy)
	r.busy = nil
}

// finishCommit is endCommit for a caller that does not hold emitMu.
func (t *Task) finishCommit(r *taskRare) {
	t.emitMu.Lock()
	t.endCommit(r)
	t.emitMu.Unlock()
}

// inputCommit returns the input-path commit in flight, or nil. Called with
// emitMu held.
func (t *Task) inputCommit() <-chan struct{} {
	if r := t.rare.Load(); r != nil && r.busy != nil {
		return r.busy
	}
	return nil
}

// answer hands msg to the open request it replies to, records it in the
// task's message history and returns its id there. Only one answer is taken
// per request. An answer to the request whose record is being committed
// (visible in the store already, to another instance above all) waits for
// that commit, then finds the request open, or not if the commit failed.
func (t *Task) answer(msg bgtype.Message) (string, error) {
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	w := t.openInputWait()
	for w == nil || w.req.ID != msg.InReplyTo {
		r := t.rare.Load()
		if r == nil || r.opening == nil || r.opening.req.ID != msg.InReplyTo {
			return "", fmt.Errorf("%w: task %s, request %q", ErrNoInputRequest, t.rec.ID, msg.InReplyTo)
		}
		busy := r.busy // set while opening is
		t.emitMu.Unlock()
		<-busy
		t.emitMu.Lock()
		w = t.openInputWait()
	}
	t.rare.Load().input = nil // w != nil: the state exists
	w.answer <- msg
	return t.m.msgs.add(t.rec.ID, MessageIn, msg), nil
}
