// Package store is the interface between the bgtask runtime and the stores
// that keep task records: what a store author implements and calls.
//
// A [Store] persists the metadata of every owner's tasks. It changes
// records only through [Apply], the one reducer of the task state, inside
// one atomic commit, and checks every commit with [ValidateCommit] first,
// so every store keeps the same lifecycle invariants and refuses the same
// input with the same error. The actions a commit carries are built with
// [UpsertAction], [ReplaceAllAction], [RemoveAction] and [AnnounceAction].
// A host that checkpoints its agent's state itself can keep a [Snapshot]
// under [TaskStateKey] and reduce it with the same function.
//
// Optional interfaces ([SharedStore], [OrphanInterrupter], [TagLister],
// [UndeliveredLister], [PendingOwnerFinder], [InstanceLiveness],
// [InstanceOwnerLister]) let a store answer with an index what the runtime
// would otherwise compute from [Store.List]; [ChangeNotifier] and
// [MessageCarrier] let a Wait, a message or an answer reach a task that
// another instance runs, and [OutputCarrier] a read of its output. A store that carries out requests of other
// processes (cancel requests, messages, a lost registration) takes
// a [Runtime] (a *bgtask.Manager is one) in its own Start method, so that
// it imports this package and not the runtime.
//
// The record types live in package bgtype; the conformance suite every
// store must pass is package storetest. The in-memory store is the
// runtime's default; store/sqlitestore (one file, one or several
// processes) and store/pgstore (PostgreSQL, a cluster) are the durable
// ones.
package store
