package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NOTIFY channels and advisory locks belong to a database, not to a
// schema: a fleet keys its own by the schema its tables live in, so that
// fleets in two schemas of one database neither hear each other nor take
// each other's locks (decision 800). The public schema keeps the names and
// keys of releases that did not key them, so a fleet there keeps working
// while old and new processes run side by side.

// scopeSQL reads the suffix of the channel names and lock keys of the
// schema the connection creates its tables in: none for public, else "_"
// and 16 hex digits of the name's MD5, computed by the server as the
// settled trigger computes it (migration 14), so the name's bytes and
// encoding never reach SQL text.
const scopeSQL = `SELECT current_schema()::text, ` + suffixSQL

// suffixSQL is the suffix of the schema of the connection (scopeSQL).
const suffixSQL = `CASE WHEN current_schema() = 'public' THEN '' ELSE '_' || left(md5(current_schema()::text), 16) END`

// scope names the channels and lock keys of one schema's fleet.
type scope struct {
	schema      string // the schema, for messages
	cancel      string // the channel of cancel requests (cancel.go)
	settled     string // the channel of settled rows and markers (settle.go)
	message     string // the channel of messages to carry (messages.go)
	messageDone string // the channel of handled messages (messages.go)
	// lock starts the text an advisory lock key is hashed from, before
	// "instance <id>" or "kind <kind>": "bgtask " for public, as before,
	// "bgtask_<hex> " for another schema (no public key starts so).
	lock string
}

// newScope returns the scope of the schema whose suffix (scopeSQL) is
// suffix.
func newScope(schema, suffix string) scope {
	return scope{
		schema:      schema,
		cancel:      cancelChannel + suffix,
		settled:     settledChannel + suffix,
		message:     messageChannel + suffix,
		messageDone: messageDoneChannel + suffix,
		lock:        "bgtask" + suffix + " ",
	}
}

// readScope reads the scope of the schema q's connections create their
// tables in (the first schema of search_path that exists).
func readScope(ctx context.Context, q *pgxpool.Pool) (scope, error) {
	var schema, suffix *string
	if err := q.QueryRow(ctx, scopeSQL).Scan(&schema, &suffix); err != nil {
		return scope{}, fmt.Errorf("pgstore: read the schema: %w", err)
	}
	if schema == nil || suffix == nil {
		return scope{}, fmt.Errorf("pgstore: no schema of search_path exists")
	}
	return newScope(*schema, *suffix), nil
}

// listenSQL LISTENs on the channels of sc.
func listenSQL(sc scope) string {
	var b strings.Builder
	for _, ch := range []string{sc.cancel, sc.settled, sc.message, sc.messageDone} {
		b.WriteString("LISTEN " + pgx.Identifier{ch}.Sanitize() + ";")
	}
	return b.String()
}
