package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrSchemaTooNew is returned by Open when the database was migrated by a
// newer version of this package than the running one. Open then changes
// nothing.
var ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this code")

// migrationLock is the advisory lock key that serialises migrations, so two
// processes opening one database at once migrate it once.
const migrationLock = 0x62677461736b // "bgtask"

// migrations are applied in order; migration i brings the schema to version
// i+1. Never edit one that has shipped: append.
var migrations = []string{
	// 1: tasks, instances, notices, cancel requests.
	`CREATE TABLE bgtask_tasks (
		id              text PRIMARY KEY,
		owner           text NOT NULL,
		task_type       text NOT NULL DEFAULT '',
		name            text NOT NULL DEFAULT '',
		description     text NOT NULL DEFAULT '',
		status          text NOT NULL,
		error           text NOT NULL DEFAULT '',
		stack           text NOT NULL DEFAULT '',
		result          text,
		created_at      timestamptz,
		started_at      timestamptz,
		finished_at     timestamptz,
		parent_task_id  text NOT NULL DEFAULT '',
		parent_run_id   text NOT NULL DEFAULT '',
		parent_call_id  text NOT NULL DEFAULT '',
		parent_agent_id text NOT NULL DEFAULT '',
		detached        boolean NOT NULL DEFAULT false,
		instance        text NOT NULL DEFAULT '',
		attempt         bigint NOT NULL DEFAULT 0,
		wake            text NOT NULL DEFAULT '',
		input_id        text,
		input_prompt    text,
		terminal_at     timestamptz,
		version         bigint NOT NULL DEFAULT 1
	);
	CREATE INDEX bgtask_tasks_owner ON bgtask_tasks (owner, created_at, id);
	CREATE INDEX bgtask_tasks_owner_status ON bgtask_tasks (owner, status);
	CREATE INDEX bgtask_tasks_parent ON bgtask_tasks (parent_task_id) WHERE parent_task_id <> '';
	CREATE INDEX bgtask_tasks_live ON bgtask_tasks (instance) WHERE status IN ('queued', 'running', 'awaiting_input');
	CREATE INDEX bgtask_tasks_terminal ON bgtask_tasks (owner, terminal_at) WHERE terminal_at IS NOT NULL;
	CREATE INDEX bgtask_tasks_aged ON bgtask_tasks (terminal_at) WHERE terminal_at IS NOT NULL;
	CREATE TABLE bgtask_instances (
		id           text PRIMARY KEY,
		heartbeat_at timestamptz NOT NULL,
		started_at   timestamptz NOT NULL,
		state        text NOT NULL
	);
	CREATE TABLE bgtask_notices (
		id           bigserial PRIMARY KEY,
		owner        text NOT NULL,
		event        jsonb NOT NULL,
		created_at   timestamptz NOT NULL DEFAULT now(),
		delivered_at timestamptz
	);
	CREATE INDEX bgtask_notices_pending ON bgtask_notices (owner, id) WHERE delivered_at IS NULL;
	CREATE TABLE bgtask_cancel_requests (
		id           bigserial PRIMARY KEY,
		task_id      text NOT NULL,
		instance     text NOT NULL,
		tree         boolean NOT NULL,
		requested_at timestamptz NOT NULL DEFAULT now(),
		handled_at   timestamptz
	);
	CREATE INDEX bgtask_cancel_pending ON bgtask_cancel_requests (instance, id) WHERE handled_at IS NULL;`,
	// 2: indexes for retention and clean-up, so that no statement needs a
	// scan of a whole table or a planner setting: the count limit reads an
	// owner's terminal rows newest first without a sort, the clean-up
	// finds old notices and cancel requests by age.
	`CREATE INDEX bgtask_tasks_retain ON bgtask_tasks (owner, terminal_at, id) WHERE terminal_at IS NOT NULL;
	DROP INDEX bgtask_tasks_terminal;
	CREATE INDEX bgtask_notices_delivered ON bgtask_notices (delivered_at) WHERE delivered_at IS NOT NULL;
	CREATE INDEX bgtask_cancel_done ON bgtask_cancel_requests ((coalesce(handled_at, requested_at)));`,
	// 3: error kinds, cancel reasons and tags. error_kind is why a failed
	// or interrupted task ended, cancel_reason why a cancelled one was
	// cancelled. Tags are set at insert and never changed; a GIN index
	// serves the tag filter (tags @> ARRAY[tag]). Rows of an older version
	// get neither.
	`ALTER TABLE bgtask_tasks ADD COLUMN error_kind text NOT NULL DEFAULT '';
	ALTER TABLE bgtask_tasks ADD COLUMN cancel_reason text NOT NULL DEFAULT '';
	ALTER TABLE bgtask_tasks ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
	CREATE INDEX bgtask_tasks_tags ON bgtask_tasks USING gin (tags);`,
	// 4: progress on the record and idempotent spawn. progress is the
	// record's Progress as JSON text, NULL for none. idempotency_key
	// is set at insert and never changed; the unique index makes an
	// owner's key name one record at a time across every instance ('' is
	// no key). Rows of an older version get neither.
	`ALTER TABLE bgtask_tasks ADD COLUMN progress text;
	ALTER TABLE bgtask_tasks ADD COLUMN idempotency_key text NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX bgtask_tasks_idempotency ON bgtask_tasks (owner, idempotency_key) WHERE idempotency_key <> '';`,
	// 5 (durable announcements): announced is true once the owner's loop
	// has taken the record's terminal event (store.AnnounceAction). Rows of an
	// older version are not announced, so they are announced once more.
	// bgtask_tasks_unannounced finds an owner's terminal rows to announce.
	`ALTER TABLE bgtask_tasks ADD COLUMN announced boolean NOT NULL DEFAULT false;
	CREATE INDEX bgtask_tasks_unannounced ON bgtask_tasks (owner, created_at, id) WHERE NOT announced AND terminal_at IS NOT NULL;`,
	// 6: every change of a row bumps its version. A Store writes a record
	// it wrote before compared-and-set on the version it wrote, without
	// reading the row; an UPDATE made outside the Store (by hand, by a
	// tool) that leaves the version as it was now changes it too, so the
	// Store reads the row again instead of writing over the change.
	`CREATE FUNCTION bgtask_bump_version() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.version = OLD.version THEN
			NEW.version := OLD.version + 1;
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER bgtask_tasks_version BEFORE UPDATE ON bgtask_tasks
		FOR EACH ROW WHEN (NEW.version = OLD.version) EXECUTE FUNCTION bgtask_bump_version();`,
	// 7: each owner's count of terminal rows, kept by statement triggers
	// on every insert, update and delete of task rows (whoever makes it),
	// so that retention reads the count instead of walking the owner's
	// terminal rows, and walks only the rows it deletes. A trigger locks
	// the counts it changes in owner order. Existing rows are counted.
	`CREATE TABLE bgtask_owner_terminal (
		owner text PRIMARY KEY,
		n     bigint NOT NULL
	);
	INSERT INTO bgtask_owner_terminal (owner, n)
		SELECT owner, count(*) FROM bgtask_tasks WHERE terminal_at IS NOT NULL GROUP BY owner;
	CREATE FUNCTION bgtask_count_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'INSERT' THEN
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, count(*) FROM new_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		ELSIF TG_OP = 'DELETE' THEN
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, -count(*) FROM old_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		ELSE
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, sum(d) FROM (
					SELECT owner, 1 AS d FROM new_rows WHERE terminal_at IS NOT NULL
					UNION ALL SELECT owner, -1 FROM old_rows WHERE terminal_at IS NOT NULL) AS x
				GROUP BY owner HAVING sum(d) <> 0 ORDER BY owner
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		END IF;
		RETURN NULL;
	END $$;
	CREATE TRIGGER bgtask_tasks_count_insert AFTER INSERT ON bgtask_tasks
		REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bgtask_count_terminal();
	CREATE TRIGGER bgtask_tasks_count_update AFTER UPDATE ON bgtask_tasks
		REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION bgtask_count_terminal();
	CREATE TRIGGER bgtask_tasks_count_delete AFTER DELETE ON bgtask_tasks
		REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION bgtask_count_terminal();`,
	// 8: a reaper's notice goes to the nearest live owner up the record's
	// lineage (see route.go), so it names its record apart: task_id is the
	// record's id, task_owner the record's own owner (under which its mark
	// is committed); owner stays the address. to_task marks a notice
	// addressed to a task (a live sub-agent), which every reaper pass walks
	// again; bgtask_notices_to_task finds those. Undelivered notices of an
	// older version get their record's id and owner, and to_task when their
	// owner is a task, so the first reaper pass moves those addressed to a
	// dead sub-agent up to a live owner. Delivered ones keep ''.
	`ALTER TABLE bgtask_notices ADD COLUMN task_id text NOT NULL DEFAULT '';
	ALTER TABLE bgtask_notices ADD COLUMN task_owner text NOT NULL DEFAULT '';
	ALTER TABLE bgtask_notices ADD COLUMN to_task boolean NOT NULL DEFAULT false;
	UPDATE bgtask_notices n SET task_id = coalesce(n.event->>'task_id', ''), task_owner = n.owner,
		to_task = EXISTS (SELECT 1 FROM bgtask_tasks t WHERE t.id = n.owner)
		WHERE n.delivered_at IS NULL;
	CREATE INDEX bgtask_notices_to_task ON bgtask_notices (id) WHERE delivered_at IS NULL AND to_task;`,
	// 9 (a fleet's owner-facing operations): a cancel request carries its
	// reason; requests of an older version have none. A row that becomes
	// terminal or awaiting input (inserted so, or its status changed to
	// it), whoever writes it, notifies bgtask_settled with its id when the
	// transaction commits, so that a Wait on another instance returns
	// (see settle.go). A message (or an answer to an input request) sent
	// to a task that another instance runs is a row of bgtask_messages
	// addressed to that instance (see messages.go): claimed_at once that
	// instance is handing it over, handled_at with the outcome once it did
	// (or the reaper failed it, or its sender withdrew it). An instance's
	// token names the process that registered it last (see instance.go).
	`ALTER TABLE bgtask_cancel_requests ADD COLUMN reason text NOT NULL DEFAULT '';
	CREATE TABLE bgtask_messages (
		id           bigserial PRIMARY KEY,
		task_id      text NOT NULL,
		instance     text NOT NULL,
		owner        text NOT NULL,
		message      jsonb NOT NULL,
		requested_at timestamptz NOT NULL DEFAULT now(),
		claimed_at   timestamptz,
		handled_at   timestamptz,
		message_id   text NOT NULL DEFAULT '',
		err_code     text NOT NULL DEFAULT '',
		err_text     text NOT NULL DEFAULT ''
	);
	CREATE INDEX bgtask_messages_pending ON bgtask_messages (instance, id) WHERE handled_at IS NULL;
	CREATE INDEX bgtask_messages_done ON bgtask_messages ((coalesce(handled_at, requested_at)));
	ALTER TABLE bgtask_instances ADD COLUMN token text NOT NULL DEFAULT '';
	CREATE FUNCTION bgtask_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify('bgtask_settled', NEW.id);
		RETURN NULL;
	END $$;
	CREATE TRIGGER bgtask_tasks_settled_insert AFTER INSERT ON bgtask_tasks
		FOR EACH ROW WHEN (NEW.status NOT IN ('queued', 'running'))
		EXECUTE FUNCTION bgtask_notify_settled();
	CREATE TRIGGER bgtask_tasks_settled_update AFTER UPDATE OF status ON bgtask_tasks
		FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status NOT IN ('queued', 'running'))
		EXECUTE FUNCTION bgtask_notify_settled();`,
	// 10 (a fleet): each owner's one open run across the instances
	// (store.RunLeaser), held by the instance that opened it; a run of an
	// instance that is not alive is free, and the reaper deletes it. The
	// settled notification names the task's owner too (after a space), so
	// an instance wakes its idle receiver of that owner without a read.
	`CREATE TABLE bgtask_runs (
		owner     text PRIMARY KEY,
		run_id    text NOT NULL,
		instance  text NOT NULL,
		opened_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX bgtask_runs_instance ON bgtask_runs (instance);
	CREATE OR REPLACE FUNCTION bgtask_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify('bgtask_settled', NEW.id ||
			CASE WHEN octet_length(NEW.owner) <= 4000 THEN ' ' || NEW.owner ELSE '' END);
		RETURN NULL;
	END $$;`,
	// 11 (a fleet): a run ended without proof that the model heard what it
	// handed out (an aborted run) leaves its row closed, with the ids of
	// those ends (carried) and the token of the process that wrote them,
	// for the owner's next run wherever it opens while that process lives;
	// a stop of the run asked on another instance is recorded on its row
	// (cancel_reason) until the instance that holds it took it.
	`ALTER TABLE bgtask_runs ADD COLUMN open boolean NOT NULL DEFAULT true;
	ALTER TABLE bgtask_runs ADD COLUMN carried text[] NOT NULL DEFAULT '{}';
	ALTER TABLE bgtask_runs ADD COLUMN carried_token text NOT NULL DEFAULT '';
	ALTER TABLE bgtask_runs ADD COLUMN cancel_reason text;
	CREATE INDEX bgtask_runs_cancels ON bgtask_runs (instance) WHERE cancel_reason IS NOT NULL;`,
	// 12: resumable tasks. resume is the record's Resume as JSON (its
	// kind, spec and last checkpoint), NULL for a closure's record.
	// bgtask_tasks_waiting finds the records that wait in the queue for an
	// instance to claim them (queued, no instance), for every owner at
	// once; it holds none of a closure's.
	`ALTER TABLE bgtask_tasks ADD COLUMN resume text;
	CREATE INDEX bgtask_tasks_waiting ON bgtask_tasks (created_at, id) WHERE resume IS NOT NULL AND status = 'queued' AND instance = '';`,
	// 13: several open input requests. input_more is the record's
	// MoreInput as JSON (the open requests after input_id's), NULL while
	// one or none is open. Rows of an older version have none.
	`ALTER TABLE bgtask_tasks ADD COLUMN input_more text;`,
	// 14: the settled notification goes on the channel of the schema of
	// the table (scope.go): bgtask_settled in public, as before, else
	// bgtask_settled_ and 16 hex digits of the schema name's MD5, so a
	// fleet in another schema of the database does not hear it.
	`CREATE OR REPLACE FUNCTION bgtask_notify_settled() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify(CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'bgtask_settled'
				ELSE 'bgtask_settled_' || left(md5(TG_TABLE_SCHEMA::text), 16) END,
			NEW.id || CASE WHEN octet_length(NEW.owner) <= 4000 THEN ' ' || NEW.owner ELSE '' END);
		RETURN NULL;
	END $$;`,
	// 15: the counting trigger of 7 locks the counts in byte order
	// (COLLATE "C"), the order in which a Store admits late arrivals to an
	// open group (lockorder.go), whatever the database's default
	// collation: under en-US, "a" sorted before "B" there and after it in
	// Go, and two transactions took two counts in opposite orders.
	// Replaced in the schema of the tables, as 7 made it; its triggers
	// keep calling it.
	`CREATE OR REPLACE FUNCTION bgtask_count_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF TG_OP = 'INSERT' THEN
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, count(*) FROM new_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner COLLATE "C"
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		ELSIF TG_OP = 'DELETE' THEN
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, -count(*) FROM old_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner COLLATE "C"
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		ELSE
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, sum(d) FROM (
					SELECT owner, 1 AS d FROM new_rows WHERE terminal_at IS NOT NULL
					UNION ALL SELECT owner, -1 FROM old_rows WHERE terminal_at IS NOT NULL) AS x
				GROUP BY owner HAVING sum(d) <> 0 ORDER BY owner COLLATE "C"
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		END IF;
		RETURN NULL;
	END $$;`,
	// 16: a task's output size. output_bytes is how many bytes the task
	// wrote to its output in all (TaskMeta.OutputBytes), set on its
	// terminal record, so that the end's notice that another instance
	// makes from the record says it as the instance that ran the task
	// does. Rows of an older version read 0 (no output known).
	`ALTER TABLE bgtask_tasks ADD COLUMN output_bytes bigint NOT NULL DEFAULT 0;`,
	// 17: bgtask_tasks_owner_status goes. No query needs it: an owner's
	// records, with or without a status filter, are read through
	// bgtask_tasks_owner (owner, created_at, id), in the order they are
	// listed, and the status is checked on the row; the terminal counts
	// are in bgtask_owner_terminal. Every spawn wrote an entry into it and
	// every end another (a row's new version is indexed anew), into the
	// few pages of one owner's duplicates, on the commit path of every
	// task (decision 805; the SQLite store dropped its own in 460).
	`DROP INDEX IF EXISTS bgtask_tasks_owner_status;`,
	// 18: the settled notification (9, 10, 14) is sent by the statement
	// triggers of 7 and 15, once per statement from its rows, instead of
	// by a row trigger that called a function for each row: the same
	// payload on the same channel, for a row inserted with a status other
	// than queued or running and for a row whose status an update changed
	// to one (matched to its old row by id). An insert that makes no row
	// terminal nor settled (every spawn) skips the count's upsert. Both
	// ran in every commit of a task's spawn and end (decision 806).
	`CREATE OR REPLACE FUNCTION bgtask_count_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		ch text := CASE WHEN TG_TABLE_SCHEMA = 'public' THEN 'bgtask_settled'
			ELSE 'bgtask_settled_' || left(md5(TG_TABLE_SCHEMA::text), 16) END;
	BEGIN
		IF TG_OP = 'INSERT' THEN
			IF EXISTS (SELECT 1 FROM new_rows WHERE terminal_at IS NOT NULL OR status NOT IN ('queued', 'running')) THEN
				INSERT INTO bgtask_owner_terminal AS c (owner, n)
					SELECT owner, count(*) FROM new_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner COLLATE "C"
					ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
				PERFORM pg_notify(ch, id || CASE WHEN octet_length(owner) <= 4000 THEN ' ' || owner ELSE '' END)
					FROM new_rows WHERE status NOT IN ('queued', 'running');
			END IF;
		ELSIF TG_OP = 'DELETE' THEN
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, -count(*) FROM old_rows WHERE terminal_at IS NOT NULL GROUP BY owner ORDER BY owner COLLATE "C"
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
		ELSE
			INSERT INTO bgtask_owner_terminal AS c (owner, n)
				SELECT owner, sum(d) FROM (
					SELECT owner, 1 AS d FROM new_rows WHERE terminal_at IS NOT NULL
					UNION ALL SELECT owner, -1 FROM old_rows WHERE terminal_at IS NOT NULL) AS x
				GROUP BY owner HAVING sum(d) <> 0 ORDER BY owner COLLATE "C"
				ON CONFLICT (owner) DO UPDATE SET n = c.n + excluded.n;
			PERFORM pg_notify(ch, n.id || CASE WHEN octet_length(n.owner) <= 4000 THEN ' ' || n.owner ELSE '' END)
				FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
				WHERE n.status IS DISTINCT FROM o.status AND n.status NOT IN ('queued', 'running');
		END IF;
		RETURN NULL;
	END $$;
	DROP TRIGGER IF EXISTS bgtask_tasks_settled_insert ON bgtask_tasks;
	DROP TRIGGER IF EXISTS bgtask_tasks_settled_update ON bgtask_tasks;
	DROP FUNCTION IF EXISTS bgtask_notify_settled();`,
}

// SchemaVersion is the schema version this code migrates databases to.
var SchemaVersion = len(migrations)

// migrate brings the database to SchemaVersion in one transaction, under an
// advisory lock. A database at a newer version is left untouched.
func migrate(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	// The version table is the one thing made before the version is known:
	// a database that has it (any version, newer ones too) is not changed.
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS bgtask_schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	var have int
	err = tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM bgtask_schema_migrations`).Scan(&have)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: read schema version: %w", err)
	}
	if have > SchemaVersion {
		return fmt.Errorf("%w: database is at schema version %d, this code knows versions up to %d; upgrade the code (nothing was changed)", ErrSchemaTooNew, have, SchemaVersion)
	}
	for v := have + 1; v <= SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("pgstore: migrate to version %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bgtask_schema_migrations (version) VALUES ($1)`, v); err != nil {
			return fmt.Errorf("pgstore: migrate to version %d: %w", v, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}
