package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// taskCols are the columns every task query reads, in scanRow's order.
const taskCols = `id, owner, task_type, name, description, status, error, stack, result,
	created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
	parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, version`

// row is a task row as stored: a record and its version.
type row struct {
	meta    bgtask.TaskMeta
	version int64
}

// scanRow reads one row of taskCols and checks it, so a row no code could
// handle is an error that names the task rather than a record in a state
// nothing handles.
func scanRow(rows pgx.Rows) (row, error) {
	var (
		r                         row
		m                         = &r.meta
		status, wake              string
		result, inID, inPrompt    pgtype.Text
		created, started, finshed pgtype.Timestamptz
	)
	if err := rows.Scan(&m.ID, &m.Owner, &m.Type, &m.Name, &m.Description, &status, &m.Error, &m.Stack, &result,
		&created, &started, &finshed, &m.Parent.TaskID, &m.Parent.RunID, &m.Parent.CallID,
		&m.Parent.AgentID, &m.Detached, &m.Instance, &m.Attempt, &wake, &inID, &inPrompt, &r.version); err != nil {
		if m.ID != "" {
			return r, fmt.Errorf("%w: task %s: %v", bgtask.ErrCorrupt, m.ID, err)
		}
		return r, fmt.Errorf("pgstore: read task row: %w", err)
	}
	m.Status, m.Wake = bgtask.TaskStatus(status), bgtask.WakePolicy(wake)
	m.CreatedAt, m.StartedAt, m.FinishedAt = fromTS(created), fromTS(started), fromTS(finshed)
	if result.Valid {
		m.Result = json.RawMessage(result.String)
	}
	if inID.Valid {
		m.Input = &bgtask.InputRequest{ID: inID.String, Prompt: inPrompt.String}
	}
	return r, checkMeta(m)
}

// checkMeta reports why a record cannot be stored or was stored corrupt,
// naming the task, as an error matching bgtask.ErrCorrupt.
func checkMeta(m *bgtask.TaskMeta) error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: task without id", bgtask.ErrCorrupt)
	case m.Owner == "":
		return fmt.Errorf("%w: task %s: empty owner", bgtask.ErrCorrupt, m.ID)
	case !m.Status.Valid():
		return fmt.Errorf("%w: task %s: unknown status %q", bgtask.ErrCorrupt, m.ID, m.Status)
	case m.Attempt < 0:
		return fmt.Errorf("%w: task %s: negative attempt %d", bgtask.ErrCorrupt, m.ID, m.Attempt)
	case !m.Wake.Valid():
		return fmt.Errorf("%w: task %s: unknown wake policy %q", bgtask.ErrCorrupt, m.ID, m.Wake)
	case m.Result != nil && !json.Valid(m.Result):
		return fmt.Errorf("%w: task %s: result is not valid JSON", bgtask.ErrCorrupt, m.ID)
	}
	return nil
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
func sameMeta(a, b *bgtask.TaskMeta) bool {
	return a.Description == b.Description && a.Status == b.Status && a.Error == b.Error && a.Stack == b.Stack &&
		bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.Instance == b.Instance && a.Attempt == b.Attempt &&
		a.CreatedAt.Equal(b.CreatedAt) && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		(a.Input == b.Input || a.Input != nil && b.Input != nil && *a.Input == *b.Input)
}

// writes are the rows one statement writes: inserts (version 0), updates
// compared-and-set on their version, and deletes.
type writes struct {
	id, owner, typ, name, desc, status, errText, stack []string
	result                                             []pgtype.Text
	created, started, finished                         []pgtype.Timestamptz
	pTask, pRun, pCall, pAgent                         []string
	detached                                           []bool
	instance                                           []string
	attempt                                            []int64
	wake                                               []string
	inID, inPrompt                                     []pgtype.Text
	version                                            []int64 // 0: insert

	delID      []string
	delVersion []int64

	inserts, updates int
}

func (w *writes) empty() bool { return len(w.id) == 0 && len(w.delID) == 0 }

