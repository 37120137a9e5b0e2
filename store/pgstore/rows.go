package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// taskCols are the columns every task query reads, in scanRow's order.
const taskCols = `id, owner, task_type, name, description, status, error, stack, result,
	created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
	parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, version, tags, error_kind, cancel_reason,
	progress, idempotency_key,
	announced, resume, input_more, output_bytes`

// row is a task row as stored: a record and its version.
type row struct {
	meta    bgtype.TaskMeta
	version int64
}

// scanRow reads one row of taskCols and checks it, so a row no code could
// handle is an error that names the task rather than a record in a state
// nothing handles.
func scanRow(rows pgx.Rows) (row, error) {
	var (
		r                         row
		m                         = &r.meta
		status, wake, errorKind   string
		result, inID, inPrompt    pgtype.Text
		progress, resume, inMore  pgtype.Text
		created, started, finshed pgtype.Timestamptz
	)
	if err := rows.Scan(&m.ID, &m.Owner, &m.Type, &m.Name, &m.Description, &status, &m.Error, &m.Stack, &result,
		&created, &started, &finshed, &m.Parent.TaskID, &m.Parent.RunID, &m.Parent.CallID,
		&m.Parent.AgentID, &m.Detached, &m.Instance, &m.Attempt, &wake, &inID, &inPrompt, &r.version, &m.Tags, &errorKind, &m.CancelReason,
		&progress, &m.IdempotencyKey,
		&m.Announced, &resume, &inMore, &m.OutputBytes); err != nil {
		if m.ID != "" {
			return r, fmt.Errorf("%w: task %s: %v", bgtype.ErrCorrupt, m.ID, err)
		}
		return r, fmt.Errorf("pgstore: read task row: %w", err)
	}
	m.Status, m.Wake, m.ErrorKind = bgtype.Status(status), bgtype.WakePolicy(wake), bgtype.ErrorKind(errorKind)
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	m.CreatedAt, m.StartedAt, m.FinishedAt = fromTS(created), fromTS(started), fromTS(finshed)
	if result.Valid {
		m.Result = json.RawMessage(result.String)
	}
	if inID.Valid {
		m.Input = &bgtype.InputRequest{ID: inID.String, Prompt: inPrompt.String}
	}
	if inMore.Valid {
		if err := json.Unmarshal([]byte(inMore.String), &m.MoreInput); err != nil {
			return r, fmt.Errorf("%w: task %s: input_more is not JSON: %v", bgtype.ErrCorrupt, m.ID, err)
		}
	}
	if progress.Valid {
		m.Progress = new(bgtype.Progress)
		if err := json.Unmarshal([]byte(progress.String), m.Progress); err != nil {
			return r, fmt.Errorf("%w: task %s: progress is not JSON: %v", bgtype.ErrCorrupt, m.ID, err)
		}
		m.Progress.At = m.Progress.At.UTC()
	}
	if resume.Valid {
		m.Resume = new(bgtype.Resume)
		if err := json.Unmarshal([]byte(resume.String), m.Resume); err != nil {
			return r, fmt.Errorf("%w: task %s: resume is not JSON: %v", bgtype.ErrCorrupt, m.ID, err)
		}
		m.Resume.SavedAt, m.Resume.QueuedAt, m.Resume.ResumedAt = utc(m.Resume.SavedAt), utc(m.Resume.QueuedAt), utc(m.Resume.ResumedAt)
	}
	return r, checkMeta(m)
}

// checkMeta reports why a record cannot be stored or was stored corrupt,
// naming the task, as an error matching bgtype.ErrCorrupt.
func checkMeta(m *bgtype.TaskMeta) error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: task without id", bgtype.ErrCorrupt)
	case m.Owner == "":
		return fmt.Errorf("%w: task %s: empty owner", bgtype.ErrCorrupt, m.ID)
	case !m.Status.Valid():
		return fmt.Errorf("%w: task %s: unknown status %q", bgtype.ErrCorrupt, m.ID, m.Status)
	case m.Attempt < 0:
		return fmt.Errorf("%w: task %s: negative attempt %d", bgtype.ErrCorrupt, m.ID, m.Attempt)
	case m.OutputBytes < 0:
		return fmt.Errorf("%w: task %s: negative output size %d", bgtype.ErrCorrupt, m.ID, m.OutputBytes)
	case !m.Wake.Valid():
		return fmt.Errorf("%w: task %s: unknown wake policy %q", bgtype.ErrCorrupt, m.ID, m.Wake)
	case m.Result != nil && !json.Valid(m.Result):
		return fmt.Errorf("%w: task %s: result is not valid JSON", bgtype.ErrCorrupt, m.ID)
	case m.Progress != nil && (m.Progress.Done < 0 || m.Progress.Total < 0 || m.Progress.Total > 0 && m.Progress.Done > m.Progress.Total):
		return fmt.Errorf("%w: task %s: invalid progress %d/%d", bgtype.ErrCorrupt, m.ID, m.Progress.Done, m.Progress.Total)
	case !m.Resume.Valid():
		return fmt.Errorf("%w: task %s: invalid resume (kind %q)", bgtype.ErrCorrupt, m.ID, m.Resume.Kind)
	}
	return nil
}

