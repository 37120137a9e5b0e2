package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
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
func rank(s bgtype.Status) int {
	switch {
	case s == bgtype.StatusQueued:
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
func concWrite(base bgtype.TaskMeta, g, r, rounds int) (u bgtype.TaskMeta, terminal bool) {
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
		u.Status = bgtype.StatusAwaitingInput
		u.Input = &bgtype.InputRequest{ID: fmt.Sprintf("req-%d-%d", g, r), Prompt: "?"}
	case r != end:
		u.Status = bgtype.StatusRunning
	default:
		terminal = true
		u.FinishedAt = at(200 + g)
		u.Description = fmt.Sprintf("writer %d ends", g)
		switch g % 4 {
		case 0:
			u.Status = bgtype.StatusCompleted
			u.Result = json.RawMessage(fmt.Sprintf(`{"writer":%d}`, g))
		case 1:
			u.Status, u.Error, u.Stack = bgtype.StatusFailed, fmt.Sprintf("writer %d failed", g), fmt.Sprintf("stack %d", g)
		case 2:
			u.Status, u.Error = bgtype.StatusCanceled, fmt.Sprintf("writer %d cancelled", g)
		case 3:
			u.Status, u.Error = bgtype.StatusInterrupted, fmt.Sprintf("writer %d interrupted", g)
		}
	}
	return u, terminal
}

// testConcurrentWriters runs concWriters goroutines that commit updates of
// the same tasks at once, each reading the task back after each commit.
// No reader may see less than any reader saw before its commit began: the
// status and attempt never go back, a terminal record never changes and
// StartedAt is stamped once. In the end each task must hold exactly one
// writer's terminal update, unmixed.
func testConcurrentWriters(t *testing.T, c Config) {
	s := c.New(t)
	const owner = "owner-conc"
	rounds := concRounds
	if testing.Short() {
		rounds = concShort
	}
	bases := make([]bgtype.TaskMeta, concTasks)
	for i := range bases {
		bases[i] = bgtype.TaskMeta{
			ID: fmt.Sprintf("task_conc_%d", i), Owner: owner, Type: "tool", Name: fmt.Sprintf("conc-%d", i),
			Status: bgtype.StatusQueued, CreatedAt: at(i), Parent: bgtype.Parent{RunID: "run_conc"}, Attempt: 1,
		}
		commit(t, s, owner, store.UpsertAction(bases[i]))
	}

	seens := make([]seen, len(bases))
	var wg sync.WaitGroup
	for g := range concWriters {
		wg.Go(func() { concWriter(t, s, owner, bases, seens, g, rounds) })
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

// seen is what any writer has read of one task so far. A linearizable
// store must show every later reader at least as much: an observation made
// before a Commit begins happened before it.
type seen struct {
	mu sync.Mutex // guards st
	st seenState
}

type seenState struct {
	rank     int              // highest status rank read
	attempt  int64            // highest attempt read
	started  bgtype.TaskMeta  // the first record read with a StartedAt
	terminal *bgtype.TaskMeta // the terminal record, once read
}

func (s *seen) get() seenState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *seen) add(m bgtype.TaskMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.st
	st.rank, st.attempt = max(st.rank, rank(m.Status)), max(st.attempt, m.Attempt)
	if st.started.StartedAt.IsZero() {
		st.started = m
	}
	if st.terminal == nil && m.Status.IsTerminal() {
		st.terminal = &m
	}
}

// concWriter is writer g: for each round and task, commit an update, then
// check the record read back against what every writer read before.
func concWriter(t *testing.T, s store.Store, owner string, bases []bgtype.TaskMeta, seens []seen, g, rounds int) {
	for r := range rounds {
		for i, base := range bases {
			u, _ := concWrite(base, g, r, rounds)
			before := seens[i].get()
			if err := s.Commit(t.Context(), owner, store.UpsertAction(u)); err != nil {
				t.Errorf("writer %d: Commit(%s %s): %v", g, u.ID, u.Status, err)
				return
			}
			got, err := s.Get(t.Context(), u.ID)
			if err != nil {
				t.Errorf("writer %d: Get(%s): %v", g, u.ID, err)
				return
			}
			if msg := concCheck(before, got, u); msg != "" {
				t.Errorf("writer %d round %d, %s: %s", g, r, u.ID, msg)
				return
			}
			seens[i].add(got)
		}
	}
}

// concCheck compares the record read after committing u with what the
// writers had read before the commit began.
func concCheck(before seenState, got, u bgtype.TaskMeta) string {
	switch {
	case before.terminal != nil:
		if d := diffMeta(*before.terminal, got); d != "" {
			return "terminal record changed:\n" + d
		}
		return ""
	case rank(got.Status) < before.rank:
		return fmt.Sprintf("status went back to %s after a reader saw rank %d", got.Status, before.rank)
	case got.Attempt < before.attempt:
		return fmt.Sprintf("attempt went back to %d after a reader saw %d", got.Attempt, before.attempt)
	case !before.started.StartedAt.IsZero() && !got.StartedAt.Equal(before.started.StartedAt):
		return fmt.Sprintf("StartedAt stamped twice: %s (%q) then %s (%q)", fmtTime(before.started.StartedAt),
			before.started.Description, fmtTime(got.StartedAt), got.Description)
	case got.StartedAt.IsZero():
		return "StartedAt not stamped by a write that set it"
	case got.Attempt == u.Attempt && rank(got.Status) < rank(u.Status):
		return fmt.Sprintf("a %s update on the stored attempt %d left the status %s", u.Status, u.Attempt, got.Status)
	case got.Attempt < u.Attempt && !got.Status.IsTerminal():
		return fmt.Sprintf("an update on attempt %d was dropped while the stored attempt %d is not terminal (%s)", u.Attempt, got.Attempt, got.Status)
	case !got.Status.IsTerminal() && got.Status != bgtype.StatusAwaitingInput && got.Input != nil:
		return fmt.Sprintf("input request kept in status %s", got.Status)
	}
	return ""
}
