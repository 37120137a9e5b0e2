package crashloop

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
)

// ProcLog is one process's log, read back after it exited.
type ProcLog struct {
	Name   string
	Lines  []string
	Killed bool // by SIGKILL: its last batches may be cut
}

// Task names a record in a verdict.
type Task struct {
	ID   string
	Kind string // KindPlain, KindSubAgent or KindChild
	N    int    // how many times it was handed out
	// Ended is, for a record overwritten, the status its live process
	// committed and the record's.
	Ended string
	// Parent is a child's sub-agent.
	Parent string
	// Status is the record's, at the end.
	Status bgtype.Status
}

// String names the task, its kind, and how many times it was handed out
// (when more than once) or how it was overwritten.
func (t Task) String() string {
	switch {
	case t.Ended != "":
		return fmt.Sprintf("%s (%s) %s", t.ID, t.Kind, t.Ended)
	case t.N > 1:
		return fmt.Sprintf("%s (%s) x%d", t.ID, t.Kind, t.N)
	}
	return fmt.Sprintf("%s (%s)", t.ID, t.Kind)
}

// Verdict is what Judge found.
type Verdict struct {
	Kinds     map[string]int // records by kind
	Took      int            // terminal events handed out, in all (heard or not)
	Left      int            // sub-agents that ended with children running ("left" lines)
	Premarked int            // marks committed outside a step ("mark" lines)
	MarkFails int            // step mark commits that failed ("markfail" lines)
	InFlight  []Task         // handed out, its proving mark cut by a kill mid-commit, marked: allowed

	Lost     []Task // ended, never heard, not in a commit cut by a kill
	Doubled  []Task // heard more than once
	Unmarked []Task // heard once, but not marked: a restart announces it again
	Live     []Task // not ended once every process is done
	// Overwritten records end with another status than the one the
	// process that ran them committed: another process ended them while
	// their own was alive.
	Overwritten []Task
}

// Err lists every problem of v, or returns nil.
func (v Verdict) Err() error {
	var errs []error
	for _, p := range []struct {
		what  string
		tasks []Task
	}{
		{"lost (ended, never heard by the model, not in a commit cut by a kill)", v.Lost},
		{"doubled (heard by the model more than once)", v.Doubled},
		{"heard but never marked announced (a restart announces them again)", v.Unmarked},
		{"not ended after the last process", v.Live},
		{"ended by another process while their own was alive (status committed by their process, then the record's)", v.Overwritten},
	} {
		if len(p.tasks) > 0 {
			names := make([]string, len(p.tasks))
			for i, t := range p.tasks {
				names[i] = t.String()
			}
			errs = append(errs, fmt.Errorf("%d %s: %s", len(p.tasks), p.what, strings.Join(names, ", ")))
		}
	}
	return errors.Join(errs...)
}

// Summary is one line of counts.
func (v Verdict) Summary() string {
	return fmt.Sprintf("%d plain, %d sub-agents (%d left children running), %d children; %d handed out, %d in flight at a kill, %d marked outside a step, %d marks failed; lost %d, doubled %d, unmarked %d, live %d, overwritten %d",
		v.Kinds[KindPlain], v.Kinds[KindSubAgent], v.Left, v.Kinds[KindChild], v.Took, len(v.InFlight), v.Premarked, v.MarkFails,
		len(v.Lost), len(v.Doubled), len(v.Unmarked), len(v.Live), len(v.Overwritten))
}

// KindOf names what a record of owner's tree is.
func KindOf(owner string, m *bgtype.TaskMeta) string {
	switch {
	case m.Owner != owner:
		return KindChild
	case m.Type == bgtype.TypeSubAgent:
		return KindSubAgent
	}
	return KindPlain
}

