package bglangchain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
	bglangchain "github.com/bgtask/bgtask/adapters/langchaingo"
	"github.com/bgtask/bgtask/agent"
)

// Each tool takes its JSON arguments as its one string input; a bad
// argument is answered with the error's text, for the model to correct.
func Example() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	id, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }, bgtask.WithName("fetch"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}

	tools := bglangchain.Tools(agent.Tools(owner)) // for agents.NewOneShotAgent(llm, tools)
	getTask, listTasks := tools[1], tools[0]
	out, err := getTask.Call(ctx, `{"task_id":"`+id+`"}`)
	if err != nil {
		log.Fatal(err)
	}
	var got struct {
		Task struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		log.Fatal(err)
	}
	fmt.Println(getTask.Name(), got.Task.Name, got.Task.Status)

	out, err = listTasks.Call(ctx, `{"state":"done"}`)
	fmt.Println(listTasks.Name(), out, err)
	// Output:
	// get_task fetch completed
	// list_tasks invalid arguments: unknown field "state" <nil>
}
