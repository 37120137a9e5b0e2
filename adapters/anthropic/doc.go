// Package bganthropic hands bgtask's model-facing tools to the Anthropic Go
// SDK (github.com/anthropics/anthropic-sdk-go): as tool definitions for
// MessageNewParams.Tools, as the tool_result blocks that answer the
// tool_use blocks of a Message, and as the system and user blocks that
// show the model what the Plugin delivers.
//
// A host builds a Toolset once from agent.Tools (and tools of its own),
// puts MessageTools in each request, and after each reply appends
// msg.ToParam(), then, with AppendUserTurn, what AnswerMessage returns and
// the user blocks of MessagePrompt in one user message (its system blocks
// go to MessageNewParams.System), before calling the model again. The
// OpenAI adapter (bgopenai) has the same shape: ChatTools, AnswerChat,
// ChatPrompt (and the Responses API's), and the same options.
//
// # Calls
//
// Each call runs with its own bgtask.ToolCall on its ctx: the run id (of
// WithRunID, or of the bgtask.ToolCall on the ctx given to
// AnswerMessage), the agent id, and the tool_use block's id, so a task a
// call spawns records the call in its Parent. The calls of one message
// run one after the other, unless WithParallel lets several run at once;
// the tool_result blocks keep the calls' order either way.
//
// # Errors
//
// Every tool_use block gets a tool_result, so the next request never has
// a tool_use with no result (the API refuses that). A tool_use of a tool
// the Toolset does not hold (a name the model made up) is answered with
// is_error and `unknown tool "x": the tools are …`. A tool's error that is
// the model's own mistake (see IsModelMistake: bad arguments, an unknown
// task id, a task name already taken, a limit reached, or an error a host
// tool marks with ModelError) is answered with is_error set and the
// error's text, so the model reads it and can try again. Any other error
// (the Manager was shut down, the store failed, the owner id is blank, the
// call's ctx ended) is the host's: the block is answered with is_error and
// a fixed text that says the call failed (nothing of the error reaches the
// model), the calls not started yet are answered that they did not run,
// and the error is returned as a Go error beside the blocks, for the host
// to end its turn, as it would for a failed model request (or to send the
// blocks and go on).
package bganthropic
