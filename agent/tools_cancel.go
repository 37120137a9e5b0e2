package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// ErrNoCurrentTask is returned by cancel_task when the call's ctx carries
// neither a current task nor a current run (see Tools). Its text is
// the code the model sees.
var ErrNoCurrentTask = errors.New("current_task_unavailable")

// liveStatuses are the statuses of a task that has not ended.
var liveStatuses = []bgtype.Status{bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput}

// cancelTaskSchema: "name" is required with relation "child" and refused
// with "self"; the decoder says so (strict mode has no oneOf).
var cancelTaskSchema = json.RawMessage(`{"type":"object","properties":{"target":{"type":"object","properties":{` +
	`"relation":{"type":"string","enum":["self","child"],"description":"self: the current task or run; child: the task given in name."},` +
	`"name":` + textSchema(argTextMax, true, `With relation "child": the name or the task_id of any of your tasks; null with "self".`) + `},` +
	`"required":["relation","name"],"additionalProperties":false},` +
	`"reason":` + textSchema(argReasonMax, true, `Why you cancel, kept on each cancelled task and shown with it; null for no reason.`) + `},` +
	`"required":["target","reason"],"additionalProperties":false}`)

// argReasonMax caps cancel_task's reason, in characters.
const argReasonMax = 512

// cancel_task's receipt statuses.
const (
	cancelAccepted        = "accepted"          // it signalled cancelled_count tasks (a child winding down: 0)
	cancelAlreadyCanceled = "already_cancelled" // self: the task or run had been cancelled before; count 0
	cancelNothing         = "nothing_to_cancel" // self: nothing live to signal; count 0
	cancelFailed          = "failed"            // child: see Error
)

// cancelReceipt is cancel_task's result. CanceledCount is the number of
// tasks the call itself signalled (a task run by another instance counts
// once its cancel request is recorded), never a run or a task signalled
// before.
type cancelReceipt struct {
	Status        string `json:"status"`
	RootTaskID    string `json:"root_task_id"`
	CanceledCount int    `json:"cancelled_count"`
	Error         string `json:"error,omitempty"`   // "task_not_found", "task_not_running", "task_name_ambiguous"
	Message       string `json:"message,omitempty"` // task_name_ambiguous: the tasks of that name
}

func (o owner) cancelTaskTool(cfg toolConfig) Tool {
	return Tool{
		Name: "cancel_task",
		Description: "Cancel the current background task or run (relation \"self\"), or a task (relation \"child\": " +
			"the name or the task_id of any of your tasks as list_tasks shows them, whichever run started it). " +
			"Descendant tasks are cancelled together.",
		Schema: cancelTaskSchema,
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeCancelArgs(raw)
			if err != nil {
				return nil, err
			}
			if o.Closed() {
				return nil, bgtask.ErrClosed
			}
			s := o.scope(ctx)
			if s.task == nil && s.run == "" {
				return nil, ErrNoCurrentTask
			}
			var r cancelReceipt
			if args.Target.Relation == relSelf {
				r, err = o.cancelSelf(ctx, s, cfg, args.Reason)
			} else {
				r, err = o.cancelChild(ctx, args.Target.Name, args.Reason)
			}
			if err != nil {
				return nil, err
			}
			return toolJSON(r)
		},
	}
}

// cancelSelf cancels the current task with its tree, or the owner's
// current run. Its receipt counts what this call signalled: a task or run
// cancelled before is "already_cancelled", a run without live tasks (or a
// task that has ended) "nothing_to_cancel". A run scope's WithOnSelfCancel is
// called in every case: the run is cancelled now.
func (o owner) cancelSelf(ctx context.Context, s toolScope, cfg toolConfig, reason string) (cancelReceipt, error) {
	n, already, err := o.CancelCurrent(ctx, bgtask.WithReason(reason))
	switch {
	case err != nil:
		return cancelReceipt{}, err
	case s.task != nil:
		return selfReceipt(s.task.ID(), n, already), nil
	case cfg.onSelfCancel != nil:
		o.callSelfCancel(ctx, cfg.onSelfCancel)
	}
	return selfReceipt(s.run, n, already), nil
}

