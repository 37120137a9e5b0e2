package agent

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	seq, err := o.ListTagged(ctx, args.Tag, args.Status...)
	if err != nil {
		return listPage{}, err
	}
	page := listPage{Tasks: []toolTask{}}
	var last bgtype.TaskMeta
	more := false // a task matches after the page
	for meta := range seq {
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
	`"task_id":` + textSchema(argTextMax, false, "The task's id (task_...).") + `},` +
	`"required":["task_id"],"additionalProperties":false}`)

func (o owner) getTaskTool() Tool {
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
				Task     toolTask               `json:"task"`
				Messages []bgtask.MessageRecord `json:"messages"`
			}{o.withLatestEvent(fullView(o.latestProgress(meta))), o.messages(ctx, meta.ID)})
		},
	}
}
