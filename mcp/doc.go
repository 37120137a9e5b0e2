// Package bgmcp serves bgtask over the Model Context Protocol, on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A Server exposes one owner's five model-facing tools (list_tasks,
// get_task, cancel_task, send_message, wait_task) and the host's own tools
// (AddTool). It serves two MCP revisions from one endpoint, each request
// in its own, as the SDK negotiates them:
//
//   - 2026-07-28 (ProtocolVersion), stateless: a request carries its
//     revision in its Mcp-Protocol-Version header and _meta. A tools/call
//     of a host tool that may run as a task, from a request that declared
//     the io.modelcontextprotocol/tasks extension (TasksExtension), runs as
//     a bgtask task and answers with its handle (resultType "task"); the
//     client polls tasks/get, answers the task's questions with
//     tasks/update (several may be open at once, answered in parts) and
//     cancels with tasks/cancel. Any instance sharing the Manager's store
//     answers them. A tool that needs input before it runs, or before it
//     becomes a task, asks with input-required rounds (Tool.Prepare).
//   - 2025-11-25 (LegacyProtocolVersion) and older, in sessions opened by
//     initialize: a client that asks for task execution in tools/call gets
//     a task handle at once, and tasks/get, tasks/list, tasks/result and
//     tasks/cancel are served from the Manager.
//
// Either way tasks are scoped to the caller's owner, and without a task a
// tool call runs in the foreground.
//
// Over streamable HTTP (Server.Handler) every request is authorised as its
// own caller: the host's authentication middleware puts the caller on each
// request's context, WithOwnerFunc reads it there, and a request for a
// session that another owner opened is refused (403). Idle sessions end
// (WithSessionTimeout), open sessions are capped (WithMaxSessions) and so
// are request bodies (WithMaxBodyBytes). Over stdio (Server.Run) a line
// that is not a JSON-RPC message gets an error and the session goes on.
//
// tasks/result returns what the plain call would have returned: a result
// too long for the task's record is kept whole in memory (WithResultMemory),
// and once it is not, the record's cut copy says so. While it waits, a client
// that declared the elicitation capability is asked the task's questions
// (Task.RequestInput) there, as the revision says; any client can answer
// them with the send_message tool.
//
// The package is named bgmcp so that it does not clash with the SDK's mcp
// package.
package bgmcp
