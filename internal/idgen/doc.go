// Package idgen makes the runtime's ids: a prefix ("task_", "input_",
// "msg_", "inst_") and the 32 hex digits of a UUIDv7, unique across
// processes and sortable by creation time.
//
// Performance: an id costs one allocation (the string) and no system
// call: the digits are built in an array on the caller's stack, the time
// comes from the caller (a task's id reuses the wall-clock reading of its
// creation time), and the random bits come from math/rand/v2's per-thread
// generator. The sequence is one atomic compare-and-swap. In the CPU
// profile of BenchmarkSpawnComplete the task id is about 4% of a spawn
// (docs/internals.md, "Where a short task's time goes now").
package idgen
