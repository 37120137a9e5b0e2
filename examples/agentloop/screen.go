package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// screen writes the demo's output. Tasks write progress from their own
// goroutines, so every write holds mu.
type screen struct {
	mu    sync.Mutex
	out   io.Writer
	shown map[string]int // task id → last progress quarter printed
}

func newScreen(out io.Writer) *screen { return &screen{out: out, shown: map[string]int{}} }

func (s *screen) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format, args...)
}

// progress draws a task's bar each time it crosses a quarter.
func (s *screen) progress(id, label string, done, total int) {
	quarter := 4 * done / total
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.shown[id]; ok && quarter <= last {
		return
	}
	s.shown[id] = quarter
	const width = 20
	filled := width * done / total
	fmt.Fprintf(s.out, "  %-18s [%s%s] %3d%%\n", label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*done/total)
}

// transition is the Manager's observer: a line when a task ends.
func (s *screen) transition(tr bgtask.Transition) {
	if !tr.To.IsTerminal() {
		return
	}
	s.printf("  * %s %s (%s)\n", tr.Task.Name, tr.To, tr.Task.Type)
}

// step prints what a step of the lead delivered to the model and what the
// model did.
func (s *screen) step(st agentloop.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "step %d: %d event(s) delivered\n", st.Index, len(st.Delivered))
	for _, pm := range st.Delivered {
		fmt.Fprintf(s.out, "    <- %s\n", describe(pm))
	}
	for _, c := range st.Response.Calls {
		fmt.Fprintf(s.out, "    model calls %s %s\n", c.Name, c.Args)
	}
	if st.Response.Text != "" {
		fmt.Fprintf(s.out, "    model says %q\n", st.Response.Text)
	}
}

// taskTree prints the tasks of owner created since, and the tasks they
// started, as a tree in creation order, from the Store. Tasks of earlier
// runs of the demo are counted, not shown.
func (s *screen) taskTree(ctx context.Context, m *bgtask.Manager, owner string, since time.Time) error {
	var roots []bgtask.TaskMeta
	older := map[bgtask.TaskStatus]int{}
	for meta, err := range m.Store().List(ctx, owner) {
		if err != nil {
			return err
		}
		switch {
		case meta.CreatedAt.Before(since):
			older[meta.Status]++
		case meta.Parent.TaskID == "":
			roots = append(roots, meta)
		}
	}
	if len(older) > 0 {
		s.printf("\nfrom earlier runs of the demo: %v\n", older)
	}
	s.printf("\n%-26s %-10s %-10s %6s  %s\n", "TASK", "TYPE", "STATUS", "TIME", "RESULT")
	for i, meta := range roots {
		if err := s.treeRow(ctx, m, meta, "", i == len(roots)-1, true); err != nil {
			return err
		}
	}
	return nil
}

func (s *screen) treeRow(ctx context.Context, m *bgtask.Manager, meta bgtask.TaskMeta, indent string, last, root bool) error {
	branch, next := "├─ ", indent+"│  "
	if last {
		branch, next = "└─ ", indent+"   "
	}
	if root {
		branch, next = "", ""
	}
	outcome := strings.Trim(string(meta.Result), `"`)
	if meta.Error != "" {
		outcome = meta.Error
	}
	took := "-"
	if !meta.FinishedAt.IsZero() {
		took = meta.FinishedAt.Sub(meta.CreatedAt).Round(10 * time.Millisecond).String()
	}
	s.printf("%-26s %-10s %-10s %6s  %s\n", indent+branch+meta.Name, meta.Type, meta.Status, took, shorten(outcome, 60))
	var kids []bgtask.TaskMeta
	for kid, err := range m.Store().Children(ctx, meta.ID) {
		if err != nil {
			return err
		}
		kids = append(kids, kid)
	}
	for i, kid := range kids {
		if err := s.treeRow(ctx, m, kid, next, i == len(kids)-1, false); err != nil {
			return err
		}
	}
	return nil
}

// describe says in one line what a delivered message carries.
func describe(pm bgtask.PromptMessage) string {
	if pm.Event == nil {
		return shorten(pm.Content, 100)
	}
	ev := pm.Event
	id := ev.TaskID
	if len(id) > 10 {
		id = "task_…" + id[len(id)-4:]
	}
	detail := ""
	switch {
	case len(ev.Payload) > 0:
		detail = ev.EventType + " " + string(ev.Payload)
	case len(ev.Result) > 0:
		detail = string(ev.Result)
	default:
		detail = ev.Error
	}
	return shorten(fmt.Sprintf("%-9s %s %s", ev.Kind, id, detail), 100)
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// parseEvent reads the event back out of a message p delivered; text a
// task wrote that only looks like an event is not one.
func parseEvent(p *bgtask.Plugin, msg agentloop.Message) (bgtask.Event, bool) {
	if !msg.Internal {
		return bgtask.Event{}, false
	}
	return p.ParseEvent(msg.Content)
}
