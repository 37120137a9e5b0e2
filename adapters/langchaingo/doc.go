// Package bglangchain hands bgtask's model-facing tools to LangChainGo
// (github.com/tmc/langchaingo) as tools.Tool values, for an agents
// Executor or any chain that calls tools with one string.
//
// A LangChainGo tool takes one string: here it is the JSON object of the
// tool's arguments, and each tool's description ends with the JSON Schema
// that object must follow, so the model knows what to write.
//
// A tool's error that is the model's own mistake (see IsModelMistake: bad
// arguments, an unknown task id, a task name already taken, a limit
// reached, or an error a host tool marks with ModelError) is the tool's
// result: its text is the observation the model reads next, and the
// agent goes on. Any other error (the Manager was shut down, the store failed, the owner
// id is blank, the call's ctx ended) is returned as Call's error, which
// ends the Executor's run, as LangChainGo does for any tool that fails.
package bglangchain
