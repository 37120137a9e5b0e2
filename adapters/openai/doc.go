// Package bgopenai hands bgtask's model-facing tools to the OpenAI Go SDK
// (github.com/openai/openai-go/v3): as function tools for Chat Completions
// and for Responses, as the answers to the tool calls of a model's reply,
// and as the messages that show the model what the Plugin delivers.
//
// A host builds a Toolset once from agent.Tools (and tools of its own),
// puts ChatTools (or ResponseTools) in each request, and after each reply
// appends what AnswerChat (or AnswerResponse) returns, then the Plugin's
// messages converted by ChatPrompt (or ResponsePrompt), before calling the
// model again. The Anthropic adapter (bganthropic) has the same shape:
// MessageTools, AnswerMessage, MessagePrompt, and the same options.
//
// # Calls
//
// Each call runs with its own bgtask.ToolCall on its ctx: the run id (of
// WithRunID, or of the bgtask.ToolCall on the ctx given to the Answer
// method), the agent id, and the provider's call id, so a task a call
// spawns records the call in its Parent. The calls of one reply run one
// after the other, unless WithParallel lets several run at once; the
// answers keep the calls' order either way.
//
// # Errors
//
// Every call of a reply gets an answer, so the next request never has a
// tool call with no answer (the API refuses that). A call of a tool the
// Toolset does not hold (a name the model made up) is answered
// `unknown tool "x": the tools are …`. A tool's error that is
// the model's own mistake (see IsModelMistake: bad arguments, an unknown
// task id, a task name already taken, a limit reached, or an error a host
// tool marks with ModelError) is answered with the error's text, so the
// model reads it and can try again. Any other error (the Manager was shut
// down, the store failed, the owner id is blank, the call's ctx ended) is
// the host's: the call is answered with a fixed text that says it failed
// (nothing of the error reaches the model), the calls not started yet are
// answered that they did not run, and the error is returned as a Go error
// beside the answers, for the host to end its turn, as it would for a
// failed model request (or to send the answers and go on).
package bgopenai
