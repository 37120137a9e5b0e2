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
	Took      int            // terminal events handed out, in all
	Premarked int            // marks committed outside a hand-out ("mark" lines)
	MarkFails int            // hand-out commits that failed ("markfail" lines)
	InFlight  []Task         // marked, never handed out, cut by a kill mid-step: allowed

	Lost     []Task // ended, never handed out, not in a batch cut by a kill
	Doubled  []Task // handed out more than once
	Unmarked []Task // handed out once, but not marked: a restart announces it again
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
		{"lost (ended, never handed to the model, not in a batch in flight at a kill)", v.Lost},
		{"doubled (handed to the model more than once)", v.Doubled},
		{"handed out but never marked announced (a restart announces them again)", v.Unmarked},
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
	return fmt.Sprintf("%d plain, %d sub-agents, %d children; %d handed out, %d in flight at a kill, %d marked outside a hand-out, %d marks failed; lost %d, doubled %d, unmarked %d, live %d, overwritten %d",
		v.Kinds[KindPlain], v.Kinds[KindSubAgent], v.Kinds[KindChild], v.Took, len(v.InFlight), v.Premarked, v.MarkFails,
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
// against the logs of every process: each record that ended was handed to
// the model exactly once, except the records of a batch a kill cut (a
// "taking" line whose step has no "stepend" line, in a killed process, and
// whose mark is in); each handed out is marked announced; none is left
// live; and each ends with the status its own process committed, if it
// committed one ("ended" lines).
func Judge(owner string, records []bgtype.TaskMeta, logs []ProcLog) Verdict {
	type stepID struct {
		loop, step string
	}
	took := map[string]int{}
	ended := map[string][]string{}
	inFlight := map[string]bool{}
	v := Verdict{Kinds: map[string]int{}}
	for _, pl := range logs {
		stepEnded := map[stepID]bool{}
		handed := map[stepID]map[string]bool{}
		type taking struct {
			at stepID
			id string
		}
		var takings []taking
		for _, line := range pl.Lines {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			at := stepID{f[1], f[2]}
			switch {
			case f[0] == "took" && len(f) >= 4:
				took[f[3]]++
				v.Took++
				if handed[at] == nil {
					handed[at] = map[string]bool{}
				}
				handed[at][f[3]] = true
			case f[0] == "taking" && len(f) >= 4:
				takings = append(takings, taking{at, f[3]})
			case f[0] == "stepend":
				stepEnded[at] = true
			case f[0] == "ended":
				ended[f[1]] = append(ended[f[1]], f[2])
			case f[0] == "mark":
				v.Premarked++
			case f[0] == "markfail":
				v.MarkFails++
			}
		}
		if !pl.Killed {
			continue
		}
		for _, tk := range takings {
			if !stepEnded[tk.at] && !handed[tk.at][tk.id] {
				inFlight[tk.id] = true
			}
		}
	}
	for i := range records {
		m := &records[i]
		t := Task{ID: m.ID, Kind: KindOf(owner, m), N: took[m.ID], Status: m.Status}
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
