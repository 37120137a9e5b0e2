// Package scripted is a scripted OpenAI-compatible chat completion endpoint
// for the reference server: no key, no network, the same answer for the
// same conversation. It plays two parts:
//
//   - the thread's assistant, whose reply is decided by the user's last
//     message (see reply for the commands it knows), and
//   - the research sub-agent's model, asked one step at a time
//     ("Research step 2 of 3: topic"), which answers with a finding;
//   - the lookup tool's model ("Look up: query"), which answers "the
//     answer to query".
//
// Hooks let the caller hold or fail a call (the server's default delay, or a
// test that decides when a research step may go on).
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
)

// Hooks are called before a call is answered, on the request's goroutine;
// ctx ends when the caller gives up the request. A hook's error fails the
// call with HTTP 500 and the error's text. A nil hook answers at once.
type Hooks struct {
	// Research is called for step step of steps of the research of topic.
	Research func(ctx context.Context, topic string, step, steps int) error
	// Lookup is called for the lookup of query.
	Lookup func(ctx context.Context, query string) error
	// Turn is called for a call of the thread's assistant: command is the
	// user's last message, afterTools is true when the call follows the
	// answers of the tools the assistant called for it.
	Turn func(ctx context.Context, command string, afterTools bool) error
}

// Model is the endpoint, an http.Handler serving POST .../chat/completions.
// The zero value answers every call at once. It is safe for concurrent use.
type Model struct {
	Hooks Hooks

	seq atomic.Int64 // ids of completions and tool calls
}

// maxRequest caps a request body: a conversation the server sends is capped
// far below it.
const maxRequest = 8 << 20

// message is the part of a chat message the script reads.
type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// text returns the message's content, a string or an array of text parts.
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// ToolCall is a function call of the assistant, in OpenAI's wire form.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

var researchStep = regexp.MustCompile(`^Research step (\d+) of (\d+): (.+)$`)

// ServeHTTP answers a chat completion request.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"only POST /chat/completions is served"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request: "+err.Error())
		return
	}
	content, calls, err := m.answer(r.Context(), req.Messages)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	n := m.seq.Add(1)
	for i := range calls {
		calls[i].ID = fmt.Sprintf("call_%d_%d", n, i+1)
		calls[i].Type = "function"
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 0, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	})
}

func writeError(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": text, "type": "scripted"}})
}

// answer runs the hooks, then the script.
func (m *Model) answer(ctx context.Context, msgs []message) (string, []ToolCall, error) {
	if len(msgs) > 0 {
		if sm := researchStep.FindStringSubmatch(msgs[len(msgs)-1].text()); sm != nil {
			step, _ := strconv.Atoi(sm[1])
			steps, _ := strconv.Atoi(sm[2])
			if h := m.Hooks.Research; h != nil {
				if err := h(ctx, sm[3], step, steps); err != nil {
					return "", nil, err
				}
			}
			return fmt.Sprintf("finding %d of %d about %s", step, steps, sm[3]), nil, nil
		}
	}
	if len(msgs) > 0 {
		if q, ok := strings.CutPrefix(msgs[len(msgs)-1].text(), "Look up: "); ok {
			if h := m.Hooks.Lookup; h != nil {
				if err := h(ctx, q); err != nil {
					return "", nil, err
				}
			}
			return "the answer to " + q, nil, nil
		}
	}
	command, afterTools := lastCommand(msgs)
	if h := m.Hooks.Turn; h != nil {
		if err := h(ctx, command, afterTools); err != nil {
			return "", nil, err
		}
	}
	content, calls := reply(msgs)
	return content, calls, nil
}

// IsEnvelope reports whether text is one of bgtask's rendered blocks (an
// event, a task's message, the task view): the script reads past them to
// the user's own words.
func IsEnvelope(text string) bool { return strings.HasPrefix(text, "<background-task") }

