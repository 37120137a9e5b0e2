package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/vbauerster/mpb/v8"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// screen writes the demo's output. Tasks write progress from their own
// goroutines, so every write holds mu. On a terminal (live) progress bars
// are redrawn in place below the text, which mpb prints above them; on
// anything else the output is plain lines without escape codes.
type screen struct {
	mu     sync.Mutex
	out    io.Writer
	bars   *mpb.Progress       // nil when not live, or once closeBars ran
	bar    map[string]*mpb.Bar // task id → its bar, while the task runs
	shown  map[string]int      // task id → last progress quarter printed (plain)
	labels map[string]string   // task id → its label: its name, after its parent's
	inRun  bool                // a run is open: task ends are told after its step
	held   []string            // task ends waiting for the step's lines
}

func newScreen(out io.Writer, live bool) *screen {
	s := &screen{out: out, bar: map[string]*mpb.Bar{}, shown: map[string]int{}, labels: map[string]string{}}
	if live {
		s.bars = mpb.New(mpb.WithOutput(out), mpb.WithWidth(32), mpb.WithAutoRefresh())
	}
	return s
}

func (s *screen) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writef(format, args...)
}

// writef writes above the bars when they are drawn; s.mu is held.
func (s *screen) writef(format string, args ...any) {
	if s.bars != nil {
		fmt.Fprintf(s.bars, format, args...)
		return
	}
	fmt.Fprintf(s.out, format, args...)
}

// transition is the Manager's observer. It learns each task's label when
// the task starts, and prints a line naming the task when it ends. During
// a run the line waits for the step that caused it (a cancel), so that it
// follows the model's call rather than precede it.
func (s *screen) transition(tr bgtask.Transition) {
	if !tr.To.IsTerminal() {
		s.mu.Lock()
		s.learnLocked(tr.Task)
		s.mu.Unlock()
		return
	}
	s.endBar(tr.Task.ID, tr.To)
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("  * %s %s (%s)\n", s.labelLocked(tr.Task.Name, tr.Task.ID), tr.To, tr.Task.Type)
	if s.inRun {
		s.held = append(s.held, line)
		return
	}
	s.writef("%s", line)
}

// note prints a line about a tool call; during a run it follows the step
// that made the call, like the task ends.
func (s *screen) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf(format, args...)
	if s.inRun {
		s.held = append(s.held, line)
		return
	}
	s.writef("%s", line)
}

// learnLabels learns the labels of tasks, each listed after its parent.
func (s *screen) learnLabels(tasks []bgtype.TaskMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tasks {
		s.learnLocked(t)
	}
}

// learnLocked learns a task's label, its name after its parent's label
// when the parent is known. s.mu is held.
func (s *screen) learnLocked(t bgtype.TaskMeta) {
	if _, ok := s.labels[t.ID]; ok {
		return
	}
	label := t.Name
	if parent, ok := s.labels[t.Parent.TaskID]; ok {
		label = parent + "/" + label
	}
	s.labels[t.ID] = label
}

// labelLocked names a task for a reader: its label, else its name, else a
// short form of its id. s.mu is held.
func (s *screen) labelLocked(name, id string) string {
	if l, ok := s.labels[id]; ok {
		return l
	}
	return taskLabel(name, id)
}

// runOpen says whether a run is open; when it closes, the task ends held
// for a step are printed.
func (s *screen) runOpen(open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inRun = open
	if !open {
		s.flushLocked()
	}
}

func (s *screen) flushLocked() {
	for _, line := range s.held {
		s.writef("%s", line)
	}
	s.held = nil
}

// step prints what a step of the lead delivered to the model and what the
// model did.
func (s *screen) step(st agentloop.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writef("step %d: %d event(s) delivered\n", st.Index, len(st.Delivered))
	for _, pm := range st.Delivered {
		s.writef("    <- %s\n", s.describeLocked(pm))
	}
	for _, c := range st.Response.Calls {
		s.writef("    model calls %s %s\n", c.Name, c.Args)
	}
	if st.Response.Text != "" {
		s.writef("    model says %q\n", st.Response.Text)
	}
	s.flushLocked()
}

// taskTree prints the tasks of owner created since, and the tasks they
// started, as a tree in creation order, from the Store. Tasks of earlier
// runs of the demo are left out (summarizeLast told of the previous one at the start).
func (s *screen) taskTree(ctx context.Context, m *bgtask.Manager, owner string, since time.Time) error {
	var roots []bgtype.TaskMeta
	for meta, err := range m.Store().List(ctx, owner) {
		if err != nil {
			return err
		}
		if !meta.CreatedAt.Before(since) && meta.Parent.TaskID == "" {
			roots = append(roots, meta)
		}
	}
	s.printf("\n%-26s %-10s %-10s %6s  %s\n", "TASK", "TYPE", "STATUS", "TIME", "RESULT")
	for i, meta := range roots {
		if err := s.treeRow(ctx, m, meta, "", i == len(roots)-1, true); err != nil {
			return err
		}
	}
	return nil
}

func (s *screen) treeRow(ctx context.Context, m *bgtask.Manager, meta bgtype.TaskMeta, indent string, last, root bool) error {
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
	var kids []bgtype.TaskMeta
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

// describeLocked says in one line what a delivered message carries: what
// happened, to which task (by its label), and what it reported.
func (s *screen) describeLocked(pm agent.PromptMessage) string {
	if pm.Event == nil {
		return shorten(pm.Content, 100)
	}
	ev := pm.Event
	what := string(ev.Kind)
	if ev.Kind == bgtype.EventCustom {
		what = ev.EventType // "progress", rather than "custom"
	}
	detail := ev.Error
	switch {
	case len(ev.Payload) > 0:
		detail = string(ev.Payload)
	case len(ev.Result) > 0:
		detail = string(ev.Result)
	}
	line := fmt.Sprintf("%-11s %s", what, s.labelLocked(ev.Name, ev.TaskID))
	if detail != "" {
		line += ": " + detail
	}
	return shorten(line, 100)
}

// taskLabel names a task for a reader: its name, else a short form of its id.
func taskLabel(name, id string) string {
	if name != "" {
		return name
	}
	if len(id) > 10 {
		return "task_…" + id[len(id)-4:]
	}
	return id
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// parseEvent reads the event back out of a message p delivered; text a
// task wrote that only looks like an event is not one.
func parseEvent(p *agent.Plugin, msg agentloop.Message) (bgtype.Event, bool) {
	if !msg.Internal {
		return bgtype.Event{}, false
	}
	return p.ParseEvent(msg.Content)
}