// utc is t in UTC, the zero time kept zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// resumeText is the resume column's value for m: JSON, NULL for none.
func resumeText(m *bgtype.TaskMeta) pgtype.Text {
	if m.Resume == nil {
		return pgtype.Text{}
	}
	b, _ := json.Marshal(m.Resume) // valid JSON, strings, numbers and times always encode
	return pgtype.Text{String: string(b), Valid: true}
}

func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

func toTS(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// sameMeta reports whether two records hold the same values, so an update
// that changes nothing writes nothing.
func sameMeta(a, b *bgtype.TaskMeta) bool {
	return a.Description == b.Description && a.Status == b.Status && a.Error == b.Error && a.ErrorKind == b.ErrorKind && a.CancelReason == b.CancelReason && a.Stack == b.Stack &&
		bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.Instance == b.Instance && a.Attempt == b.Attempt &&
		a.CreatedAt.Equal(b.CreatedAt) && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		(a.Input == b.Input || a.Input != nil && b.Input != nil && *a.Input == *b.Input) && slices.Equal(a.MoreInput, b.MoreInput) &&
		sameProgress(a.Progress, b.Progress) &&
		a.Announced == b.Announced && a.Resume.Equal(b.Resume) && a.OutputBytes == b.OutputBytes
}

// sameProgress reports whether two records hold the same progress.
func sameProgress(a, b *bgtype.Progress) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}

// cols holds records column by column, the arguments of an unnest.
type cols struct {
	id, owner, typ, name, desc, status, errText, stack []string
	result                                             []pgtype.Text
	created, started, finished                         []pgtype.Timestamptz
	pTask, pRun, pCall, pAgent                         []string
	detached                                           []bool
	instance                                           []string
	attempt                                            []int64
	wake                                               []string
	inID, inPrompt                                     []pgtype.Text
	version                                            []int64
	tags                                               []string // each a JSON array: unnest cannot take an array of arrays
	errorKind, cancelReason                            []string
	progress                                           []pgtype.Text // JSON of a Progress, NULL for none
	idemKey                                            []string
	announced                                          []bool        // durable announcements
	resume                                             []pgtype.Text // JSON of a Resume, NULL for a closure's
	inMore                                             []pgtype.Text // JSON of MoreInput, NULL for none
	outputBytes                                        []int64
}

// grow makes room for n more rows in every column, so that adding them
// allocates once a column, not at each doubling of its slice.
func (c *cols) grow(n int) {
	c.id = slices.Grow(c.id, n)
	c.owner = slices.Grow(c.owner, n)
	c.typ = slices.Grow(c.typ, n)
	c.name = slices.Grow(c.name, n)
	c.desc = slices.Grow(c.desc, n)
	c.status = slices.Grow(c.status, n)
	c.errText = slices.Grow(c.errText, n)
	c.stack = slices.Grow(c.stack, n)
	c.result = slices.Grow(c.result, n)
	c.created = slices.Grow(c.created, n)
	c.started = slices.Grow(c.started, n)
	c.finished = slices.Grow(c.finished, n)
	c.pTask = slices.Grow(c.pTask, n)
	c.pRun = slices.Grow(c.pRun, n)
	c.pCall = slices.Grow(c.pCall, n)
	c.pAgent = slices.Grow(c.pAgent, n)
	c.detached = slices.Grow(c.detached, n)
	c.instance = slices.Grow(c.instance, n)
	c.attempt = slices.Grow(c.attempt, n)
	c.wake = slices.Grow(c.wake, n)
	c.inID = slices.Grow(c.inID, n)
	c.inPrompt = slices.Grow(c.inPrompt, n)
	c.version = slices.Grow(c.version, n)
	c.tags = slices.Grow(c.tags, n)
	c.errorKind = slices.Grow(c.errorKind, n)
	c.cancelReason = slices.Grow(c.cancelReason, n)
	c.progress = slices.Grow(c.progress, n)
	c.idemKey = slices.Grow(c.idemKey, n)
	c.announced = slices.Grow(c.announced, n)
	c.resume = slices.Grow(c.resume, n)
	c.inMore = slices.Grow(c.inMore, n)
	c.outputBytes = slices.Grow(c.outputBytes, n)
}

