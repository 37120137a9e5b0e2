package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
)

// Sizes of ConcurrentWriters: writers × rounds commits per task, each
// followed by a Get. -short runs fewer rounds.
const (
	concWriters = 8
	concTasks   = 3
	concRounds  = 24
	concShort   = 6
)

// rank orders statuses as the reducer does: queued, then running and
// awaiting_input, then the terminal statuses.
func rank(s bgtask.TaskStatus) int {
	switch {
	case s == bgtask.StatusQueued:
		return 0
	case s.IsTerminal():
		return 2
	}
	return 1
}

// concWrite returns writer g's update of task id in round r. Each writer
// writes non-terminal updates, one terminal update in round end(g), and
// more non-terminal updates after it (which must be dropped once any
// terminal one landed). Writers 3 and 7 write on attempt 2, as a reaper or
// a restarted process would, so attempt-1 updates after theirs are fenced
// off. Every field that may change names the writer, so a record that
// mixes two writes is detected.
func concWrite(base bgtask.TaskMeta, g, r, rounds int) (u bgtask.TaskMeta, terminal bool) {
	u = base
	u.Instance = fmt.Sprintf("inst-%d", g)
	u.StartedAt = at(100 + g)
	u.Description = fmt.Sprintf("writer %d round %d", g, r)
	if g%4 == 3 {
		u.Attempt = 2
	}
	end := rounds/2 + g%(rounds/2)
	switch {
	case r != end && r%3 == 2:
		u.Status = bgtask.StatusAwaitingInput
		u.Input = &bgtask.InputRequest{ID: fmt.Sprintf("req-%d-%d", g, r), Prompt: "?"}
	case r != end:
		u.Status = bgtask.StatusRunning
	default:
		terminal = true
		u.FinishedAt = at(200 + g)
		u.Description = fmt.Sprintf("writer %d ends", g)
		switch g % 4 {
		case 0:
			u.Status = bgtask.StatusCompleted
			u.Result = json.RawMessage(fmt.Sprintf(`{"writer":%d}`, g))
		case 1:
			u.Status, u.Error, u.Stack = bgtask.StatusFailed, fmt.Sprintf("writer %d failed", g), fmt.Sprintf("stack %d", g)
		case 2:
			u.Status, u.Error = bgtask.StatusCancelled, fmt.Sprintf("writer %d cancelled", g)
		case 3:
			u.Status, u.Error = bgtask.StatusInterrupted, fmt.Sprintf("writer %d interrupted", g)
		}
	}
	return u, terminal
}

// testConcurrentWriters runs concWriters goroutines that commit updates of
// the same tasks at once, each reading the task back after each commit.
// Every reader must see the status and attempt never go back, a terminal
// record never change and StartedAt stamped once; in the end each task
// must hold exactly one writer's terminal update, unmixed.
func testConcurrentWriters(t *testing.T, c Config) {
	s := c.New(t)
	const owner = "owner-conc"
	rounds := concRounds
	if testing.Short() {
		rounds = concShort
	}
	bases := make([]bgtask.TaskMeta, concTasks)
	for i := range bases {
		bases[i] = bgtask.TaskMeta{
			ID: fmt.Sprintf("task_conc_%d", i), Owner: owner, Type: "tool", Name: fmt.Sprintf("conc-%d", i),
			Status: bgtask.StatusQueued, CreatedAt: at(i), Parent: bgtask.Parent{RunID: "run_conc"}, Attempt: 1,
		}
		commit(t, s, owner, bgtask.Upsert(bases[i]))
	}

	var wg sync.WaitGroup
	for g := range concWriters {
		wg.Go(func() { concWriter(t, s, owner, bases, g, rounds) })
	}
	wg.Wait()

	for _, base := range bases {
		final := get(t, s, base.ID)
		if !final.Status.IsTerminal() {
			t.Errorf("%s ends %s, want terminal (every writer wrote a terminal update)", base.ID, final.Status)
			continue
		}
		var diffs []string
		matched := false
		for g := range concWriters {
			for r := range rounds {
				u, terminal := concWrite(base, g, r, rounds)
				if !terminal {
					continue
				}
				want := u
				want.StartedAt = final.StartedAt // stamped by whichever write came first; checked by the writers
				if d := diffMeta(want, final); d == "" {
					matched = true
				} else if u.Status == final.Status && u.Instance == final.Instance {
					diffs = append(diffs, d)
				}
			}
		}
		if !matched {
			t.Errorf("%s ends as no writer's terminal update (a mix of writes?): %+v\nclosest:\n%v", base.ID, final, diffs)
		}
		if final.StartedAt.Before(at(100)) || final.StartedAt.After(at(100+concWriters-1)) {
			t.Errorf("%s StartedAt = %s, want one a writer wrote", base.ID, fmtTime(final.StartedAt))
		}
	}
}

// concWriter is writer g: for each round and task, commit an update, then
// check the record read back against what this writer saw before.
func concWriter(t *testing.T, s bgtask.Store, owner string, bases []bgtask.TaskMeta, g, rounds int) {
	seen := make([]bgtask.TaskMeta, len(bases)) // last record read per task
	for r := range rounds {
		for i, base := range bases {
			u, _ := concWrite(base, g, r, rounds)
			if err := s.Commit(t.Context(), owner, bgtask.Upsert(u)); err != nil {
				t.Errorf("writer %d: Commit(%s %s): %v", g, u.ID, u.Status, err)
				return
			}
			got, err := s.Get(t.Context(), u.ID)
			if err != nil {
				t.Errorf("writer %d: Get(%s): %v", g, u.ID, err)
				return
			}
			if msg := concCheck(seen[i], got, u); msg != "" {
				t.Errorf("writer %d round %d, %s: %s", g, r, u.ID, msg)
				return
			}
			seen[i] = got
		}
	}
}

// concCheck compares the record read after committing u with the one the
// same goroutine read before (prev, zero at first).
func concCheck(prev, got, u bgtask.TaskMeta) string {
	switch {
	case prev.Status.IsTerminal():
		if d := diffMeta(prev, got); d != "" {
			return "terminal record changed:\n" + d
		}
		return ""
	case rank(got.Status) < rank(prev.Status):
		return fmt.Sprintf("status went back from %s to %s", prev.Status, got.Status)
	case got.Attempt < prev.Attempt:
		return fmt.Sprintf("attempt went back from %d to %d", prev.Attempt, got.Attempt)
	case !prev.StartedAt.IsZero() && !got.StartedAt.Equal(prev.StartedAt):
		return fmt.Sprintf("StartedAt stamped twice: %s then %s", fmtTime(prev.StartedAt), fmtTime(got.StartedAt))
	case got.StartedAt.IsZero():
		return "StartedAt not stamped by a write that set it"
	case got.Attempt == u.Attempt && rank(got.Status) < rank(u.Status):
		return fmt.Sprintf("a %s update on the stored attempt %d left the status %s", u.Status, u.Attempt, got.Status)
	case got.Attempt < u.Attempt && !got.Status.IsTerminal():
		return fmt.Sprintf("an update on attempt %d was dropped while the stored attempt %d is not terminal (%s)", u.Attempt, got.Attempt, got.Status)
	case !got.Status.IsTerminal() && got.Status != bgtask.StatusAwaitingInput && got.Input != nil:
		return fmt.Sprintf("input request kept in status %s", got.Status)
	}
	return ""
}
