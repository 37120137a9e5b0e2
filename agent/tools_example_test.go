package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// tool returns the owner's tool called name.
func tool(o bgtask.Owner, name string) agent.Tool {
	for _, t := range agent.Tools(o) {
		if t.Name == name {
			return t
		}
	}
	panic("no tool " + name)
}

// call calls a tool with args and decodes its result into out.
func call(ctx context.Context, t agent.Tool, args string, out any) {
	res, err := t.Call(ctx, json.RawMessage(args))
	if err != nil {
		log.Fatal(err)
	}
	if err := json.Unmarshal(res, out); err != nil {
		log.Fatal(err)
	}
}

// The tools are plain values a host wraps for its agent framework. A bad
// argument is an error matching ErrToolArguments, with an exact text.
func ExampleTools_listTasks() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	var names []string
	for _, t := range agent.Tools(owner) {
		names = append(names, t.Name)
	}
	fmt.Println(strings.Join(names, " "))

	id, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil },
		bgtask.WithName("fetch"), bgtask.WithDescription("fetch the feed"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}
	var list struct {
		Tasks []struct{ Name, Status, Description string }
		Total int
	}
	call(ctx, tool(owner, "list_tasks"), `{"status":["completed"]}`, &list)
	for _, t := range list.Tasks {
		fmt.Println(t.Name, t.Status, t.Description)
	}
	fmt.Println("total", list.Total)

	_, err = tool(owner, "list_tasks").Call(ctx, json.RawMessage(`{"state":"completed"}`))
	fmt.Println(err, errors.Is(err, agent.ErrToolArguments))
	// Output:
	// list_tasks get_task cancel_task send_message wait_task
	// fetch completed fetch the feed
	// total 1
	// invalid arguments: unknown field "state" true
}

// list_tasks returns a page at a time: total counts every task that
// matches, and next_cursor, passed back as cursor, gets the next page.
func ExampleTools_listTasksPages() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	for _, name := range []string{"fetch-a", "fetch-b", "fetch-c"} {
		id, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }, bgtask.WithName(name))
		if err != nil {
			log.Fatal(err)
		}
		if _, err := owner.Wait(ctx, id); err != nil {
			log.Fatal(err)
		}
	}
	args := map[string]any{"status": []string{"completed"}, "limit": 2}
	for {
		var page struct {
			Tasks      []struct{ Name string }
			Total      int
			NextCursor string `json:"next_cursor"`
		}
		b, _ := json.Marshal(args)
		call(ctx, tool(owner, "list_tasks"), string(b), &page)
		fmt.Println(len(page.Tasks), "of", page.Total, page.Tasks, page.NextCursor != "")
		if page.NextCursor == "" {
			break
		}
		args["cursor"] = page.NextCursor
	}
	// Output:
	// 2 of 3 [{fetch-a} {fetch-b}] true
	// 1 of 3 [{fetch-c}] false
}

// get_task shows a task's result, or its error, and its recent messages.
func ExampleTools_getTask() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	ok, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return map[string]int{"rows": 42}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	bad, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return nil, errors.New("feed unreachable")
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{ok, bad} {
		// A failed task's Wait returns its *bgtask.TaskError.
		if _, err := owner.Wait(ctx, id); err != nil {
			if _, failed := errors.AsType[*bgtask.TaskError](err); !failed {
				log.Fatal(err)
			}
		}
		var got struct {
			Task struct {
				Status string
				Result json.RawMessage
				Error  string
			}
			Messages []bgtask.MessageRecord
		}
		call(ctx, tool(owner, "get_task"), `{"task_id":"`+id+`"}`, &got)
		fmt.Println(got.Task.Status, string(got.Task.Result), got.Task.Error, len(got.Messages))
	}
	_, err = tool(owner, "get_task").Call(ctx, json.RawMessage(`{"task_id":"task_unknown"}`))
	fmt.Println(err)
	// Output:
	// completed {"rows":42}  0
	// failed  feed unreachable 0
	// task not found: task_unknown
}

// cancel_task cancels a child of the current run (or task) by name, with
// its descendants; "self" cancels the current run (here it has no live task
// left, and the receipt says so).
func ExampleTools_cancelTask() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	// The agent loop puts each tool call's lineage on its ctx.
	callCtx := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: "call-1", AgentID: "planner"})
	started := make(chan struct{})
	id, err := owner.Spawn(callCtx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}, bgtask.WithName("crawler"))
	if err != nil {
		log.Fatal(err)
	}
	<-started

	runCtx, cancelRun := context.WithCancel(callCtx)
	tools := agent.Tools(owner, agent.WithOnSelfCancel(func(context.Context) { cancelRun() }))
	cancelTool := tools[2]
	var receipt struct {
		Status        string
		RootTaskID    string `json:"root_task_id"`
		CanceledCount int    `json:"cancelled_count"`
		Error         string
	}
	call(runCtx, cancelTool, `{"target":{"relation":"child","name":"crawler"}}`, &receipt)
	fmt.Println(receipt.Status, receipt.RootTaskID == id, receipt.CanceledCount)
	meta, _ := owner.Wait(ctx, id)
	fmt.Println(meta.Status)

	call(runCtx, cancelTool, `{"target":{"relation":"child","name":"crawler"}}`, &receipt)
	fmt.Println(receipt.Status, receipt.Error)

	call(runCtx, cancelTool, `{"target":{"relation":"self"}}`, &receipt)
	fmt.Println(receipt.Status, receipt.RootTaskID, receipt.CanceledCount, runCtx.Err())
	// Output:
	// accepted true 1
	// cancelled
	// failed task_not_running
	// nothing_to_cancel run-1 0 context canceled
}

