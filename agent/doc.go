// Package agent is bgtask's model layer: what an agent's model sees of its
// background tasks, and the tools it acts on them with. It is built on the
// runtime (package bgtask) and only on its public API; the runtime knows
// nothing of it.
//
// A [Plugin] connects one owner's tasks (a thread's, or a sub-agent's) to
// an agent loop's phases. It takes the owner's events from a
// [bgtask.Receiver] and renders them as [PromptMessage] values: each event
// in an envelope that carries the Plugin's random nonce, with every text a
// task wrote escaped and cut (see [Config]), never in the system role; and,
// before each inference, a bounded view of the owner's running tasks.
// [Tools] are the model-facing tools, independent of any agent framework
// (list_tasks, get_task, cancel_task, send_message, wait_task); a host
// wraps each [Tool] in its framework's tool type (the adapters/* modules do
// it for OpenAI, Anthropic, Eino and LangChainGo). [ToolOutput] makes a
// host's own tool result as safe to show as the Plugin's. [Background]
// wraps a host's own tool so that the model may run it in the background
// per call (run_in_background), its output read with get_task from an
// offset.
//
// A server with many threads keeps them in a [Threads]: one live Plugin per
// thread (the Manager allows no second), made before the thread is
// visible and made again only once the closed one's Close returned; the
// host's value per thread; turns of a thread one at a time
// ([Thread.Turn]); the least recently used idle thread closed at the cap,
// and any thread idle too long.
//
// A host's loop, one run per user turn (package agentloop is a complete
// one):
//
//	m, _ := bgtask.New()
//	p, err := agent.NewPlugin(m, "thread-1", agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: wakeThread}})
//	tools := agent.Tools(p.Owner(), agent.WithOnSelfCancel(stopTurn))
//	...
//	// The turn's context: the request's values, not its cancellation (a client
//	// that hangs up fails no spawn); stop(bgtask.ErrRunStopped) on the user's stop.
//	ctx, stop := context.WithCancelCause(context.WithoutCancel(r.Context()))
//	err = p.RunStart(ctx, bgtask.RunInfo{RunID: turnID})
//	for {
//		msgs, err := p.BeforeInference(ctx) // events and the task view, for this inference
//		reply := callModel(ctx, history, msgs, tools)
//		for _, call := range reply.ToolCalls {
//			runTool(bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: turnID, CallID: call.ID}), call)
//			_ = p.AfterToolCall(ctx, bgtask.ToolCall{RunID: turnID, CallID: call.ID})
//		}
//		if len(reply.ToolCalls) == 0 {
//			break // a natural end; p.StepEnd says whether tasks will still report
//		}
//	}
//	err = p.RunEnd(ctx, bgtask.RunOutcome{RunID: turnID, Canceled: bgtask.RunStopped(ctx)})
//
// The errors of a Plugin's phases are the Receiver's: bgtask.ErrNoRun,
// bgtask.ErrRunOpen, bgtask.ErrReceiverExists, bgtask.ErrClosed, matched
// with errors.Is. A tool's bad argument matches [ErrToolArguments];
// [IsModelMistake] tells the errors a model should see and correct from
// those a host handles.
package agent
