package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// taskNotFound is the execution error of get_task and wait_task for an id
// the owner does not have: "task not found: <id>", matching ErrNotFound.
type taskNotFound struct{ id string }

func (e *taskNotFound) Error() string { return "task not found: " + e.id }
func (e *taskNotFound) Unwrap() error { return ErrNotFound }

// notFoundAs turns the owner view's ErrNotFound into the tools' text.
func notFoundAs(err error, id string) error {
	if errors.Is(err, ErrNotFound) {
		return &taskNotFound{id: id}
	}
	return err
}

var listTasksSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"status":{"type":"string","enum":["` + strings.ReplaceAll(statusNames(), ", ", `","`) + `"],"description":"Only tasks with this status."},` +
	`"type":{"type":"string","description":"Only tasks of this type, such as \"sub_agent\" or \"task\"."}},` +
	`"additionalProperties":false}`)

func (o Owner) listTasksTool() Tool {
	return Tool{
		Name: "list_tasks",
		Description: "List your background tasks (sub-agents, long tool calls) oldest first, with their status and latest progress. " +
			"Filter by status or type. Use get_task for a task's result, error and messages.",
		Schema: listTasksSchema,
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeListArgs(raw)
			if err != nil {
				return nil, err
			}
			var statuses []TaskStatus
			if args.Status != "" {
				statuses = append(statuses, args.Status)
			}
			seq, err := o.List(ctx, statuses...)
			if err != nil {
				return nil, err
			}
			tasks := []toolTask{}
			for meta := range seq {
				if args.Type == "" || meta.Type == args.Type {
					tasks = append(tasks, o.withProgress(listView(meta)))
				}
			}
			return toolJSON(struct {
				Tasks []toolTask `json:"tasks"`
				Count int        `json:"count"`
			}{tasks, len(tasks)})
		},
	}
}

var getTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task_id":{"type":"string","description":"The task's id (task_...)."}},` +
	`"required":["task_id"],"additionalProperties":false}`)

func (o Owner) getTaskTool() Tool {
	return Tool{
		Name: "get_task",
		Description: "Get one of your background tasks: its status, its latest progress while it runs, its result when completed, " +
			"its error when failed, the question it asks when awaiting_input, and the last messages sent to it or by it.",
		Schema: getTaskSchema,
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeGetArgs(raw)
			if err != nil {
				return nil, err
			}
			meta, err := o.Get(ctx, args.TaskID)
			if err != nil {
				return nil, notFoundAs(err, args.TaskID)
			}
			return toolJSON(struct {
				Task     toolTask        `json:"task"`
				Messages []MessageRecord `json:"messages"`
			}{o.withProgress(fullView(meta)), o.m.msgs.list(meta.ID)})
		},
	}
}
