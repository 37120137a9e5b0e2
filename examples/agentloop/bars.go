package main

import (
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress shows how far a task is, by its label (the task's name, with
// its parent's for a sub-agent's task). On a terminal each task has a bar
// redrawn in place; otherwise a plain line is printed each time the task
// crosses a quarter, so a pipe or a log gets clean, short text.
func (s *screen) progress(id, label string, done, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bars != nil {
		b, ok := s.bar[id]
		if !ok {
			b = s.bars.AddBar(int64(total),
				mpb.PrependDecorators(decor.Name(label, decor.WC{C: decor.DindentRight | decor.DextraSpace, W: labelWidth})),
				mpb.AppendDecorators(decor.OnAbort(decor.OnComplete(decor.Percentage(decor.WC{W: 5}), "done"), "cancelled")),
			)
			s.bar[id] = b
		}
		b.SetCurrent(int64(done))
		return
	}
	quarter := 4 * done / total
	if last, ok := s.shown[id]; ok && quarter <= last {
		return
	}
	s.shown[id] = quarter
	const width = 20
	filled := width * done / total
	fmt.Fprintf(s.out, "  %-*s [%s%s] %3d%%\n", labelWidth, label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*done/total)
}

// labelWidth is the width of a progress label: the longest the demo makes.
const labelWidth = 28

// endBar stops a task's bar when the task ends: a bar that did not reach
// its total (a cancelled task) shows "cancelled".
func (s *screen) endBar(id string, status bgtype.Status) {
	s.mu.Lock()
	b, ok := s.bar[id]
	delete(s.bar, id)
	s.mu.Unlock()
	if ok && status != bgtype.StatusCompleted {
		b.Abort(false)
	}
}

// closeBars stops redrawing and lets the final frame stay on the
// terminal; the screen then writes straight to it.
func (s *screen) closeBars() {
	s.mu.Lock()
	bars := s.bars
	s.bars = nil
	for _, b := range s.bar {
		b.Abort(false)
	}
	clear(s.bar)
	s.mu.Unlock()
	if bars != nil {
		bars.Wait()
	}
}