// put adds m, an insert when version is 0, else an update of that version.
func (w *writes) put(m *bgtask.TaskMeta, version int64) {
	w.id = append(w.id, m.ID)
	w.owner = append(w.owner, m.Owner)
	w.typ = append(w.typ, m.Type)
	w.name = append(w.name, m.Name)
	w.desc = append(w.desc, m.Description)
	w.status = append(w.status, string(m.Status))
	w.errText = append(w.errText, m.Error)
	w.stack = append(w.stack, m.Stack)
	w.result = append(w.result, pgtype.Text{String: string(m.Result), Valid: m.Result != nil})
	w.created = append(w.created, toTS(m.CreatedAt))
	w.started = append(w.started, toTS(m.StartedAt))
	w.finished = append(w.finished, toTS(m.FinishedAt))
	w.pTask = append(w.pTask, m.Parent.TaskID)
	w.pRun = append(w.pRun, m.Parent.RunID)
	w.pCall = append(w.pCall, m.Parent.CallID)
	w.pAgent = append(w.pAgent, m.Parent.AgentID)
	w.detached = append(w.detached, m.Detached)
	w.instance = append(w.instance, m.Instance)
	w.attempt = append(w.attempt, m.Attempt)
	w.wake = append(w.wake, string(m.Wake))
	if m.Input != nil {
		w.inID = append(w.inID, pgtype.Text{String: m.Input.ID, Valid: true})
		w.inPrompt = append(w.inPrompt, pgtype.Text{String: m.Input.Prompt, Valid: true})
	} else {
		w.inID = append(w.inID, pgtype.Text{})
		w.inPrompt = append(w.inPrompt, pgtype.Text{})
	}
	w.version = append(w.version, version)
	if version == 0 {
		w.inserts++
	} else {
		w.updates++
	}
}

func (w *writes) del(id string, version int64) {
	w.delID = append(w.delID, id)
	w.delVersion = append(w.delVersion, version)
}

// writeSQL writes every row of a writes in one statement. An update or a
// delete applies only if the row still has the version that was read (a
// compare-and-set), an insert only if the id is free; the counts tell the
// caller whether every row was written. terminal_at, the clock of
// retention, is stamped by the database when a row first turns terminal.
const writeSQL = `WITH x AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::text[],
		$14::text[], $15::text[], $16::text[], $17::boolean[], $18::text[], $19::bigint[], $20::text[],
		$21::text[], $22::text[], $23::bigint[])
	AS x(id, owner, task_type, name, description, status, error, stack, result, created_at, started_at,
		finished_at, parent_task_id, parent_run_id, parent_call_id, parent_agent_id, detached, instance,
		attempt, wake, input_id, input_prompt, version)
), d AS (
	DELETE FROM bgtask_tasks t USING unnest($24::text[], $25::bigint[]) AS y(id, version)
	WHERE t.id = y.id AND t.version = y.version
	RETURNING 1
), u AS (
	UPDATE bgtask_tasks t SET description = x.description, status = x.status, error = x.error,
		stack = x.stack, result = x.result, created_at = x.created_at, started_at = x.started_at,
		finished_at = x.finished_at, instance = x.instance, attempt = x.attempt,
		input_id = x.input_id, input_prompt = x.input_prompt,
		terminal_at = CASE WHEN t.terminal_at IS NULL AND x.status IN ('completed', 'failed', 'cancelled', 'interrupted')
			THEN clock_timestamp() ELSE t.terminal_at END,
		version = t.version + 1
	FROM x WHERE x.version > 0 AND t.id = x.id AND t.version = x.version
	RETURNING 1
), i AS (
	INSERT INTO bgtask_tasks (id, owner, task_type, name, description, status, error, stack, result,
		created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
		parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, terminal_at)
	SELECT id, owner, task_type, name, description, status, error, stack, result,
		created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
		parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt,
		CASE WHEN status IN ('completed', 'failed', 'cancelled', 'interrupted') THEN clock_timestamp() END
	FROM x WHERE x.version = 0
	ON CONFLICT (id) DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM u), (SELECT count(*) FROM i)`

func (w *writes) args() []any {
	return []any{w.id, w.owner, w.typ, w.name, w.desc, w.status, w.errText, w.stack, w.result,
		w.created, w.started, w.finished, w.pTask, w.pRun, w.pCall, w.pAgent, w.detached, w.instance,
		w.attempt, w.wake, w.inID, w.inPrompt, w.version, w.delID, w.delVersion}
}
