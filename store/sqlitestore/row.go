package sqlitestore

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// columns are the tasks table's columns that hold a TaskMeta, in the order
// of scanRow and rowArgs.
const columns = `id, owner, task_type, name, description, status, error, stack, result,
	created_at, started_at, finished_at, parent_task_id, parent_run_id, parent_call_id,
	parent_agent_id, detached, instance, attempt, wake, input_id, input_prompt, tags, error_kind, cancel_reason,
	progress, idempotency_key,
	announced, resume, input_more, output_bytes`

// row is a tasks row as scanned, before it is checked. The table is STRICT
// and its columns NOT NULL where a TaskMeta needs a value, so a scan cannot
// fail on types; what can be wrong is the meaning (decode).
type row struct {
	id, owner, typ, name, description, status, errText, stack string
	result                                                    sql.NullString
	created, started, finished                                sql.NullInt64
	parentTask, parentRun, parentCall, parentAgent            string
	detached                                                  int64
	instance                                                  string
	attempt                                                   int64
	wake                                                      string
	inputID, inputPrompt                                      sql.NullString
	tags, errorKind, cancelReason                             string
	progress                                                  sql.NullString // JSON of a Progress
	idemKey                                                   string
	announced                                                 int64          // durable announcements
	resume                                                    sql.NullString // JSON of a Resume (a resumable task's)
	inputMore                                                 sql.NullString // JSON of MoreInput
	outputBytes                                               int64
}

type scanner interface{ Scan(dest ...any) error }

func (r *row) scan(s scanner) error {
	err := s.Scan(&r.id, &r.owner, &r.typ, &r.name, &r.description, &r.status, &r.errText, &r.stack, &r.result,
		&r.created, &r.started, &r.finished, &r.parentTask, &r.parentRun, &r.parentCall,
		&r.parentAgent, &r.detached, &r.instance, &r.attempt, &r.wake, &r.inputID, &r.inputPrompt, &r.tags, &r.errorKind, &r.cancelReason,
		&r.progress, &r.idemKey,
		&r.announced, &r.resume, &r.inputMore, &r.outputBytes)
	if err != nil {
		return fmt.Errorf("sqlitestore: read task row: %w", err)
	}
	return nil
}

// decode checks the row and makes it a record. A value no code could
// handle (an unknown status or wake policy, a result that is not JSON, no
// owner, a negative attempt or output size) is an error matching
// bgtype.ErrCorrupt that names the task.
func (r *row) decode() (bgtype.TaskMeta, error) {
	m := bgtype.TaskMeta{
		ID:           r.id,
		Owner:        r.owner,
		Type:         r.typ,
		Name:         r.name,
		Description:  r.description,
		Status:       bgtype.Status(r.status),
		Error:        r.errText,
		ErrorKind:    bgtype.ErrorKind(r.errorKind),
		CancelReason: r.cancelReason,
		Stack:        r.stack,
		CreatedAt:    fromMicros(r.created),
		StartedAt:    fromMicros(r.started),
		FinishedAt:   fromMicros(r.finished),
		Parent:       bgtype.Parent{TaskID: r.parentTask, RunID: r.parentRun, CallID: r.parentCall, AgentID: r.parentAgent},
		Detached:     r.detached != 0,
		Instance:     r.instance,
		Attempt:      r.attempt,
		Wake:         bgtype.WakePolicy(r.wake),
		// Progress and idempotency.
		IdempotencyKey: r.idemKey,
		Announced:      r.announced != 0,
		OutputBytes:    r.outputBytes,
	}
	if r.result.Valid {
		m.Result = json.RawMessage(r.result.String)
	}
	if r.inputID.Valid {
		m.Input = &bgtype.InputRequest{ID: r.inputID.String, Prompt: r.inputPrompt.String}
	}
	var why string
	tagsErr := r.decodeTags(&m)
	progErr := r.decodeProgress(&m)
	resumeErr := r.decodeResume(&m)
	var moreErr error
	if r.inputMore.Valid {
		moreErr = json.Unmarshal([]byte(r.inputMore.String), &m.MoreInput)
	}
	switch {
	case m.ID == "":
		return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: %w: a row has an empty id", bgtype.ErrCorrupt)
	case m.Owner == "":
		why = "empty owner"
	case !m.Status.Valid():
		why = fmt.Sprintf("unknown status %q", r.status)
	case !m.Wake.Valid():
		why = fmt.Sprintf("unknown wake policy %q", r.wake)
	case m.Attempt < 0:
		why = fmt.Sprintf("negative attempt %d", m.Attempt)
	case m.OutputBytes < 0:
		why = fmt.Sprintf("negative output size %d", m.OutputBytes)
	case m.Result != nil && !json.Valid(m.Result):
		why = "result is not valid JSON"
	case tagsErr != nil:
		why = "tags are not a JSON array of strings"
	case progErr != nil:
		why = progErr.Error()
	case resumeErr != nil:
		why = resumeErr.Error()
	case moreErr != nil || len(m.MoreInput) > 0 && m.Input == nil:
		why = "input_more is not a JSON array of input requests after input_id's"
	default:
		return m, nil
	}
	return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: task %s: %w: %s", m.ID, bgtype.ErrCorrupt, why)
}