func (c *cols) add(m *bgtype.TaskMeta, version int64) {
	c.id = append(c.id, m.ID)
	c.owner = append(c.owner, m.Owner)
	c.typ = append(c.typ, m.Type)
	c.name = append(c.name, m.Name)
	c.desc = append(c.desc, m.Description)
	c.status = append(c.status, string(m.Status))
	c.errText = append(c.errText, m.Error)
	c.stack = append(c.stack, m.Stack)
	c.result = append(c.result, pgtype.Text{String: string(m.Result), Valid: m.Result != nil})
	c.created = append(c.created, toTS(m.CreatedAt))
	c.started = append(c.started, toTS(m.StartedAt))
	c.finished = append(c.finished, toTS(m.FinishedAt))
	c.pTask = append(c.pTask, m.Parent.TaskID)
	c.pRun = append(c.pRun, m.Parent.RunID)
	c.pCall = append(c.pCall, m.Parent.CallID)
	c.pAgent = append(c.pAgent, m.Parent.AgentID)
	c.detached = append(c.detached, m.Detached)
	c.instance = append(c.instance, m.Instance)
	c.attempt = append(c.attempt, m.Attempt)
	c.wake = append(c.wake, string(m.Wake))
	if m.Input != nil {
		c.inID = append(c.inID, pgtype.Text{String: m.Input.ID, Valid: true})
		c.inPrompt = append(c.inPrompt, pgtype.Text{String: m.Input.Prompt, Valid: true})
	} else {
		c.inID = append(c.inID, pgtype.Text{})
		c.inPrompt = append(c.inPrompt, pgtype.Text{})
	}
	c.version = append(c.version, version)
	tags := "[]"
	if len(m.Tags) > 0 {
		b, _ := json.Marshal(m.Tags) // strings always encode
		tags = string(b)
	}
	c.tags = append(c.tags, tags)
	c.errorKind = append(c.errorKind, string(m.ErrorKind))
	c.cancelReason = append(c.cancelReason, m.CancelReason)
	var progress pgtype.Text
	if m.Progress != nil {
		b, _ := json.Marshal(m.Progress) // numbers, a string and a time always encode
		progress = pgtype.Text{String: string(b), Valid: true}
	}
	c.progress = append(c.progress, progress)
	c.idemKey = append(c.idemKey, m.IdempotencyKey)
	c.announced = append(c.announced, m.Announced)
	c.resume = append(c.resume, resumeText(m))
	c.inMore = append(c.inMore, moreInputText(m))
	c.outputBytes = append(c.outputBytes, m.OutputBytes)
}

// moreInputText is m's MoreInput as the input_more column holds it: a JSON
// array, NULL for none.
func moreInputText(m *bgtype.TaskMeta) pgtype.Text {
	if len(m.MoreInput) == 0 {
		return pgtype.Text{}
	}
	b, _ := json.Marshal(m.MoreInput) // strings always encode
	return pgtype.Text{String: string(b), Valid: true}
}

func (c *cols) args() []any {
	return []any{c.id, c.owner, c.typ, c.name, c.desc, c.status, c.errText, c.stack, c.result,
		c.created, c.started, c.finished, c.pTask, c.pRun, c.pCall, c.pAgent, c.detached, c.instance,
		c.attempt, c.wake, c.inID, c.inPrompt, c.version, c.tags, c.errorKind, c.cancelReason,
		c.progress, c.idemKey,
		c.announced, c.resume, c.inMore, c.outputBytes}
}

// writes are the rows a commit writes: inserts, updates compared-and-set
// on the version that was read, and deletes likewise.
type writes struct {
	ins, upd   cols
	delID      []string
	delVersion []int64
	// metas are the records of ins and upd, in their order, for the
	// Store's cache of what it wrote.
	insMeta, updMeta []*bgtype.TaskMeta
	// counted are, for the insert, the update and the delete (countIns,
	// countUpd, countDel), the owners whose terminal counts the statement
	// may change, as applyAll found them (prelock.go).
	counted [3][]string
	first   [3][1]string // the backing of each counted's first owner, so that the common commit allocates none
	// rows is how many rows the commit may write (its records): the
	// columns of the inserts and of the updates are made that large at
	// their first row.
	rows int
}

