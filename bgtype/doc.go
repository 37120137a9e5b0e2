// Package bgtype holds the types that both sides of bgtask share: the
// runtime (package bgtask), which an agent builder uses, and the stores
// (package store and its implementations), which keep task records.
//
// A [TaskMeta] is the persisted record of one task: metadata only (status,
// result, error, times, lineage), never the function. Its [Status] only
// moves forward. An [Event] is what a task reports to its owner's inbox;
// its JSON form is what the model sees. The other types are the fields of
// these two.
//
// Every type here is a plain value: safe to copy, with no goroutines and
// no locks. Decoding (UnmarshalJSON) rejects a record or event no code could
// handle with an error matching [ErrCorrupt] or [ErrInvalidEvent], and never
// panics.
package bgtype
