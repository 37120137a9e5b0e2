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
		`; null for the default, ` + strconv.Itoa(min(waitDefaultSeconds, maxSeconds)) + `."},` +
		`"output_since":` + waitOutputSinceSchema + `},` +
		`"required":["task_id","timeout_seconds","output_since"],"additionalProperties":false}`)
}

// waitOutputSinceSchema is the schema of wait_task's output_since.
var waitOutputSinceSchema = `{"type":["integer","null"],"description":"Also return as soon as the task writes output past this offset ` +
	`(the next_offset of your previous read), with what it wrote (at most ` + strconv.Itoa(outputReadMax) +
	` bytes, from 0 to ` + strconv.FormatInt(outputSinceMax, 10) + `); null to wait for its end only."}`

// waitResult is wait_task's result.
type waitResult struct {
	Task     toolTask    `json:"task"`
	TimedOut bool        `json:"timed_out"`
	Message  string      `json:"message,omitempty"`
	Output   *toolOutput `json:"output,omitempty"` // with output_since
	// OutputError says why output asked for is not there: it is lost.
	OutputError string `json:"output_error,omitempty"`
}

// errNewOutput ends a wait_task wait when the task wrote past output_since.
var errNewOutput = errors.New("new output")

// waitSettledOrOutput is Owner.WaitSettled that also ends, with the cause
// errNewOutput, when since is not nil and task id writes past it.
func (o owner) waitSettledOrOutput(ctx context.Context, id string, since *int64) (bgtype.TaskMeta, error) {
	if since == nil {
		return o.WaitSettled(ctx, id)
	}
	sctx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if o.WaitOutput(sctx, id, *since) == nil {
			stop(errNewOutput)
		}
	}()
	defer func() { stop(nil); <-done }()
	meta, err := o.WaitSettled(sctx, id)
	if err != nil && errors.Is(context.Cause(sctx), errNewOutput) && ctx.Err() == nil {
		// Read where the output is kept (another instance of a fleet
		// keeps the output of the tasks it runs).
		if out, err := o.ReadOutput(ctx, id, *since, 0); err == nil && out.Size > *since {
			return meta, errNewOutput
		}
		// No new output to wait for (a task that ended, or one another
		// process runs that cannot carry reads): its end only.
		return o.WaitSettled(ctx, id)
	}
	return meta, err
}

func (o owner) waitTaskTool(cfg toolConfig) Tool {
	return Tool{
		Name: "wait_task",
		Description: "Wait until one of your background tasks ends or asks for input (awaiting_input), " +
			"at most timeout_seconds, and return it; with output_since, also until it writes new output, which it returns. " +
			"Use it only when you have nothing else to do: finished tasks are reported to you anyway.",
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
			meta, err := o.waitSettledOrOutput(wctx, args.TaskID, args.OutputSince)
			if _, failed := errors.AsType[*bgtask.TaskError](err); failed {
				err = nil // a failed task's record is the answer, as a completed one's is
			}
			result := func(r waitResult) (json.RawMessage, error) {
				out, lost, err := o.readOutput(ctx, args.TaskID, args.OutputSince, nil)
				if err != nil {
					return nil, err
				}
				r.Output, r.OutputError = out, lost
				if out != nil { // read where it is kept: another instance may run the task
					r.Task.OutputBytes = out.TotalBytes
				}
				return toolJSON(r)
			}
			switch {
			case err == nil:
				o.MarkAnswered(ctx, &meta) // the result is its end: not announced again
				return result(waitResult{Task: o.fullView(meta)})
			case errors.Is(err, bgtask.ErrNotLive):
				return result(waitResult{Task: o.fullView(meta),
					Message: fmt.Sprintf("task %s is %s but not run by this process: wait_task cannot wait for it", meta.ID, meta.Status)})
			case errors.Is(err, errNewOutput), ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
				newOutput := errors.Is(err, errNewOutput)
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
					return result(waitResult{Task: o.fullView(meta)})
				}
				if newOutput {
					return result(waitResult{Task: o.fullView(meta), Message: fmt.Sprintf("task %s wrote new output", meta.ID)})
				}
				return result(waitResult{Task: o.fullView(meta), TimedOut: true,
					Message: fmt.Sprintf("task %s still %s after %ds", meta.ID, meta.Status, args.TimeoutSeconds)})
			}
			return nil, notFoundAs(err, args.TaskID)
		},
	}
}
