package sqlitestore

import "strings"

// A commit that changes a record whose row the writer knows (from its cache
// or a read in the same transaction) writes only the columns a record's
// life changes, so that SQLite leaves alone the indexes and the tags
// trigger over the columns that stay as they were inserted:
//
//   - the state update sets them and the status, and the terminal columns
//     if unset: a status change or a completion (the status and terminal
//     indexes change with it);
//   - the detail update sets them without the status: progress, an
//     announcement, an error text, which no index holds.
//
// Any other change (an identity column) takes the full upsert.

// detailColumns are the columns without an index that a record's life
// changes: every column but these and status is set at insert and kept.
var detailColumns = []string{"error", "stack", "result", "started_at", "finished_at", "instance", "attempt",
	"wake", "input_id", "input_prompt", "error_kind", "cancel_reason", "progress", "announced", "resume", "input_more", "output_bytes"}

// columnIndex is each column's position in columns (and rowArgs).
var columnIndex = func() map[string]int {
	idx := make(map[string]int)
	for i, c := range strings.Split(columns, ",") {
		idx[strings.TrimSpace(c)] = i
	}
	return idx
}()

// detailArgs are the positions of detailColumns in rowArgs, isDetail
// marks them, and statusArg and idArg are the status's and the id's.
var (
	detailArgs = func() []int {
		var at []int
		for _, c := range detailColumns {
			i, ok := columnIndex[c]
			if !ok {
				panic("sqlitestore: no column " + c)
			}
			at = append(at, i)
		}
		return at
	}()
	isDetail = func() []bool {
		is := make([]bool, len(columnIndex))
		for _, i := range detailArgs {
			is[i] = true
		}
		return is
	}()
	statusArg, idArg = columnIndex["status"], columnIndex["id"]
)

// The two updates' statements; their parameters are detailColumns' values,
// then (state) the status, terminal_seq and terminal_at, then the id.
var (
	updateDetailSQL = "UPDATE tasks SET " + setList(detailColumns) + " WHERE id = ?"
	updateStateSQL  = "UPDATE tasks SET " + setList(detailColumns) +
		", status = ?, terminal_seq = coalesce(terminal_seq, ?), terminal_at = coalesce(terminal_at, ?) WHERE id = ?"
)

func setList(cols []string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c + " = ?")
	}
	return b.String()
}

// updateKind is how a known row is written: the upsert, or one of the
// updates.
type updateKind int

const (
	fullUpsert updateKind = iota
	stateUpdate
	detailUpdate
)

// kindOf picks the write of a known row whose values were oldArgs and
// become newArgs (rowArgs of each); fresh is a first terminal status.
func kindOf(oldArgs, newArgs []any, fresh bool) updateKind {
	kind := detailUpdate
	if fresh || oldArgs[statusArg] != newArgs[statusArg] {
		kind = stateUpdate
	}
	for i := range newArgs {
		if i != statusArg && !isDetail[i] && oldArgs[i] != newArgs[i] {
			return fullUpsert
		}
	}
	return kind
}

// updateArgs are the parameters of an update of kind for the row of
// newArgs (rowArgs), seq and at its terminal columns.
func updateArgs(kind updateKind, newArgs []any, seq, at any) []any {
	args := make([]any, 0, len(detailArgs)+4)
	for _, i := range detailArgs {
		args = append(args, newArgs[i])
	}
	if kind == stateUpdate {
		args = append(args, newArgs[statusArg], seq, at)
	}
	return append(args, newArgs[idArg])
}
