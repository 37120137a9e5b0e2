// Package workpool keeps the goroutines of finished tasks for the next
// ones: a finished task's goroutine parks as an idle worker instead of
// exiting, and the next spawn hands its task to it.
//
// Performance: a reused goroutine's stack is already grown, so a short
// task pays no runtime.newstack and no runtime.newproc, no goroutine
// closure to allocate and no goexit. In the CPU profile of
// BenchmarkSpawnComplete, newstack (12% before the pool) and newproc (5%)
// are gone; the hand-off (a channel send to a parked receiver) is about
// 4% and parking 3.5%. [Pool.Hand]'s test for a parked worker is one
// atomic load; only when a worker seems parked does it take the pool's
// lock. Hand and Park are not inlined (sync.WaitGroup.Add alone is over
// the inliner's budget), so the spawn path makes one direct call more
// than when the pool lived in the root package: Pool is generic over the
// item, instantiated with the runtime's Task, so no function value or
// interface call is on the path.
//
// Bursts: with thousands of ends at once, a lock that every end waits for
// forms a convoy, so a finished goroutine that finds the lock taken waits
// for it only when no other one does (else it exits), and a hand-off that
// sees no parked worker starts a goroutine without the lock.
//
// Bounds: at most [Pool.SetMax] workers park (GOMAXPROCS x 4 with
// [DefaultMax]); a worker that finds the list full exits. One timer per
// pool, armed only while a worker is parked, ends workers parked for more
// than one [IdleTimeout] (1 s), so an idle pool goes back to no goroutine
// within two seconds. [Pool.Shut] tells every parked worker to exit and
// [Pool.Close] waits for all of them. A parked worker keeps no item; what
// else a worker carries (profiler labels, context values) is its caller's
// to clear before it parks. docs/internals.md ("Idle workers" and "The
// ends of a burst") has the measurements.
package workpool