// Judge checks the records of owner's tree, once every process is done,
// against the logs of every process: each record that ended was heard by
// the model exactly once (see heardIn), except a record whose proof a kill
// cut mid-commit (a "taking" line with neither "marked" nor "markfail"
// after it, in a killed process, and the record marked); each heard one
// is marked announced; none is left live; and each ends with the status
// its own process committed, if it committed one ("ended" lines).
func Judge(owner string, records []bgtype.TaskMeta, logs []ProcLog) Verdict {
	heard := map[string]int{}
	ended := map[string][]string{}
	inFlight := map[string]bool{}
	v := Verdict{Kinds: map[string]int{}}
	for _, pl := range logs {
		h, cut := heardIn(pl, &v)
		for id, n := range h {
			heard[id] += n
		}
		for id := range cut {
			inFlight[id] = true
		}
		for _, line := range pl.Lines {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "ended" {
				ended[f[1]] = append(ended[f[1]], f[2])
			}
		}
	}
	for i := range records {
		m := &records[i]
		t := Task{ID: m.ID, Kind: KindOf(owner, m), N: heard[m.ID], Status: m.Status}
		if t.Kind == KindChild {
			t.Parent = m.Owner
		}
		v.Kinds[t.Kind]++
		for _, st := range ended[m.ID] {
			if st != string(m.Status) {
				o := t
				o.Ended = st + " then " + string(m.Status)
				v.Overwritten = append(v.Overwritten, o)
				break
			}
		}
		switch {
		case !m.Status.IsTerminal():
			v.Live = append(v.Live, t)
		case m.Wake == bgtype.WakeSilent:
		case t.N > 1:
			v.Doubled = append(v.Doubled, t)
		case t.N == 1 && !m.Announced:
			v.Unmarked = append(v.Unmarked, t)
		case t.N == 0 && inFlight[m.ID] && m.Announced:
			v.InFlight = append(v.InFlight, t)
		case t.N == 0:
			v.Lost = append(v.Lost, t)
		}
	}
	for _, s := range []*[]Task{&v.InFlight, &v.Lost, &v.Doubled, &v.Unmarked, &v.Live, &v.Overwritten} {
		slices.SortFunc(*s, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	}
	return v
}

// heardIn counts, in one process's log, how many times the model heard
// each task's end: a "took" line (handed to a model call) counts once a
// later mark of the same id committed, which the loop commits only once a
// later boundary proved the model answered (a "taking" line of a step
// whose "marked" line follows, or a "mark" line). A hand-out no mark
// followed was not heard: the model call never completed, and the end is
// handed out again. cut holds the ids whose proving commit a kill cut
// (no "marked" or "markfail" line for its step): heard if the mark is in.
// It also adds the log's counts to v.
func heardIn(pl ProcLog, v *Verdict) (heard map[string]int, cut map[string]bool) {
	type stepID struct{ loop, step string }
	heard, cut = map[string]int{}, map[string]bool{}
	handed := map[string]int{}      // hand-outs not yet proven heard, by id
	taking := map[stepID][]string{} // ids of a step's mark commit, until its outcome
	for _, line := range pl.Lines {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "left" {
			v.Left++
			continue
		}
		if len(f) < 3 {
			continue
		}
		at := stepID{f[1], f[2]}
		switch {
		case f[0] == "took" && len(f) >= 4:
			handed[f[3]]++
			v.Took++
		case f[0] == "taking" && len(f) >= 4:
			taking[at] = append(taking[at], f[3])
		case f[0] == "marked":
			for _, id := range taking[at] {
				if handed[id] > 0 {
					handed[id]--
					heard[id]++
				}
			}
			delete(taking, at)
		case f[0] == "markfail":
			v.MarkFails++
			delete(taking, at)
		case f[0] == "mark" && len(f) >= 4:
			v.Premarked++
			if handed[f[3]] > 0 {
				handed[f[3]]--
				heard[f[3]]++
			}
		}
	}
	if pl.Killed {
		for _, ids := range taking {
			for _, id := range ids {
				if handed[id] > 0 {
					cut[id] = true
				}
			}
		}
	}
	return heard, cut
}

// Subject returns the task a log line is about ("" for none): the spawned,
// marked, handed out or ended one.
func Subject(line string) string {
	f := strings.Fields(line)
	switch {
	case len(f) >= 3 && (f[0] == "ended" || f[0] == "spawn"):
		if f[0] == "ended" {
			return f[1]
		}
		return f[2]
	case len(f) >= 4 && (f[0] == "taking" || f[0] == "took" || f[0] == "mark"):
		return f[3]
	}
	return ""
}
