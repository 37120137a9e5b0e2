// Package sqlitestore is a durable [store.Store] in one SQLite file, for
// an agent runtime that is one process: task metadata survives a restart or
// a crash, and [bgtask.Manager.Restore] then turns what the dead process left
// running into interrupted records, with an event each.
//
//	st, err := sqlitestore.Open(ctx, "tasks.db")
//	...
//	defer st.Close() // after the Manager's Shutdown
//	m, err := bgtask.New(bgtask.WithStore(st))
//
// It uses modernc.org/sqlite (pure Go, no cgo).
//
// # Schema
//
// A row per task in table tasks, with a column per TaskMeta field (the
// result as JSON text, times as UTC microseconds), indexed by owner and
// the order its records became terminal (live records first), by parent
// task and by the time records became terminal. The
// schema version is PRAGMA user_version; Open applies the missing
// migrations in one transaction and refuses a database written by a newer
// version (ErrSchemaTooNew) without touching it.
//
// # Writes
//
// The database runs in WAL mode. One writer goroutine, owned by the Store
// and stopped by Close, takes every Commit call queued while the previous
// transaction ran (at most WithMaxBatch, optionally waiting WithBatchDelay
// for more) and writes them in one transaction, each under its own
// savepoint, so a burst of spawns and completions costs one transaction and
// each caller still gets its own outcome. Inside the transaction the
// writer reads the rows the actions touch (all of the owner's for
// ReplaceAll), reduces them with [store.Apply], and writes back only
// the rows that changed: the lifecycle invariants are the reducer's, as in
// every store. Retention (WithRetainPerOwner, WithRetainFor) runs in the
// same transaction. A change to a row the writer knows sets only the columns a record's life
// changes, so that its identity columns' indexes are left as they are.
//
// # Durability
//
// synchronous=NORMAL by default: a committed record survives the process
// being killed at any moment, and the database is never corrupted; a power
// loss may lose the last transactions. WithFullSync makes every
// transaction reach the disk before Commit returns.
//
// # Operators
//
// [OpenReadOnly] opens the file for an operator's tool (cmd/bgtask) while
// the application runs: it reads every owner's tasks and never migrates or
// writes, except a cancel request. The application carries such requests
// out once it has called [Store.Start] with its Manager.
//
// # Several processes on one file
//
// Several processes may open one file, each with its own Manager (an
// overlapping restart, or a second process serving the same threads), and
// none touches what a live process holds. Recovery at open, and Recover,
// interrupt records only when no other Store has the file open (Recover
// returns ErrShared otherwise). [bgtask.Manager.Restore] (a Plugin's
// RunStart) interrupts a record of another runtime instance only once that
// instance is gone ([Store.InstanceAlive]). A cancel request is consumed
// only by the process whose Manager runs its task.
//
// Processes tell each other apart by flock locks on files next to the
// database: every open Store holds <db>.lock shared; one that tries to
// hold it exclusive first takes <db>.lock.upgrade, so that no other tries
// meanwhile; and every Store holds, shared, a file per runtime instance
// that committed live records through it, in the directory <db>.instances.
// The kernel lets a dead process's locks go, however it died. Where flock
// is not available (not unix, or a network file system without it),
// processes cannot tell each other apart: open the file from one process
// at a time. Give each process its own instance id (the default is
// random): two processes with one id take each other's records for
// their own.
//
// It is still not a [store.SharedStore]: a Manager cancels and waits for
// only the tasks it runs itself, and the records a process that died left
// running, while others stay open, are interrupted by each owner's next
// Restore.
//
// # Corrupt data
//
// A row the code cannot read (an unknown status, a result that is not
// JSON) is reported as an error matching [bgtype.ErrCorrupt] that names the
// task; other tasks are read as usual.
package sqlitestore
