package agent

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// taskNotFound is the execution error of get_task and wait_task for an id
// the owner does not have: "task not found: <id>", matching bgtype.ErrNotFound.
type taskNotFound struct{ id string }

func (e *taskNotFound) Error() string { return "task not found: " + e.id }
func (e *taskNotFound) Unwrap() error { return bgtask.ErrNotFound }

// notFoundAs turns the owner view's ErrNotFound into the tools' text.
func notFoundAs(err error, id string) error {
	if errors.Is(err, bgtask.ErrNotFound) {
		return &taskNotFound{id: id}
	}
	return err
}

var listTasksSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"status":{"type":["array","null"],"items":{"type":"string","enum":["` + strings.ReplaceAll(statusNames(), ", ", `","`) + `"]},` +
	`"minItems":1,"description":"Only tasks with one of these statuses, each listed once, such as [\"running\",\"awaiting_input\"]; null for every status."},` +
	`"type":` + textSchema(argTextMax, true, `Only tasks of this type, such as "sub_agent" or "task"; null for every type.`) + `,` +
	`"tag":` + textSchema(argTextMax, true, `Only tasks that carry this tag (tags are shown with each task); null for every task.`) + `,` +
	`"limit":{"type":["integer","null"],"description":"How many tasks at most to return, from 1 to ` + strconv.Itoa(listMaxLimit) +
	`; null for the default, ` + strconv.Itoa(listDefaultLimit) + `."},` +
	`"cursor":{"type":["string","null"],"pattern":"^[0-9a-f]{16}(?:[0-9a-f]{2})+$"` +
	`,"description":"The next_cursor of the previous page, as given, for the tasks after it (keep the same status, type and tag); null for the first page."}},` +
	`"required":["status","type","tag","limit","cursor"],"additionalProperties":false}`)

// listDescriptionMax caps the description list_tasks shows of each task, in
// bytes (get_task shows it whole).
const listDescriptionMax = 200

// listPage is list_tasks' result.
type listPage struct {
	Tasks      []toolTask `json:"tasks"`
	Total      int        `json:"total"`                 // the owner's tasks that match the filter
	NextCursor string     `json:"next_cursor,omitempty"` // none on the last page
}

func (o owner) listTasksTool() Tool {
	return Tool{
		Name: "list_tasks",
		Description: "List your background tasks (sub-agents, long tool calls) oldest first, with their status and latest progress, " +
			"a page at a time: total counts every task that matches, and next_cursor, when present, gets the next page. " +
			"Filter by status, type or tag. Use get_task for a task's result, error and messages.",
		Schema: listTasksSchema,
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeListArgs(raw)
			if err != nil {
				return nil, err
			}
			page, err := o.listPage(ctx, args)
			if err != nil {
				return nil, err
			}
			return toolJSON(page)
		},
	}
}

// listPage returns the page of the owner's tasks that args asks for. The
// cursor only positions the page within the owner's own list: whatever it
// holds, the page has the owner's tasks only.
func (o owner) listPage(ctx context.Context, args listArgs) (listPage, error) {
	tasks, err := listed(o.ListTagged(ctx, args.Tag, args.Status...))
	if err != nil {
		return listPage{}, err
	}
	page := listPage{Tasks: []toolTask{}}
	var last bgtype.TaskMeta
	more := false // a task matches after the page
	for _, meta := range tasks {
		switch {
		case args.Type != "" && meta.Type != args.Type:
			continue
		case args.Cursor != "" && !args.after.before(meta):
		case len(page.Tasks) == args.Limit:
			more = true
		default:
			page.Tasks = append(page.Tasks, o.withLatestEvent(listView(o.latestProgress(meta))))
			last = meta
		}
		page.Total++
	}
	if more {
		page.NextCursor = newListCursor(last).String()
	}
	return page, nil
}

// listCursor is where a list_tasks page ends: the creation time and id of
// its last task, the key the Store orders tasks by (oldest first). It names
// a position, not a task: a task that is forgotten or spawned between two
// calls neither breaks the next page nor repeats one (a new task is created
// after every task listed so far, so it comes at the end).
type listCursor struct {
	at int64  // CreatedAt, Unix nanoseconds
	id string // at most listCursorIDMax bytes of the id
}

// The cursor's text is 16 hex digits of at, then the id's bytes in hex.
const (
	listCursorIDMax = 128 // a task id is 37 bytes
	listCursorMax   = 16 + 2*listCursorIDMax
)

func newListCursor(m bgtype.TaskMeta) listCursor {
	// A longer id is cut (ids are 37 bytes): the cut id sorts before the
	// whole one, so the next page would repeat that task, never skip one.
	return listCursor{at: m.CreatedAt.UnixNano(), id: m.ID[:min(len(m.ID), listCursorIDMax)]}
}

func (c listCursor) String() string {
	return fmt.Sprintf("%016x", uint64(c.at)) + hex.EncodeToString([]byte(c.id))
}

