// Package stackgrow grows a goroutine's stack on purpose, at a shallow
// point, so that the runtime does not grow it later under many frames.
//
// Why: a task's goroutine starts with the runtime's smallest stack, which
// is enough to park in the task function. Recording the end (commit,
// reducer, inbox send) needs more. If the runtime grows the stack deep
// inside the commit path, it copies and re-adjusts a dozen frames; growing
// it at the bottom of the end copies three. [Grow] does that, with a 1 KiB
// frame the compiler cannot drop, both functions marked go:noinline so the
// frame is really there. Measured: the late growth was a third of a short
// task's cost; with Grow the growth (runtime.newstack) is 12-13% of a
// spawn in the CPU profile of BenchmarkSpawnComplete, without it 17-19%.
// A goroutine reused by the worker pool already has its grown stack, so
// there Grow costs a 1 KiB clear and no growth.
//
// The other half is the caller's: the frames below a task function must
// stay small, or the first stack overflows before the function even
// parks. docs/internals.md ("The task goroutine's stack") has the
// measurements.
package stackgrow
