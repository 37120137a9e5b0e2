package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
)

// SchemaVersion is the schema version this code writes and reads, kept in
// the database's PRAGMA user_version. Open migrates an older database up to
// it and refuses a newer one (ErrSchemaTooNew).
const SchemaVersion = len(migrations)

// migrations[i] moves the schema from version i to i+1. Append only: a
// released step is never edited.
var migrations = [...]string{
	// 1: a row per task. Times are UTC microseconds since the Unix epoch,
	// NULL when unset. terminal_seq orders records by when they were
	// committed terminal (count retention) and terminal_at is the store's
	// clock then (age retention); both are NULL while the task is live.
	// Status is not constrained by a CHECK, so that a newer version's
	// status is reported as a corrupt row naming the task, not refused
	// for the whole table.
	`CREATE TABLE tasks (
		id              TEXT    NOT NULL PRIMARY KEY,
		owner           TEXT    NOT NULL,
		task_type       TEXT    NOT NULL DEFAULT '',
		name            TEXT    NOT NULL DEFAULT '',
		description     TEXT    NOT NULL DEFAULT '',
		status          TEXT    NOT NULL,
		error           TEXT    NOT NULL DEFAULT '',
		stack           TEXT    NOT NULL DEFAULT '',
		result          TEXT,
		created_at      INTEGER,
		started_at      INTEGER,
		finished_at     INTEGER,
		parent_task_id  TEXT    NOT NULL DEFAULT '',
		parent_run_id   TEXT    NOT NULL DEFAULT '',
		parent_call_id  TEXT    NOT NULL DEFAULT '',
		parent_agent_id TEXT    NOT NULL DEFAULT '',
		detached        INTEGER NOT NULL DEFAULT 0,
		instance        TEXT    NOT NULL DEFAULT '',
		attempt         INTEGER NOT NULL DEFAULT 0,
		wake            TEXT    NOT NULL DEFAULT '',
		input_id        TEXT,
		input_prompt    TEXT,
		terminal_seq    INTEGER,
		terminal_at     INTEGER
	) STRICT, WITHOUT ROWID;
	CREATE INDEX tasks_owner_status ON tasks (owner, status);
	CREATE INDEX tasks_parent ON tasks (parent_task_id, created_at) WHERE parent_task_id <> '';
	CREATE INDEX tasks_owner_terminal ON tasks (owner, terminal_seq) WHERE terminal_seq IS NOT NULL;
	CREATE INDEX tasks_terminal_at ON tasks (terminal_at) WHERE terminal_at IS NOT NULL;`,
	// 2: tags, error kinds and cancel reasons. error_kind is why a failed
	// or interrupted task ended, cancel_reason why a cancelled one was
	// cancelled ('' for rows of version 1). The record's tags are a JSON array of strings in tasks.tags
	// (set at insert, never changed by the reducer); task_tags indexes
	// them for the tag filter, one row per (owner, tag, task), kept by
	// triggers so that every write path (upserts, retention deletes,
	// removes) keeps it in step. Rows of an older version get no tags.
	`ALTER TABLE tasks ADD COLUMN error_kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN cancel_reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
	CREATE TABLE task_tags (
		owner   TEXT NOT NULL,
		tag     TEXT NOT NULL,
		task_id TEXT NOT NULL,
		PRIMARY KEY (owner, tag, task_id)
	) STRICT, WITHOUT ROWID;
	CREATE TRIGGER tasks_tags_insert AFTER INSERT ON tasks BEGIN
		INSERT OR IGNORE INTO task_tags (owner, tag, task_id) SELECT new.owner, value, new.id FROM json_each(new.tags);
	END;
	CREATE TRIGGER tasks_tags_update AFTER UPDATE OF tags, owner ON tasks WHEN old.tags IS NOT new.tags OR old.owner IS NOT new.owner BEGIN
		DELETE FROM task_tags WHERE owner = old.owner AND task_id = old.id AND tag IN (SELECT value FROM json_each(old.tags));
		INSERT OR IGNORE INTO task_tags (owner, tag, task_id) SELECT new.owner, value, new.id FROM json_each(new.tags);
	END;
	CREATE TRIGGER tasks_tags_delete AFTER DELETE ON tasks BEGIN
		DELETE FROM task_tags WHERE owner = old.owner AND task_id = old.id AND tag IN (SELECT value FROM json_each(old.tags));
	END;`,
	// 3: cancel requests from another process (ReadOnly.RequestCancel),
	// taken and deleted by the poller of the process that runs the task
	// (Store.Start). requested_at is UTC microseconds.
	`CREATE TABLE cancel_requests (
		seq          INTEGER PRIMARY KEY,
		task_id      TEXT    NOT NULL,
		tree         INTEGER NOT NULL DEFAULT 0,
		reason       TEXT    NOT NULL DEFAULT '',
		requested_at INTEGER NOT NULL
	) STRICT;`,
	// 4: progress on the record and idempotent spawn. progress is the
	// record's Progress as JSON, NULL for none. idempotency_key is set
	// at insert and never changed; the unique index makes an owner's key
	// name one record at a time, whichever process inserts it ('' is no
	// key). Rows of an older version get neither.
	`ALTER TABLE tasks ADD COLUMN progress TEXT;
	ALTER TABLE tasks ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX tasks_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key <> '';`,
	// 5 (durable announcements): announced is 1 once the owner's loop has
	// taken the terminal event of the record (store.AnnounceAction). Rows of an
	// older version are not announced, so a restart announces them once.
	// tasks_unannounced finds an owner's terminal records still to announce.
	`ALTER TABLE tasks ADD COLUMN announced INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX tasks_unannounced ON tasks (owner, created_at) WHERE announced = 0 AND terminal_seq IS NOT NULL;`,
	// 6: tasks_unannounced goes. No query reads through it (PendingOwners
	// and Load find an owner's records by tasks_owner_status), while every
	// completion and every Announce wrote it: one page more per owner in
	// each write transaction.
	`DROP INDEX IF EXISTS tasks_unannounced;`,
	// 7: one index of an owner's records, (owner, terminal_seq), in place
	// of tasks_owner_status and the partial tasks_owner_terminal. Live
	// records (terminal_seq NULL) sort first in an owner's range, then
	// terminal ones in the order they ended, so one index finds an owner's
	// records, counts its terminal ones and finds its oldest. A completion
	// moved an entry in each of the two indexes and a retention delete
	// removed one from each, in pages of their own; now each writes one.
	// It keeps the name tasks_owner_terminal, so that a process of the
	// previous version still open on the file (an overlapping restart)
	// finds the index its queries name.
	`DROP INDEX IF EXISTS tasks_owner_status;
	DROP INDEX IF EXISTS tasks_owner_terminal;
	CREATE INDEX tasks_owner_terminal ON tasks (owner, terminal_seq);`,
	// 8: resumable tasks. resume is the record's Resume as JSON (the
	// kind, its spec, the last checkpoint), NULL for a closure's record.
	// tasks_waiting finds the records that wait in the queue for an
	// instance to claim them (queued, no instance), for every owner at
	// once; it holds none of a closure's.
	`ALTER TABLE tasks ADD COLUMN resume TEXT;
	CREATE INDEX tasks_waiting ON tasks (created_at) WHERE resume IS NOT NULL AND status = 'queued' AND instance = '';`,
	// 9: several open input requests. input_more is the record's
	// MoreInput as JSON (the open requests after input_id's), NULL while
	// one or none is open.
	`ALTER TABLE tasks ADD COLUMN input_more TEXT;`,
	// 10: a task's output size. output_bytes is how many bytes the task
	// wrote to its output in all (TaskMeta.OutputBytes), set on its
	// terminal record, so the end's notice says it in every process that
	// reads the file; 0 for rows of an older version.
	`ALTER TABLE tasks ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;`,
}

// userVersion reads the schema version.
func userVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlitestore: read schema version: %w", err)
	}
	return v, nil
}

func tooNew(v int) error {
	return fmt.Errorf("%w: database schema version %d, this code knows up to %d", ErrSchemaTooNew, v, SchemaVersion)
}

// migrate brings the schema up to SchemaVersion in one immediate
// transaction, so two processes opening one file at once migrate it once.
// v is the version read before; it is read again under the lock.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil) // _txlock=immediate: takes the write lock now
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer tx.Rollback()
	v, err := userVersion(ctx, tx)
	if err != nil {
		return err
	}
	if v > SchemaVersion {
		return tooNew(v)
	}
	if v == SchemaVersion {
		return nil
	}
	for i := v; i < SchemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("sqlitestore: migrate schema %d to %d: %w", i, i+1, err)
		}
	}
	// PRAGMA takes no parameters; SchemaVersion is a constant.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return fmt.Errorf("sqlitestore: set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	log.Info("sqlitestore: migrated schema", "from", v, "to", SchemaVersion)
	return nil
}