// parseListCursor reads a cursor's text; ok is false unless it is the text
// of one, as the schema's pattern says.
func parseListCursor(s string) (c listCursor, ok bool) {
	if len(s) < 18 || len(s)%2 != 0 || len(s) > listCursorMax ||
		strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) {
		return listCursor{}, false
	}
	at, _ := strconv.ParseUint(s[:16], 16, 64) // 16 hex digits always fit
	id, _ := hex.DecodeString(s[16:])          // an even count of hex digits
	return listCursor{at: int64(at), id: string(id)}, true
}

// cutText returns s, or its first bytes cut at a character boundary and
// "…" when it is longer than maxBytes; the result is at most maxBytes long.
func cutText(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	const mark = "…"
	return jsoncap.CutRunes(s, maxBytes-len(mark)) + mark
}

// before reports whether the cursor's position comes before m in the order
// of Store.List.
func (c listCursor) before(m bgtype.TaskMeta) bool {
	return cmp.Or(cmp.Compare(c.at, m.CreatedAt.UnixNano()), cmp.Compare(c.id, m.ID)) < 0
}

var getTaskSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task_id":` + textSchema(argTextMax, false, "The task's id (task_...).") + `,` +
	`"output_since":` + outputSinceSchema + `,` +
	`"output_tail":{"type":["integer","null"],"description":"Read only the last bytes of the task's output, at most this many, from 1 to ` +
	strconv.Itoa(outputReadMax) + `; null for none. Not with output_since."}},` +
	`"required":["task_id","output_since","output_tail"],"additionalProperties":false}`)

// outputSinceSchema is the schema of get_task's and wait_task's
// output_since.
var outputSinceSchema = `{"type":["integer","null"],"description":"Read the task's output from this offset: 0 for the start, ` +
	`else the next_offset of your previous read, so you get only what is new (at most ` + strconv.Itoa(outputReadMax) +
	` bytes a read, from 0 to ` + strconv.FormatInt(outputSinceMax, 10) + `); null to read none."}`

// toolOutput is a piece of a task's output as get_task and wait_task show
// it: the text (escaped like every text of a tool result), where it starts,
// where to read on, how many bytes before it are lost, how many the task
// wrote in all, and whether it may write more.
type toolOutput struct {
	Text         string `json:"text"`
	Offset       int64  `json:"offset"`
	NextOffset   int64  `json:"next_offset"`
	DroppedBytes int64  `json:"dropped_bytes"`
	TotalBytes   int64  `json:"total_bytes"`
	Running      bool   `json:"running"`
}

func outputView(out bgtask.Output) *toolOutput {
	return &toolOutput{Text: out.Text, Offset: out.Offset, NextOffset: out.NextOffset, DroppedBytes: out.Dropped, TotalBytes: out.Size, Running: !out.Done}
}

// readOutput reads task id's output from since, or its tail, as asked;
// nil when neither is. Output that is lost (the instance of the fleet
// that kept it in memory is gone: ErrNotLive) is no error: lost says why,
// so the tool still answers with the task's status.
func (o owner) readOutput(ctx context.Context, id string, since *int64, tail *int) (out *toolOutput, lost string, err error) {
	var read bgtask.Output
	switch {
	case since != nil:
		read, err = o.ReadOutput(ctx, id, *since, outputReadMax)
	case tail != nil:
		read, err = o.TailOutput(ctx, id, *tail)
	default:
		return nil, "", nil
	}
	switch {
	case errors.Is(err, bgtask.ErrNotLive):
		return nil, err.Error(), nil
	case err != nil:
		return nil, "", notFoundAs(err, id)
	}
	return outputView(read), "", nil
}

func (o owner) getTaskTool() Tool {
	return Tool{
		Name: "get_task",
		Description: "Get one of your background tasks: its status, its latest progress while it runs, its result when completed, " +
			"its error when failed, the question it asks when awaiting_input, and the last messages sent to it or by it. " +
			"With output_since (or output_tail) it also returns the task's output: only what follows that offset, and the next_offset to read on from.",
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
			out, lost, err := o.readOutput(ctx, meta.ID, args.OutputSince, args.OutputTail)
			if err != nil {
				return nil, err
			}
			v := o.withLatestEvent(o.fullView(o.latestProgress(meta)))
			if out != nil { // read where it is kept: another instance may run the task
				v.OutputBytes = out.TotalBytes
			}
			return toolJSON(struct {
				Task        toolTask               `json:"task"`
				Messages    []bgtask.MessageRecord `json:"messages"`
				Output      *toolOutput            `json:"output,omitempty"`
				OutputError string                 `json:"output_error,omitempty"`
			}{v, o.messages(ctx, meta.ID), out, lost})
		},
	}
}

// listed collects a listing (Owner.List, Owner.ListTagged), or returns its
// error.
func listed(seq iter.Seq2[bgtype.TaskMeta, error]) ([]bgtype.TaskMeta, error) {
	var tasks []bgtype.TaskMeta
	for meta, err := range seq {
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, meta)
	}
	return tasks, nil
}
