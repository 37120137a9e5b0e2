package bgtask

import (
	"context"
	"runtime/pprof"

	"github.com/bgtask/bgtask/internal/stackgrow"
	"github.com/bgtask/bgtask/internal/workpool"
)

// start runs t on an idle worker of m's pool, or on a new goroutine when
// none waits (internal/workpool). t's m.wg count was taken when it
// registered.
func (m *Manager) start(t *Task) {
	if !m.workers.Hand(t) {
		go m.work(t)
	}
}

// work is a worker goroutine: it runs t, then parks for the next task
// until the pool tells it to exit. A task function that calls
// runtime.Goexit ends the worker (its end is still recorded: run defers
// it). Each task runs with the profiler labels of its spawn's context, not
// those the goroutine carried before, and a parked worker carries none.
func (m *Manager) work(t *Task) {
	defer m.workers.Done()
	var w *workpool.Worker[Task]
	small := true // on the stack the goroutine started with (endSmall)
	for t != nil {
		// The spawner's context: the labels t's own layers pass through
		// unchanged, found without walking them (cold in a burst).
		pprof.SetGoroutineLabels(t.vals.parent)
		m.run(t, small)
		pprof.SetGoroutineLabels(context.Background())
		if t = m.workers.Park(&w); t != nil && small {
			stackgrow.Grow() // a reused worker records its tasks' ends (recordOne): grown here, while shallow
			small = false
		}
	}
}
