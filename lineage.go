package bgtask

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
)

// lineage fills the empty fields of p from ctx: first from the running task
// of this Manager (its id, and its run), then from the tool call.
func (m *Manager) lineage(ctx context.Context, p bgtype.Parent) bgtype.Parent {
	if p.TaskID == "" {
		if t, ok := TaskFromContext(ctx); ok && t.m == m {
			p.TaskID = t.rec.ID
			if p.RunID == "" {
				p.RunID = t.rec.ParentRun()
			}
		}
	}
	if c, ok := ToolCallFromContext(ctx); ok {
		p.RunID = firstNonEmpty(p.RunID, c.RunID)
		p.CallID = firstNonEmpty(p.CallID, c.CallID)
		p.AgentID = firstNonEmpty(p.AgentID, c.AgentID)
	}
	return p
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Intrusive lists of live tasks per owner and per run: linking costs no
// allocation, unlinking is O(1).
type links func(*Task) (prev, next **Task)

func ownerLinks(t *Task) (prev, next **Task) { return &t.ownerPrev, &t.ownerNext }
func runLinks(t *Task) (prev, next **Task)   { return &t.runPrev, &t.runNext }

func linkFront(head, t *Task, l links) *Task {
	_, next := l(t)
	*next = head
	if head != nil {
		hp, _ := l(head)
		*hp = t
	}
	return t
}

func unlink(head, t *Task, l links) *Task {
	prev, next := l(t)
	if *prev != nil {
		_, pn := l(*prev)
		*pn = *next
	} else {
		head = *next
	}
	if *next != nil {
		np, _ := l(*next)
		*np = *prev
	}
	*prev, *next = nil, nil
	return head
}

// cancelSubtree signals root and, following attached children, every live
// descendant: root with cause, descendants with descendantCause. It returns
// how many tasks it signalled and appends to starts the queued tasks whose
// goroutine must now start to record their cancellation. Called with m.mu
// held; its cost is the size of the subtree.
func (m *Manager) cancelSubtree(root *Task, cause, descendantCause error, starts []*Task) (int, []*Task) {
	n := 0
	stack := []*Task{root}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c := descendantCause
		if t == root {
			c = cause
		}
		var ok bool
		if ok, starts = m.signal(t, c, starts); ok {
			n++
		}
		for child := range t.children {
			stack = append(stack, child)
		}
	}
	return n, starts
}

// signal cancels t's context with cause if t is live and not yet signalled.
// A queued task leaves the queue; if its first record is committed its
// goroutine is started so it ends cancelled. Called with m.mu held.
func (m *Manager) signal(t *Task, cause error, starts []*Task) (bool, []*Task) {
	if !t.phase.live() || t.signaled {
		return false, starts
	}
	t.signaled = true
	t.stop(cause)
	switch t.phase {
	case phaseQueued:
		m.dequeue(t)
		t.move(phaseDropped)
		starts = append(starts, t)
	case phaseWaiting:
		m.dequeue(t)
		t.move(phaseDropped) // the spawner starts it after the commit
	}
	return true, starts
}