// send_message talks to a running sub-agent; from inside a task, "parent"
// reaches the agent that started it.
func ExampleTools_sendMessage() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	id, err := owner.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		if err := t.Inbox().Wait(ctx); err != nil {
			return nil, err
		}
		msg, _ := t.Inbox().Drain()[0].Message()
		// The sub-agent's own loop uses its own tools, with its own ctx.
		reply := fmt.Sprintf(`{"to":{"relation":"parent"},"message":%q}`, "on it: "+msg.Content)
		own, err := t.Agent()
		if err != nil {
			return nil, err
		}
		if _, err := agent.Tools(own)[3].Call(ctx, json.RawMessage(reply)); err != nil {
			return nil, err
		}
		return "done", nil
	}, bgtask.WithName("researcher"))
	if err != nil {
		log.Fatal(err)
	}
	var receipt struct {
		Status    string
		MessageID string `json:"message_id"`
	}
	callCtx := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", AgentID: "planner"})
	call(callCtx, tool(owner, "send_message"), `{"to":{"relation":"child","name":"researcher"},"message":"compare Go and Rust"}`, &receipt)
	fmt.Println(receipt.Status, strings.HasPrefix(receipt.MessageID, "msg_"))

	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}
	ib, _ := owner.Inbox()
	for _, ev := range ib.Drain() {
		if msg, ok := ev.Message(); ok {
			fmt.Println("message:", msg.Content)
		} else {
			fmt.Println(ev.Kind)
		}
	}
	msgs, _ := owner.Messages(ctx, id)
	for _, r := range msgs {
		fmt.Println(r.Direction, r.From == id, r.Content)
	}
	// Output:
	// delivered true
	// message: on it: compare Go and Rust
	// completed
	// in false compare Go and Rust
	// out true on it: compare Go and Rust
}

// wait_task returns when a task ends or asks for input; send_message with
// in_reply_to answers the request.
func ExampleTools_waitTask() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	id, err := owner.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		answer, err := t.RequestInput(ctx, "Deploy to production?")
		if err != nil {
			return nil, err
		}
		return "deployed: " + answer.Content, nil
	}, bgtask.WithName("deployer"))
	if err != nil {
		log.Fatal(err)
	}
	var waited struct {
		Task struct {
			Status       string
			Result       json.RawMessage
			InputRequest *bgtype.InputRequest `json:"input_request"`
		}
		TimedOut bool `json:"timed_out"`
	}
	call(ctx, tool(owner, "wait_task"), `{"task_id":"`+id+`","timeout_seconds":60}`, &waited)
	fmt.Println(waited.Task.Status, waited.Task.InputRequest.Prompt, waited.TimedOut)

	answer := fmt.Sprintf(`{"to":{"relation":"child","name":"deployer"},"message":"yes","in_reply_to":%q}`, waited.Task.InputRequest.ID)
	var receipt struct{ Status string }
	call(ctx, tool(owner, "send_message"), answer, &receipt)
	fmt.Println(receipt.Status)

	waited.Task.InputRequest = nil
	call(ctx, tool(owner, "wait_task"), `{"task_id":"`+id+`"}`, &waited)
	fmt.Println(waited.Task.Status, string(waited.Task.Result), waited.TimedOut)
	// Output:
	// awaiting_input Deploy to production? false
	// delivered
	// completed "deployed: yes" false
}

// The same tools declared to Gemini: GeminiParameters gives each schema in
// the form a function declaration's "parameters" takes.
func ExampleTool_GeminiParameters() {
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	for _, t := range agent.Tools(m.Owner("thread-1")) {
		params, err := t.GeminiParameters()
		if err != nil {
			log.Fatal(err)
		}
		var p struct {
			Type     string   `json:"type"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			log.Fatal(err)
		}
		fmt.Println(t.Name, p.Type, p.Required)
	}
	// Output:
	// list_tasks OBJECT [status type tag limit cursor]
	// get_task OBJECT [task_id output_since output_tail]
	// cancel_task OBJECT [target reason]
	// send_message OBJECT [to message in_reply_to]
	// wait_task OBJECT [task_id timeout_seconds output_since]
}
