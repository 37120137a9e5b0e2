package agentloop

import (
	"context"
	"encoding/json"
)

// Message is one entry of a conversation.
type Message struct {
	Role       string     `json:"role"` // "system", "user", "assistant" or "tool"
	Content    string     `json:"content,omitempty"`
	From       string     `json:"from,omitempty"`     // a direct message's sender
	Internal   bool       `json:"internal,omitempty"` // not written by the user (background events)
	Calls      []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // a "tool" message answers this call
}

// ToolCall is a call the model asks for.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"parameters"`
}

// Request is what the model is given at each step: the conversation, plus
// context for this inference only (the prompt view), and the tools.
type Request struct {
	Messages []Message
	Tools    []ToolSpec
}

// Response is the model's answer: tool calls to run, or, with none, the
// final text of the run.
type Response struct {
	Text  string
	Calls []ToolCall
}

// Model is the language model. Next must return when ctx ends.
type Model interface {
	Next(ctx context.Context, req Request) (Response, error)
}
