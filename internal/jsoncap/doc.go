// Package jsoncap encodes the values tasks hand to the runtime (results,
// event payloads) as JSON, and caps texts and JSON values at a byte limit
// with a marker that says how long they were.
//
// Performance: [Encode] is on every task's path (its result) and every
// event's. A json.RawMessage, nil, a bool, an int, an int64, an integral
// float64 below 1e15 and a string that needs no escaping are written
// without reflection, with exactly the bytes json.Marshal gives (the tests
// compare them); everything else goes through json.Marshal. Nothing is
// encoded twice: the caller caps the bytes Encode returned with [JSON],
// which returns them as they are when they fit. [CutRunes] inlines at its
// call sites; [Text] allocates only when it cuts.
package jsoncap
