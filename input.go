package bgtask

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// MaxOpenInputs is how many input requests one task may have open at once
// (RequestInput from several of its goroutines): one more fails with an
// error matching ErrLimit, and the record, the prompt view and the tools
// stay bounded.
const MaxOpenInputs = 16

// inputWait is one of a task's open input requests and where its answer
// goes.
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
// Several requests of one task may be open at once (its goroutines may
// each ask): the record holds them all, oldest first (TaskMeta.Input, then
// MoreInput), each is answered on its own, and the task reads
// awaiting_input until the last is answered or withdrawn. An answer leaves
// the record before Send returns.
//
// If ctx ends first, the request is withdrawn (the record goes back to
// running when it was the last) and RequestInput returns ctx's cause.
// Errors: ErrInvalidArgument for a blank prompt, ErrLimit when the task has
// MaxOpenInputs requests open already, ErrTerminal after the function
// returned, or the Store's error.
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
	if t.ended {
		t.endCommit(r)
		t.emitMu.Unlock()
		return errTaskEnded
	}
	r.opening = w
	t.emitMu.Unlock()

	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	if u.Input != nil && 1+len(u.MoreInput) >= MaxOpenInputs {
		// Read current: the task's input-path commits are serialised.
		t.emitMu.Lock()
		r.opening = nil
		t.endCommit(r)
		t.emitMu.Unlock()
		return fmt.Errorf("%w: task %s has %d open input requests (MaxOpenInputs)", ErrLimit, u.ID, MaxOpenInputs)
	}
	from := u.Status
	if u.Input == nil {
		u.Input, u.MoreInput = &w.req, nil
	} else { // another is open: this one joins it, last
		u.MoreInput = append(slices.Clone(u.MoreInput), w.req)
	}
	u.Status = bgtype.StatusAwaitingInput
	err := m.commitUpdate(t, &u)
	if err == nil && from != u.Status {
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
	r.inputs = append(r.inputs, w)
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

// closeInput forgets the request, if still open, and takes it off the
// record, which goes back to running when it was the last open one, unless
// the task has ended. Both the answer (answer) and the asker call it: the
// second finds it done. Like openInput, it commits without emitMu.
func (m *Manager) closeInput(t *Task, w *inputWait) error {
	t.emitMu.Lock()
	r := t.beginCommit()
	r.inputs = slices.DeleteFunc(r.inputs, func(x *inputWait) bool { return x == w })
	ended := t.ended
	t.emitMu.Unlock()
	defer t.finishCommit(r)
	if ended {
		return nil
	}
	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	open := u.OpenInputs() // a copy: the record's slices are never changed in place
	i := slices.IndexFunc(open, func(in bgtype.InputRequest) bool { return in.ID == w.req.ID })
	if u.Status != bgtype.StatusAwaitingInput || i < 0 {
		return nil
	}
	open = slices.Delete(open, i, i+1)
	u.Input, u.MoreInput = nil, nil
	if len(open) == 0 {
		u.Status = bgtype.StatusRunning
	} else {
		u.Input = &open[0]
		if len(open) > 1 {
			u.MoreInput = open[1:]
		}
	}
	if err := m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: resume after input: %w", err)
	}
	if u.Status == bgtype.StatusRunning {
		m.notify(bgtype.StatusAwaitingInput, &u)
	}
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
// task's message history and returns its id there, once the request is off
// the record (so a read after Send no longer shows it). Only one answer is
// taken per request. An answer to the request whose record is being
// committed (visible in the store already, to another instance above all)
// waits for that commit, then finds the request open, or not if the commit
// failed.
func (t *Task) answer(msg bgtype.Message) (string, error) {
	t.emitMu.Lock()
	w := t.openInputWait(msg.InReplyTo)
	for w == nil {
		r := t.rare.Load()
		if r == nil || r.opening == nil || r.opening.req.ID != msg.InReplyTo {
			t.emitMu.Unlock()
			return "", fmt.Errorf("%w: task %s, request %q", ErrNoInputRequest, t.rec.ID, msg.InReplyTo)
		}
		busy := r.busy // set while opening is
		t.emitMu.Unlock()
		<-busy
		t.emitMu.Lock()
		w = t.openInputWait(msg.InReplyTo)
	}
	r := t.rare.Load() // w != nil: the state exists
	r.inputs = slices.DeleteFunc(r.inputs, func(x *inputWait) bool { return x == w })
	w.answer <- msg
	id := t.m.msgs.add(t.rec.ID, MessageIn, msg)
	t.emitMu.Unlock()
	// The asker does it too, and reports a failure to the task.
	_ = t.m.closeInput(t, w)
	return id, nil
}
