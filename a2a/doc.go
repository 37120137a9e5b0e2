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
//     skills, url, protocol version 0.3.0, JSON-RPC, streaming).
//   - message/send and message/stream: a message without a taskId starts a
//     task; its text is the sub-agent's first inbox message (a bgtask.Message
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
// bgtask.EventTypeMessage) becomes a working status update with that
// message; any other custom event (progress) a working status update whose
// message holds a data part {"event_type": …, "payload": …}; an input request
// an input-required status update with the prompt, which ends the stream
// (the client answers with a message to the task). The end of the task ends
// the stream: the result artifact (id "result": a string result as a text
// part, an object as a data part, anything else as its JSON text) then a
// completed status update; or a failed status update with the error text, or
// a canceled one. State maps each bgtask status to its A2A state.
//
// # Owners
//
// Every call acts for the owner that WithOwnerFunc names from the request
// (its authentication), or the fixed owner of WithOwner: never for one
// named in the message. Another owner's task is "task not found", with the
// same error as an unknown id. The server reads the inbox of each owner it
// serves, so those owner ids must not also be used by a Plugin.
//
// # Sizes
//
// A client's message is capped (WithMaxParts, WithMaxMessageBytes; only text
// parts are accepted), and so are the texts the server sends (status messages
// by WithMaxMessageBytes, the result artifact by WithMaxArtifactBytes), on top
// of the Manager's own caps on results, errors, payloads and prompts.
package bga2a
