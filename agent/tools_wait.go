package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

func waitTaskSchema(maxSeconds int) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"task_id":` + textSchema(argTextMax, false, "The task's id (task_...).") + `,` +
		`"timeout_seconds":{"type":["integer","null"],"description":"How long to wait at most, in seconds, from 1 to ` + strconv.Itoa(maxSeconds) +
		`; null for the default, ` + strconv.Itoa(min(waitDefaultSeconds, maxSeconds)) + `."}},` +
		`"required":["task_id","timeout_seconds"],"additionalProperties":false}`)
}

// waitResult is wait_task's result.
type waitResult struct {
	Task     toolTask `json:"task"`
	TimedOut bool     `json:"timed_out"`
	Message  string   `json:"message,omitempty"`
}

func (o owner) waitTaskTool(cfg toolConfig) Tool {
	return Tool{
		Name: "wait_task",
		Description: "Wait until one of your background tasks ends or asks for input (awaiting_input), " +
			"at most timeout_seconds, and return it. Use it only when you have nothing else to do: " +
			"finished tasks are reported to you anyway.",
		Schema: waitTaskSchema(cfg.waitMax),
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeWaitArgs(raw, cfg.waitMax)
			if err != nil {
				return nil, err
			}
			if !bgtype.ValidOwner(o.ID()) {
				return nil, bgtype.ErrInvalidOwner
			}
			d := time.Duration(args.TimeoutSeconds) * time.Second
			wctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			meta, err := o.WaitSettled(wctx, args.TaskID)
			if _, failed := errors.AsType[*bgtask.TaskError](err); failed {
				err = nil // a failed task's record is the answer, as a completed one's is
			}
			switch {
			case err == nil:
				o.MarkAnswered(ctx, &meta) // the result is its end: not announced again
				return toolJSON(waitResult{Task: fullView(meta)})
			case errors.Is(err, bgtask.ErrNotLive):
				return toolJSON(waitResult{Task: fullView(meta),
					Message: fmt.Sprintf("task %s is %s but not run by this process: wait_task cannot wait for it", meta.ID, meta.Status)})
			case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
				meta, err := o.Get(ctx, args.TaskID)
				if err != nil {
					return nil, notFoundAs(err, args.TaskID)
				}
				if meta.Status.IsTerminal() || meta.Status == bgtype.StatusAwaitingInput { // settled just now
					if meta.Status.IsTerminal() {
						// Its end is committed; wait for its event, which follows at once, to take it back.
						if ended, err := o.Wait(context.WithoutCancel(ctx), meta.ID); err == nil || ended.Status.IsTerminal() {
							meta = ended // a failed one comes with its *TaskError
						}
						o.MarkAnswered(ctx, &meta)
					}
					return toolJSON(waitResult{Task: fullView(meta)})
				}
				return toolJSON(waitResult{Task: fullView(meta), TimedOut: true,
					Message: fmt.Sprintf("task %s still %s after %ds", meta.ID, meta.Status, args.TimeoutSeconds)})
			}
			return nil, notFoundAs(err, args.TaskID)
		},
	}
}
