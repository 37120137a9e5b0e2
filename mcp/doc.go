// Package bgmcp serves bgtask over the Model Context Protocol, on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A Server exposes one owner's five model-facing tools (list_tasks,
// get_task, cancel_task, send_message, wait_task) and the host's own tools
// (AddTool). A client that asks for task execution in tools/call (the
// tasks protocol of MCP revision 2025-11-25) gets a task handle at once:
// the call runs as a bgtask task, and tasks/get, tasks/list, tasks/result
// and tasks/cancel are served from the Manager, scoped to the caller's
// owner. Without that request a tool call runs in the foreground.
//
// The package is named bgmcp so that it does not clash with the SDK's mcp
// package.
package bgmcp
