// Package bgeino hands bgtask's model-facing tools to CloudWeGo's Eino
// (github.com/cloudwego/eino) as tool.InvokableTool values, for a
// compose.ToolsNode, a ReAct agent or any graph that runs Eino tools.
//
// A ToolsNode runs the calls of one message in parallel, and gives each
// call's ctx the call's id: a task a call spawns records it as
// Parent.CallID, with the run of the bgtask.ToolCall on the graph's ctx.
//
// A tool's error that is the model's own mistake (see IsModelMistake: bad
// arguments, an unknown task id, a task name already taken, a limit
// reached, or an error a host tool marks with ModelError) is the tool's
// result: its text becomes the tool message the model reads next, and the
// node goes on. Any other error (the Manager was shut down, the store
// failed, the owner id is blank, the call's ctx ended) is returned as
// InvokableRun's error, which ends the ToolsNode and the graph's run with
// it, as Eino does for any tool that cannot run. So does, by default, a
// call of a tool the node does not hold (a name the model made up): give
// the node UnknownTools' handler to answer it instead.
package bgeino