// decodeTags reads the tags column into m.Tags (nil for none).
func (r *row) decodeTags(m *bgtype.TaskMeta) error {
	if r.tags == "[]" || r.tags == "" {
		return nil
	}
	return json.Unmarshal([]byte(r.tags), &m.Tags)
}

// decodeProgress reads the progress column into m.Progress (nil for NULL).
func (r *row) decodeProgress(m *bgtype.TaskMeta) error {
	if !r.progress.Valid {
		return nil
	}
	var p bgtype.Progress
	if err := json.Unmarshal([]byte(r.progress.String), &p); err != nil {
		return fmt.Errorf("progress is not JSON: %v", err)
	}
	if p.Done < 0 || p.Total < 0 || p.Total > 0 && p.Done > p.Total {
		return fmt.Errorf("invalid progress %d/%d", p.Done, p.Total)
	}
	p.At = p.At.UTC()
	m.Progress = &p
	return nil
}

// decodeResume reads the resume column into m.Resume (nil for NULL).
func (r *row) decodeResume(m *bgtype.TaskMeta) error {
	if !r.resume.Valid {
		return nil
	}
	var res bgtype.Resume
	if err := json.Unmarshal([]byte(r.resume.String), &res); err != nil {
		return fmt.Errorf("resume is not JSON: %v", err)
	}
	res.SavedAt, res.QueuedAt, res.ResumedAt = utcOrZero(res.SavedAt), utcOrZero(res.QueuedAt), utcOrZero(res.ResumedAt)
	if !res.Valid() {
		return fmt.Errorf("invalid resume (kind %q)", res.Kind)
	}
	m.Resume = &res
	return nil
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// resumeArg is the resume column's value for m: JSON, NULL for none.
func resumeArg(m *bgtype.TaskMeta) any {
	if m.Resume == nil {
		return nil
	}
	b, _ := json.Marshal(m.Resume) // valid JSON, strings, numbers and times always encode
	return string(b)
}

// progressArg is the progress column's value for m: JSON, NULL for none.
func progressArg(m *bgtype.TaskMeta) any {
	if m.Progress == nil {
		return nil
	}
	b, _ := json.Marshal(m.Progress) // numbers, a string and a time always encode
	return string(b)
}

// tagsArg is the tags column's value for m: a JSON array, "[]" for none.
func tagsArg(m *bgtype.TaskMeta) string {
	if len(m.Tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(m.Tags) // strings always encode
	return string(b)
}

// rowArgs are m's values for the columns, in order.
func rowArgs(m *bgtype.TaskMeta) []any {
	var result, inputID, inputPrompt any
	if m.Result != nil {
		result = string(m.Result)
	}
	if m.Input != nil {
		inputID, inputPrompt = m.Input.ID, m.Input.Prompt
	}
	detached, announced := 0, 0
	if m.Detached {
		detached = 1
	}
	if m.Announced {
		announced = 1
	}
	return []any{m.ID, m.Owner, m.Type, m.Name, m.Description, string(m.Status), m.Error, m.Stack, result,
		toMicros(m.CreatedAt), toMicros(m.StartedAt), toMicros(m.FinishedAt),
		m.Parent.TaskID, m.Parent.RunID, m.Parent.CallID, m.Parent.AgentID,
		detached, m.Instance, m.Attempt, string(m.Wake), inputID, inputPrompt, tagsArg(m), string(m.ErrorKind), m.CancelReason,
		progressArg(m), m.IdempotencyKey,
		announced, resumeArg(m), moreInputArg(m), m.OutputBytes}
}

// moreInputArg is the input_more column's value for m: MoreInput as a JSON
// array, NULL for none.
func moreInputArg(m *bgtype.TaskMeta) any {
	if len(m.MoreInput) == 0 {
		return nil
	}
	b, _ := json.Marshal(m.MoreInput) // strings always encode
	return string(b)
}

// toMicros stores a time as UTC microseconds (decision 14: stamps have
// microsecond precision), NULL for the zero time.
func toMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// sameProgress reports whether two records hold the same progress.
func sameProgress(a, b *bgtype.Progress) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}

// sameMeta reports whether a and b would be stored as the same row, so an
// update that the reducer left unchanged is not written.
func sameMeta(a, b *bgtype.TaskMeta) bool {
	return a.ID == b.ID && a.Owner == b.Owner && a.Type == b.Type && a.Name == b.Name &&
		a.Description == b.Description && a.Status == b.Status && a.Error == b.Error && a.ErrorKind == b.ErrorKind && a.CancelReason == b.CancelReason && a.Stack == b.Stack &&
		bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.CreatedAt.UnixMicro() == b.CreatedAt.UnixMicro() && a.CreatedAt.IsZero() == b.CreatedAt.IsZero() &&
		a.StartedAt.UnixMicro() == b.StartedAt.UnixMicro() && a.StartedAt.IsZero() == b.StartedAt.IsZero() &&
		a.FinishedAt.UnixMicro() == b.FinishedAt.UnixMicro() && a.FinishedAt.IsZero() == b.FinishedAt.IsZero() &&
		a.Parent == b.Parent && a.Detached == b.Detached && a.Instance == b.Instance &&
		a.Attempt == b.Attempt && a.Wake == b.Wake && slices.Equal(a.Tags, b.Tags) &&
		sameProgress(a.Progress, b.Progress) && a.IdempotencyKey == b.IdempotencyKey &&
		(a.Input == b.Input || a.Input != nil && b.Input != nil && *a.Input == *b.Input) && slices.Equal(a.MoreInput, b.MoreInput) &&
		a.Announced == b.Announced && a.Resume.Equal(b.Resume) && a.OutputBytes == b.OutputBytes
}

// stored is m as a read of the row rowArgs(m) writes would decode it:
// times in UTC microseconds, no empty tags, progress through its JSON.
func stored(m *bgtype.TaskMeta) (bgtype.TaskMeta, error) {
	r := row{
		id: m.ID, owner: m.Owner, typ: m.Type, name: m.Name, description: m.Description, status: string(m.Status),
		errText: m.Error, stack: m.Stack,
		parentTask: m.Parent.TaskID, parentRun: m.Parent.RunID, parentCall: m.Parent.CallID, parentAgent: m.Parent.AgentID,
		instance: m.Instance, attempt: m.Attempt, wake: string(m.Wake), tags: tagsArg(m), errorKind: string(m.ErrorKind),
		cancelReason: m.CancelReason, idemKey: m.IdempotencyKey, outputBytes: m.OutputBytes,
	}
	if m.Result != nil {
		r.result = sql.NullString{String: string(m.Result), Valid: true}
	}
	r.created, r.started, r.finished = nullMicros(m.CreatedAt), nullMicros(m.StartedAt), nullMicros(m.FinishedAt)
	if m.Detached {
		r.detached = 1
	}
	if m.Input != nil {
		r.inputID = sql.NullString{String: m.Input.ID, Valid: true}
		r.inputPrompt = sql.NullString{String: m.Input.Prompt, Valid: true}
	}
	if p, ok := progressArg(m).(string); ok {
		r.progress = sql.NullString{String: p, Valid: true}
	}
	if m.Announced {
		r.announced = 1
	}
	if res, ok := resumeArg(m).(string); ok {
		r.resume = sql.NullString{String: res, Valid: true}
	}
	if more, ok := moreInputArg(m).(string); ok {
		r.inputMore = sql.NullString{String: more, Valid: true}
	}
	return r.decode()
}

func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}