// newWrites returns the writes of a commit of at most rows records.
func newWrites(rows int) *writes { return &writes{rows: rows} }

func (w *writes) empty() bool { return len(w.ins.id) == 0 && len(w.upd.id) == 0 && len(w.delID) == 0 }

// put adds m, an insert when version is 0, else an update of that version.
func (w *writes) put(m *bgtype.TaskMeta, version int64) {
	if version == 0 {
		if w.insMeta == nil {
			w.ins.grow(w.rows)
			w.insMeta = make([]*bgtype.TaskMeta, 0, w.rows)
		}
		w.ins.add(m, 0)
		w.insMeta = append(w.insMeta, m)
	} else {
		if w.updMeta == nil {
			w.upd.grow(w.rows)
			w.updMeta = make([]*bgtype.TaskMeta, 0, w.rows)
		}
		w.upd.add(m, version)
		w.updMeta = append(w.updMeta, m)
	}
}

func (w *writes) del(id string, version int64) {
	w.delID = append(w.delID, id)
	w.delVersion = append(w.delVersion, version)
}

// unnestSQL turns the arguments of cols.args into rows named like the
// table's columns.
const unnestSQL = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::text[],
		$14::text[], $15::text[], $16::text[], $17::boolean[], $18::text[], $19::bigint[], $20::text[],
		$21::text[], $22::text[], $23::bigint[], $24::text[], $25::text[], $26::text[],
		$27::text[], $28::text[],
		$29::boolean[], $30::text[], $31::text[], $32::bigint[])
	AS x(id, owner, task_type, name, description, status, error, stack, result, created_at, started_at,
		finished_at, parent_task_id, parent_run_id, parent_call_id, parent_agent_id, detached, instance,
		attempt, wake, input_id, input_prompt, version, tags, error_kind, cancel_reason,
		progress, idempotency_key,
		announced, resume, input_more, output_bytes)`

// terminalSQL is true for a row of x whose status is terminal.
const terminalSQL = `x.status IN ('completed', 'failed', 'cancelled', 'interrupted')`

// insertSQL inserts new rows; an id taken meanwhile is a unique violation
// that aborts the transaction (the caller starts over). terminal_at, the
// clock of retention, is stamped by the database when a row first turns
// terminal.
const insertSQL = `INSERT INTO bgtask_tasks (id, owner, task_type, name, description, status, error, stack, result,
		created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
		parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, tags, error_kind, cancel_reason,
		progress, idempotency_key, announced, resume, input_more, output_bytes, terminal_at)
	SELECT id, owner, task_type, name, description, status, error, stack, result,
		created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
		parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt,
		ARRAY(SELECT jsonb_array_elements_text(x.tags::jsonb)), error_kind, cancel_reason,
		progress, idempotency_key, announced, resume, input_more, output_bytes,
		CASE WHEN ` + terminalSQL + ` THEN clock_timestamp() END
	FROM ` + unnestSQL

// insertFencedSQL is insertSQL as one statement with the fence of a
// started Store: it locks the registration of instance $33 against being
// declared dead (as fenceSQL does), inserts nothing unless it is alive,
// and returns its state and the rows inserted.
const insertFencedSQL = `WITH f AS (SELECT state FROM bgtask_instances WHERE id = $33 FOR KEY SHARE),
	i AS (` + insertSQL + `
		WHERE (SELECT state FROM f) = 'alive' RETURNING 1)
	SELECT coalesce((SELECT state FROM f), 'missing'), (SELECT count(*) FROM i)`

// updateSQL writes the fields the reducer may change, each row only if it
// still has the version that was read (a compare-and-set), and bumps it.
// Identity fields are never written after the insert.
const updateSQL = `UPDATE bgtask_tasks t SET description = x.description, status = x.status, error = x.error, error_kind = x.error_kind, cancel_reason = x.cancel_reason,
		stack = x.stack, result = x.result, created_at = x.created_at, started_at = x.started_at,
		finished_at = x.finished_at, instance = x.instance, attempt = x.attempt,
		input_id = x.input_id, input_prompt = x.input_prompt,
		progress = x.progress, announced = x.announced, resume = x.resume, input_more = x.input_more,
		output_bytes = x.output_bytes,
		terminal_at = CASE WHEN t.terminal_at IS NULL AND ` + terminalSQL + ` THEN clock_timestamp() ELSE t.terminal_at END,
		version = t.version + 1
	FROM ` + unnestSQL + `
	WHERE t.id = x.id AND t.version = x.version`

// updateOneSQL is updateSQL for one row, without the arrays: the common
// write of a task's completion. Its arguments are updateOneArgs'.
const updateOneSQL = `UPDATE bgtask_tasks t SET description = $3, status = $4, error = $5, error_kind = $6, cancel_reason = $7,
		stack = $8, result = $9, created_at = $10, started_at = $11,
		finished_at = $12, instance = $13, attempt = $14,
		input_id = $15, input_prompt = $16,
		progress = $17, announced = $18, resume = $19, input_more = $20, output_bytes = $21,
		terminal_at = CASE WHEN t.terminal_at IS NULL AND $4 IN ('completed', 'failed', 'cancelled', 'interrupted') THEN clock_timestamp() ELSE t.terminal_at END,
		version = t.version + 1
	WHERE t.id = $1 AND t.version = $2`

// updateOneArgs are the arguments of updateOneSQL for the first row of c.
func updateOneArgs(c *cols) []any {
	return []any{c.id[0], c.version[0], c.desc[0], c.status[0], c.errText[0], c.errorKind[0], c.cancelReason[0],
		c.stack[0], c.result[0], c.created[0], c.started[0], c.finished[0], c.instance[0], c.attempt[0],
		c.inID[0], c.inPrompt[0], c.progress[0], c.announced[0], c.resume[0], c.inMore[0], c.outputBytes[0]}
}

// deleteSQL deletes rows compared-and-set on their version.
const deleteSQL = `DELETE FROM bgtask_tasks t USING unnest($1::text[], $2::bigint[]) AS y(id, version)
	WHERE t.id = y.id AND t.version = y.version`

// insertOneCols are the columns insertOneSQL writes, in oneArgs' order.
const insertOneCols = `id, owner, task_type, name, description, status, error, stack, result,
		created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
		parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, tags, error_kind, cancel_reason,
		progress, idempotency_key, resume, input_more, output_bytes`

// insertOneVals are insertOneSQL's values, typed (a SELECT list does not
// take its types from the columns it is inserted into).
const insertOneVals = `$1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text,
		$10::timestamptz, $11::timestamptz, $12::timestamptz, $13::text, $14::text, $15::text,
		$16::text, $17::boolean, $18::text, $19::bigint, $20::text, $21::text, $22::text, $23::text[], $24::text, $25::text,
		$26::text, $27::text, $28::text, $29::text, $30::bigint`

// insertOneSQL inserts one new record that is not terminal: the common
// commit of a spawn, without the arrays of insertSQL.
const insertOneSQL = `INSERT INTO bgtask_tasks (` + insertOneCols + `) VALUES (` + insertOneVals + `)`

// insertOneFencedSQL is insertOneSQL fenced like insertFencedSQL, the
// instance being $31.
const insertOneFencedSQL = `WITH f AS (SELECT state FROM bgtask_instances WHERE id = $31 FOR KEY SHARE),
	i AS (INSERT INTO bgtask_tasks (` + insertOneCols + `) SELECT ` + insertOneVals + `
		WHERE (SELECT state FROM f) = 'alive' RETURNING 1)
	SELECT coalesce((SELECT state FROM f), 'missing'), (SELECT count(*) FROM i)`

// oneArgs are the arguments of insertOneSQL for m.
func oneArgs(m *bgtype.TaskMeta) []any {
	var inID, inPrompt pgtype.Text
	if m.Input != nil {
		inID, inPrompt = pgtype.Text{String: m.Input.ID, Valid: true}, pgtype.Text{String: m.Input.Prompt, Valid: true}
	}
	tags := m.Tags
	if tags == nil {
		tags = []string{}
	}
	var progress pgtype.Text
	if m.Progress != nil {
		b, _ := json.Marshal(m.Progress) // numbers, a string and a time always encode
		progress = pgtype.Text{String: string(b), Valid: true}
	}
	return []any{m.ID, m.Owner, m.Type, m.Name, m.Description, string(m.Status), m.Error, m.Stack,
		pgtype.Text{String: string(m.Result), Valid: m.Result != nil},
		toTS(m.CreatedAt), toTS(m.StartedAt), toTS(m.FinishedAt), m.Parent.TaskID, m.Parent.RunID, m.Parent.CallID,
		m.Parent.AgentID, m.Detached, m.Instance, m.Attempt, string(m.Wake), inID, inPrompt, tags, string(m.ErrorKind), m.CancelReason,
		progress, m.IdempotencyKey, resumeText(m), moreInputText(m), m.OutputBytes}
}
