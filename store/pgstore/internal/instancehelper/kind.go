package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bgtask/bgtask"
)

// The resumable kind of the crash tests (-kinds): steps/v1 runs Steps
// steps from its checkpoint. Each step inserts a row into the test's
// kind_effects table (task, step, attempt, instance), then saves the next
// step as its checkpoint. Each attempt's function is listed in
// kind_running while it runs, and the count it saw at its start is added
// to kind_peak, so the test reads how many ran at once across processes.
// The test creates the three tables.
//
// In a process started with -hold, an attempt holds after step HoldAt's
// checkpoint ("held <id>"), ignoring its context as a paused process
// would, until the release command; then it saves a checkpoint again,
// prints "zombie <id> <the Save's error or ok>" and returns
// "zombie's result".

type stepsSpec struct {
	Steps  int `json:"steps"`
	HoldAt int `json:"hold_at,omitempty"`
}

type stepsCursor struct {
	Next int `json:"next"`
}

// kindHost is the kind's state in this process.
type kindHost struct {
	db       *pgxpool.Pool
	instance string
	hold     bool
	release  chan struct{} // closed by the release command
	once     sync.Once
	out      *sync.Mutex // one line at a time on stdout
}

func (h *kindHost) kind(maxRunning int) (*bgtask.Kind[stepsSpec, stepsCursor], error) {
	return bgtask.NewKind("steps/v1", h.run, bgtask.KindConfig{MaxRunning: maxRunning})
}

func (h *kindHost) println(a ...any) {
	h.out.Lock()
	defer h.out.Unlock()
	fmt.Println(a...)
}

func (h *kindHost) run(ctx context.Context, tk *bgtask.Task, spec stepsSpec, cp *bgtask.Checkpoint[stepsCursor]) (any, error) {
	bg := context.WithoutCancel(ctx) // the test's tables are written whatever the task's context
	if _, err := h.db.Exec(bg, `INSERT INTO kind_running (task_id, attempt, instance) VALUES ($1, $2, $3)`, tk.ID(), tk.Attempt(), h.instance); err != nil {
		return nil, err
	}
	if _, err := h.db.Exec(bg, `INSERT INTO kind_peak (n) SELECT count(*) FROM kind_running`); err != nil {
		return nil, err
	}
	defer h.db.Exec(bg, `DELETE FROM kind_running WHERE task_id = $1 AND attempt = $2`, tk.ID(), tk.Attempt())
	last, _ := cp.Last()
	for step := max(last.Next, 1); step <= spec.Steps; step++ {
		if _, err := h.db.Exec(bg, `INSERT INTO kind_effects (task_id, step, attempt, instance) VALUES ($1, $2, $3, $4)`, tk.ID(), step, tk.Attempt(), h.instance); err != nil {
			return nil, err
		}
		if err := cp.Save(ctx, stepsCursor{Next: step + 1}); err != nil {
			return nil, err
		}
		if h.hold && step == spec.HoldAt {
			h.println("held", tk.ID())
			<-h.release
			err := cp.Save(bg, stepsCursor{Next: 99})
			res := "ok"
			if err != nil {
				res = err.Error()
			}
			h.println("zombie", tk.ID(), res)
			return "zombie's result", nil
		}
	}
	return spec.Steps, nil
}