// selfReceipt is the receipt of a self-cancel of root that signalled n
// tasks; before tells that root had been cancelled already.
func selfReceipt(root string, n int, before bool) cancelReceipt {
	switch {
	case n > 0:
		return cancelReceipt{Status: cancelAccepted, RootTaskID: root, CanceledCount: n}
	case before:
		return cancelReceipt{Status: cancelAlreadyCanceled, RootTaskID: root}
	}
	return cancelReceipt{Status: cancelNothing, RootTaskID: root}
}

func (o owner) callSelfCancel(ctx context.Context, f func(context.Context)) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("agent: WithOnSelfCancel panicked", "panic", r, "owner", o.ID())
		}
	}()
	f(ctx)
}

// cancelChild cancels a task the model names, with its descendants: by id
// or by name, any of the owner's tasks (findNamed).
func (o owner) cancelChild(ctx context.Context, name, reason string) (cancelReceipt, error) {
	meta, found, err := o.findNamed(ctx, name)
	var amb *ambiguousNameError
	switch {
	case errors.As(err, &amb):
		return cancelReceipt{Status: cancelFailed, RootTaskID: name, Error: "task_name_ambiguous", Message: amb.message()}, nil
	case err != nil:
		return cancelReceipt{}, err
	case !found:
		return cancelReceipt{Status: cancelFailed, RootTaskID: name, Error: "task_not_found"}, nil
	case meta.Status.IsTerminal():
		return cancelReceipt{Status: cancelFailed, RootTaskID: meta.ID, Error: "task_not_running"}, nil
	}
	n, err := o.CancelTree(ctx, meta.ID, bgtask.WithReason(reason))
	if err != nil {
		return cancelReceipt{}, err
	}
	if n == 0 { // it may have ended since it was found
		if now, err := o.Get(ctx, meta.ID); err == nil && now.Status.IsTerminal() {
			return cancelReceipt{Status: cancelFailed, RootTaskID: meta.ID, Error: "task_not_running"}, nil
		}
	}
	return cancelReceipt{Status: cancelAccepted, RootTaskID: meta.ID, CanceledCount: n}, nil
}

// ambiguousNameError is findNamed's answer for a name that more than one of
// the owner's non-terminal tasks carry. A Manager keeps an owner's names
// unique among the tasks it runs, but processes sharing a Store each keep
// their own, so two of them may each run a task of one name.
type ambiguousNameError struct {
	name string
	ids  []string // the owner's non-terminal tasks of that name, oldest first
}

func (e *ambiguousNameError) Error() string { return "bgtask: " + e.message() }

// message is what the tools tell the model: the tasks are the owner's own,
// so naming them reveals nothing of another owner.
func (e *ambiguousNameError) message() string {
	return fmt.Sprintf("%d live tasks are named %q (%s): give the task_id of the one you mean", len(e.ids), e.name, strings.Join(e.ids, ", "))
}

// findNamed finds the task the model names, whichever run or task started
// it: the owner's task whose id is name (every task list_tasks shows,
// including one that another instance runs with a SharedStore); else the
// owner's non-terminal task whose name is name, an *ambiguousNameError if
// there are several; else the owner's latest ended task of that name
// (terminal status). found is false when there is none. Another owner's
// tasks, a sub-agent's own tasks among them, are never found.
func (o owner) findNamed(ctx context.Context, name string) (bgtype.TaskMeta, bool, error) {
	meta, err := o.Get(ctx, name)
	switch {
	case err == nil:
		return meta, true, nil
	case !errors.Is(err, bgtask.ErrNotFound):
		return bgtype.TaskMeta{}, false, err
	}
	all, err := listed(o.List(ctx))
	if err != nil {
		return bgtype.TaskMeta{}, false, err
	}
	var live []bgtype.TaskMeta
	var ended *bgtype.TaskMeta
	for _, m := range all { // oldest first
		switch {
		case m.Name != name:
		case !m.Status.IsTerminal():
			live = append(live, m)
		default:
			ended = &m
		}
	}
	switch {
	case len(live) == 1:
		return live[0], true, nil
	case len(live) > 1:
		ids := make([]string, len(live))
		for i := range live {
			ids[i] = live[i].ID
		}
		return bgtype.TaskMeta{}, false, &ambiguousNameError{name: name, ids: ids}
	case ended != nil:
		return *ended, true, nil
	}
	return bgtype.TaskMeta{}, false, nil
}
