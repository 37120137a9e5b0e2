// Package pgstore is a store.SharedStore kept in PostgreSQL, so that
// several processes (runtime instances, each with its own bgtask.Manager)
// share one task registry.
//
// Open connects and migrates the schema (tables bgtask_tasks,
// bgtask_instances, bgtask_notices, bgtask_cancel_requests, bgtask_messages
// and bgtask_schema_migrations). Every Commit is one transaction in which the
// shared reducer store.Apply runs on locked rows, and every write is
// a compare-and-set on a version, so the lifecycle invariants hold across
// processes. Commits made at the same time, by any owners, share one
// transaction (each caller still gets its own result), and a commit that
// only adds new running or queued records is a single statement.
//
// Start registers a Manager's runtime instance and runs, until Close:
//
//   - a heartbeat that stamps the instance's row with the database clock
//     every heartbeat interval;
//   - a reaper that declares dead every instance whose heartbeat is older
//     than the grace period, turns its non-terminal tasks interrupted (on a
//     new attempt, so a late write of the dead instance changes nothing),
//     and records one EventInterrupted notice per task, which an agent
//     loop claims with TakeNotices. The notice goes to the nearest live
//     owner up the task's lineage: the task's owner, or, when that owner is
//     a sub-agent that ended or died, the sub-agent's owner, and so on up
//     (see Store.Reap). A notice row keeps the record's id (task_id) and
//     the record's own owner (task_owner) beside the owner it is addressed
//     to (owner);
//   - a listener (LISTEN on a dedicated connection, reconnecting with
//     backoff) and a poller that carry cancel requests made on any instance
//     (Manager.Cancel of a task run elsewhere calls RequestCancel, with its
//     reason) and messages (Manager.Send to such a task calls SendMessage:
//     see messages.go) to the Manager that runs the task; the listener
//     also hears of every record that became terminal or awaiting input
//     (OnSettled), so that a Wait on another instance returns and an idle
//     Receiver wakes; after every (re)connect, and every poll interval
//     while it does not listen, the Store reads what settled since its
//     last position (see catchup.go), so no end is missed for good.
//
// The listening connection holds a lock on the instance id while the
// process lives: Start refuses an id another live process runs
// (ErrInstanceRunning).
//
// The heartbeat, the reaper, the cancel poller and the age limit's deletes
// use a small pool of their own, and the listener its own connection, so
// commit traffic never delays them, nor they it.
//
// An instance whose last successful heartbeat is older than nine tenths of
// the grace period (by its own clock, checked before every write), or that
// finds itself declared dead (checked in the transaction of every write),
// stops writing (Commit returns ErrInstanceLost) and cancels its tasks with
// cause bgtask.ErrInstanceLost. No statement depends on the server's
// planner or JIT settings: each is served by an index.
//
// [OpenReadOnly] opens the database for an operator's tool (cmd/bgtask):
// it reads every owner's tasks on read-only connections, never migrates,
// registers no instance, and writes nothing but a cancel request.
package pgstore
