// Package bga2a serves a bgtask sub-agent as an A2A agent (the Agent2Agent
// protocol, version 0.3, over JSON-RPC and server-sent events), built on the
// A2A Go SDK, github.com/a2aproject/a2a-go.
//
// Each A2A task is one run of the host's agent function, spawned with
// Owner.SpawnAgent for the owner the HTTP request authenticates as:
//
//	m, _ := bgtask.New()
//	srv, _ := bga2a.New(m, researcher, bga2a.Card{Name: "researcher", Description: "…"},
//		bga2a.WithOwnerFunc(ownerFromToken))
//	defer srv.Close()
//	http.ListenAndServe(addr, srv.Handler())
//
// # What is served
//
//   - GET /.well-known/agent-card.json: the agent card (name, description,
//     skills, url, protocol version 0.3.0, JSON-RPC, streaming, and the
//     security schemes of WithSecurityScheme).
//   - message/send and message/stream: a message without a taskId starts a
//     task; its text is the sub-agent's first inbox message (a bgtype.Message
//     from "user", read with Task.Inbox). A message whose taskId names a live
//     task of the same owner continues it: it answers the task's open input
//     request (Task.RequestInput) if it has one, and otherwise goes to the
//     sub-agent's inbox (Owner.Send). message/send blocks until the task ends
//     or asks for input, unless the client asks for a non-blocking call.
//   - tasks/get: the task, with its recent messages as history and, once
//     completed, its result artifact.
//   - tasks/cancel: cancels the task and its attached descendants (the
//     sub-agent's own tasks), and returns it canceled.
//   - tasks/resubscribe: the task, then its events, like message/stream.
//
// Push notifications and the authenticated extended card are not served.
//
// # Streams
//
// A stream starts with the task, then sends the task's events in order:
// a message the sub-agent sends its owner (Task.Emit of
// bgtype.EventTypeMessage) becomes a working status update with that
// message; any other custom event (progress) a working status update whose
// message holds a data part {"event_type": …, "payload": …}; an input request
// an input-required status update with the prompt, which ends the stream
// (the client answers with a message to the task). The end of the task ends
// the stream: the result artifact (id "result": a string result as a text
// part, an object as a data part, anything else as its JSON text) then a
// completed status update; or a failed status update with the error text, or
// a canceled one. State maps each bgtask status to its A2A state.
//
// # Owners and authentication
//
// Every call acts for the owner that WithOwnerFunc names from the request
// (its authentication), or the fixed owner of WithOwner: never for one
// named in the message. Another owner's task is "task not found", with the
// same error as an unknown id. The server reads the inbox of each owner it
// serves, so those owner ids must not also be used by a Plugin.
//
// The server checks no credential itself: the host verifies it, in its own
// middleware in front of Handler or in the owner function, and the owner
// function names the owner from it; a request it refuses gets HTTP 401
// before anything is read, with a WWW-Authenticate challenge for each
// declared scheme (a Bearer one when none is). WithSecurityScheme declares the scheme the host
// enforces in the agent card (securitySchemes and security), so a client
// knows what credential to send; the card itself is public.
//
// A client's messageId is the id of its message in the task's history.
// Message ids are not checked for uniqueness: the same id from two owners,
// or twice from one, is two messages.
//
// # Sizes
//
// A request body is capped (WithMaxRequestBytes, 1 MiB: a longer one is an
// invalid-request error, -32600, and nothing is done); malformed JSON,
// or JSON nested deeper than encoding/json reads, is a parse error
// (-32700). A client's message is capped (WithMaxParts, WithMaxMessageBytes;
// only text parts are accepted), and so are the texts the server sends
// (status messages by WithMaxMessageBytes).
//
// The result artifact carries the whole result the agent function returned,
// up to WithMaxArtifactBytes (4 MiB of JSON), even when the Manager's
// record keeps only a cut copy of it (Caps.MaxResultBytes, 64 KiB by
// default): the server keeps such results in memory, up to
// WithMaxKeptResultBytes (64 MiB) in all, the oldest forgotten first. A
// result the artifact does not carry whole (over the artifact cap, or
// forgotten, or of a task that ended before a restart, when only the
// record's cut copy exists) is cut visibly: a text part with its start,
// ending with "…[truncated: N bytes total]", and the artifact's metadata
// {"truncated": true, "original_bytes": N}, N being the size of the whole
// result as JSON.
package bga2a
