package bgtask

import (
	"context"
	"fmt"
	"strings"
)

// inputWait is a task's open input request and where its answer goes.
type inputWait struct {
	req    InputRequest
	answer chan Message // buffered: the answer never blocks the sender
}

// RequestInput asks the task's owner a question and waits for the answer.
// The record becomes awaiting_input with the
// request, the owner gets an EventInputRequested unless the wake policy is
// WakeSilent, and the prompt view and tools show the request either way.
// The owner answers with a Message whose InReplyTo is the request id
// (Owner.Send); the record then goes back to running and the message is
// returned. A prompt longer than WithMaxPromptBytes is cut, with a marker
// that gives its length.
//
// If ctx ends first, the record goes back to running and RequestInput
// returns ctx's cause. Errors: ErrInvalidArgument for a blank prompt,
// ErrInputPending while another request of the task is open, ErrTaskEnded
// after the function returned, or the Store's error.
func (t *Task) RequestInput(ctx context.Context, prompt string) (Message, error) {
	if strings.TrimSpace(prompt) == "" {
		return Message{}, errBlankPrompt
	}
	prompt, _ = truncateText(prompt, t.m.cfg.caps.prompt)
	w := &inputWait{req: InputRequest{ID: "input_" + newTaskID(now())[len(IDPrefix):], Prompt: prompt}, answer: make(chan Message, 1)}
	if err := t.m.openInput(t, w); err != nil {
		return Message{}, err
	}
	select {
	case msg := <-w.answer:
		return msg, t.m.closeInput(t, w)
	case <-ctx.Done():
		_ = t.m.closeInput(t, w)
		return Message{}, context.Cause(ctx)
	}
}

// openInput records the request and tells the owner. It holds emitMu so the
// request cannot cross the task's end, and its event keeps its place among
// the task's custom events.
func (m *Manager) openInput(t *Task, w *inputWait) error {
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	switch {
	case t.ended:
		return ErrTaskEnded
	case t.openInputWait() != nil:
		return ErrInputPending
	}
	var u TaskMeta
	m.readRecord(t, &u)
	from := u.Status
	u.Status, u.Input = StatusAwaitingInput, &w.req
	if err := m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: request input: %w", err)
	}
	r := t.rareState()
	r.input = w
	if r.inputSig != nil { // wake the waiters of waitSettled
		close(r.inputSig)
		r.inputSig = nil
	}
	m.notify(from, &u)
	if send, _ := t.wake().route(EventInputRequested, ""); send {
		req := w.req
		_ = m.deliver(u.Owner, Event{Kind: EventInputRequested, TaskID: u.ID, Name: u.Name, Input: &req})
	}
	return nil
}

// closeInput forgets the request, if still open, and records the task as
// running again unless it has ended.
func (m *Manager) closeInput(t *Task, w *inputWait) error {
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	if r := t.rare.Load(); r != nil && r.input == w {
		r.input = nil
	}
	if t.ended {
		return nil
	}
	var u TaskMeta
	m.readRecord(t, &u)
	if u.Status != StatusAwaitingInput || u.Input == nil || u.Input.ID != w.req.ID {
		return nil
	}
	u.Status, u.Input = StatusRunning, nil
	if err := m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: resume after input: %w", err)
	}
	m.notify(StatusAwaitingInput, &u)
	return nil
}

// answer hands msg to the open request it replies to, records it in the
// task's message history and returns its id there. Only one answer is taken
// per request.
func (t *Task) answer(msg Message) (string, error) {
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	w := t.openInputWait()
	if w == nil || w.req.ID != msg.InReplyTo {
		return "", fmt.Errorf("%w: task %s, request %q", ErrNoInputRequest, t.rec.ID, msg.InReplyTo)
	}
	t.rare.Load().input = nil // w != nil: the state exists
	w.answer <- msg
	return t.m.msgs.add(t.rec.ID, MessageIn, msg), nil
}
