// Package memstore is the in-memory Store, the default of a bgtask
// Manager (bgtask.New with no WithStore). It is internal because the
// runtime shares its records: a running Task holds the very record the
// store keeps (Rec), and the runtime commits a task's end on it directly
// (CommitOne, CommitEdit) without copying the record through the Store
// interface. A host configures it with bgtask.WithRetention.
//
// Records are kept compact (Rec: the fields most records use inline, the
// identity and rare parts behind pointers, shared between copies), in
// shards locked one at a time, with a terminal index that forgets the
// oldest finished records first under the retention policy. The
// performance notes are in docs/internals.md ("The in-memory store").
package memstore
