// Package agentloop is a small, readable agent loop that shows bgtask's
// semantics end to end: a Model proposes tool calls or an answer, tools
// run with the call's lineage on their context (so the tasks they spawn
// link to the run and the call), background events reach the model at
// step boundaries through an agent.Plugin, and a run ends in one of the
// ways the reference systems define:
//
//   - "done"/"natural": the model answered and nothing is pending;
//   - "waiting"/"awaiting_tasks": a top-level run answered while tasks were
//     still running; a later run (or the plugin's OnWake callback) picks up
//     their events;
//   - a sub-agent run (Config.SubAgent) instead waits on its inbox and goes
//     on when its tasks report, so its parent gets one final answer;
//   - "waiting"/"suspended": a tool asked for a human decision
//     (ErrSuspend) and no Decisions channel was given; with one, the run
//     buffers background events without calling the model until the
//     decision arrives;
//   - "done"/"cancelled": ctx was cancelled. When the user stopped the run
//     (the cause is bgtask.ErrRunStopped) its tasks and their descendants
//     are cancelled with it; when the context ended for another reason (a
//     server's request whose client hung up) they go on, and their ends
//     reach the owner's next run.
//
// A tool that cannot know whether its work is fast runs it with bgtask's
// Owner.Foreground: the result comes back as the tool result when it is
// quick; otherwise the call is promoted to a background task and reported
// like one (see the Run example "foreground").
//
// ScriptedModel plays a fixed script, for tests and demos without a network.
package agentloop
