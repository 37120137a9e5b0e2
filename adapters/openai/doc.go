// Package bgopenai hands bgtask's model-facing tools to the OpenAI Go SDK
// (github.com/openai/openai-go/v3): as function tools for Chat Completions
// and for Responses, and as the answers to the tool calls of a model's
// reply.
//
// A host builds a Toolset once from Owner.Tools, puts ChatTools (or
// ResponseTools) in each request, and after each reply appends what
// AnswerChat (or AnswerResponse) returns before calling the model again.
//
// A tool's error that is the model's own mistake (bad arguments, an
// unknown task id, no current task to cancel) is answered as the tool's
// result, so the model reads it and can try again. Any other error (the
// Manager was shut down, the store failed, the owner id is blank, the
// call's ctx ended) stops the answer: it is returned as a Go error, for
// the host to end its loop, as it would for a failed model request.
package bgopenai
