package main

// This file holds what the server does for a thread whose task, or open
// turn, may be on another instance of a fleet (several servers on one
// PostgreSQL database behind a load balancer without affinity): messages
// and answers to a task. (A stop that lands on another instance than the
// turn's is bgtask.Owner.StopRun's: see postStop.)

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// sendBody is the body of POST /threads/{id}/tasks/{task}/messages.
type sendBody struct {
	Text      *string `json:"text"`
	InReplyTo string  `json:"in_reply_to"`
}

// postTaskMessage sends the user's message to one of the thread's tasks,
// wherever it runs: {"text": "..."} to a sub-agent's inbox (a research
// takes it as a note), or, with "in_reply_to" the id of the task's input
// request (GET /threads/{id}/tasks shows it), the answer to its question.
// It answers once the task took it (bgtask.Owner.Send), with the message's
// id; a task that cannot take it is a 404 (not this thread's) or a 409
// (ended, not a sub-agent, no such question, no longer taking messages).
func (s *server) postTaskMessage(w http.ResponseWriter, r *http.Request) {
	id := pathThread(w, r)
	if id == "" {
		return
	}
	task := r.PathValue("task")
	if len(task) > 64 || !utf8.ValidString(task) {
		httpError(w, http.StatusNotFound, "no such task in this thread")
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	dec.DisallowUnknownFields()
	var in sendBody
	if err := dec.Decode(&in); err != nil || dec.More() {
		httpError(w, http.StatusBadRequest, `body: want one JSON object {"text": "...", "in_reply_to": "input_..." (optional)}`)
		return
	}
	switch {
	case in.Text == nil || strings.TrimSpace(*in.Text) == "":
		httpError(w, http.StatusBadRequest, `"text" is missing or blank`)
		return
	case len(*in.Text) > s.cfg.maxText || !utf8.ValidString(*in.Text):
		httpError(w, http.StatusBadRequest, fmt.Sprintf(`"text": want valid UTF-8 of at most %d bytes`, s.cfg.maxText))
		return
	}
	msgID, err := s.m.Owner(id).Send(r.Context(), task, bgtype.Message{From: "user", Content: *in.Text, InReplyTo: in.InReplyTo})
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]string{"thread": id, "task_id": task, "message_id": msgID})
	case errors.Is(err, bgtask.ErrNotFound):
		httpError(w, http.StatusNotFound, "no such task in this thread")
	case errors.Is(err, bgtask.ErrInvalidArgument):
		httpError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, bgtask.ErrTerminal), errors.Is(err, bgtask.ErrNotSubAgent),
		errors.Is(err, bgtask.ErrNoInputRequest), errors.Is(err, bgtask.ErrInboxClosed):
		httpError(w, http.StatusConflict, err.Error())
	case r.Context().Err() != nil:
		// The client left: the message was withdrawn, or may have been taken.
	default:
		s.log.Error("send", "thread", id, "task_id", task, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot send the message")
	}
}
