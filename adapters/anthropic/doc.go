// Package bganthropic hands bgtask's model-facing tools to the Anthropic Go
// SDK (github.com/anthropics/anthropic-sdk-go): as tool definitions for
// MessageNewParams.Tools, and as the tool_result blocks that answer the
// tool_use blocks of a Message.
//
// A tool's error that is the model's own mistake (bad arguments, an
// unknown task id, no current task to cancel) is answered as a tool_result
// with is_error set and the error's text, so the model reads it and can
// try again. Any other error (the Manager was shut down, the store failed,
// the owner id is blank, the call's ctx ended) stops the answer: it is
// returned as a Go error, for the host to end its loop, as it would for a
// failed model request.
package bganthropic