// lastCommand returns the user's last message, and whether the tools it
// asked for have answered since.
func lastCommand(msgs []message) (command string, afterTools bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case "tool":
			afterTools = true
		case "user":
			if t := msgs[i].text(); !IsEnvelope(t) {
				return t, afterTools
			}
		}
	}
	return "", afterTools
}

// reply is the assistant's script. Reading back from the last message,
// past bgtask's envelopes:
//
//   - after tool answers: the final reply, "done: " and each tool's name
//     and answer (cut to 300 bytes);
//   - after the user's message: its commands, separated by ";", become
//     tool calls in one step:
//     "research TOPIC [in N steps] [asking QUESTION]" calls research, "lookup QUERY" lookup,
//     "list" list_tasks, "get ID" get_task, "wait ID" wait_task,
//     "cancel NAME-OR-ID" cancel_task;
//     a message with no command gets "ok: " and the number of background
//     events the turn was handed.
func reply(msgs []message) (string, []ToolCall) {
	events := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		t := msgs[i].text()
		switch {
		case msgs[i].Role == "user" && IsEnvelope(t):
			if strings.HasPrefix(t, "<background-task-event") {
				events++
			}
			continue
		case msgs[i].Role == "system":
			continue
		case msgs[i].Role == "tool":
			return summarize(msgs, i), nil
		case msgs[i].Role == "user":
			if calls := commands(t); len(calls) > 0 {
				return "", calls
			}
			return fmt.Sprintf("ok: %d background events", events), nil
		}
		break
	}
	return fmt.Sprintf("ok: %d background events", events), nil
}

// summarize is the final reply after the tool answers that end at msgs[last].
func summarize(msgs []message, last int) string {
	first := last
	for first > 0 && msgs[first-1].Role == "tool" {
		first--
	}
	names := map[string]string{}
	if first > 0 {
		for _, c := range msgs[first-1].ToolCalls {
			names[c.ID] = c.Function.Name
		}
	}
	var b strings.Builder
	b.WriteString("done:")
	for _, m := range msgs[first : last+1] {
		t := m.text()
		if len(t) > 300 {
			t = t[:300] + "…"
		}
		fmt.Fprintf(&b, " [%s] %s", names[m.ToolCallID], t)
	}
	return b.String()
}

var researchCmd = regexp.MustCompile(`^research\s+(.+?)(?:\s+in\s+(\d+)\s+steps?)?(?:\s+asking\s+(.+))?$`)

// commands turns the user's text into tool calls; nil if it holds none.
func commands(text string) []ToolCall {
	var calls []ToolCall
	for part := range strings.SplitSeq(text, ";") {
		part = strings.TrimSpace(part)
		verb, arg, _ := strings.Cut(part, " ")
		arg = strings.TrimSpace(arg)
		var name string
		var args any
		switch {
		case verb == "research" && arg != "":
			sm := researchCmd.FindStringSubmatch(part)
			steps := 3
			if sm[2] != "" {
				steps, _ = strconv.Atoi(sm[2])
			}
			var question any
			if sm[3] != "" {
				question = sm[3]
			}
			name, args = "research", map[string]any{"topic": sm[1], "steps": steps, "question": question}
		case verb == "lookup" && arg != "":
			name, args = "lookup", map[string]any{"query": arg}
		case verb == "list" && arg == "":
			name, args = "list_tasks", map[string]any{"status": nil, "type": nil, "tag": nil, "limit": nil, "cursor": nil}
		case verb == "get" && arg != "":
			name, args = "get_task", map[string]any{"task_id": arg}
		case verb == "wait" && arg != "":
			name, args = "wait_task", map[string]any{"task_id": arg, "timeout_seconds": nil}
		case verb == "cancel" && arg != "":
			name, args = "cancel_task", map[string]any{"target": map[string]any{"relation": "child", "name": arg}, "reason": "the user asked"}
		default:
			continue
		}
		raw, _ := json.Marshal(args)
		var c ToolCall
		c.Function.Name, c.Function.Arguments = name, string(raw)
		calls = append(calls, c)
	}
	return calls
}
