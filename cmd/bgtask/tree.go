package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// Bounds of tree, so that a corrupt or huge lineage cannot run away.
const (
	maxDepth = 256    // ancestors followed up from the task
	maxNodes = 10_000 // tasks drawn
)

// tree draws the lineage of a task: from its oldest ancestor still kept,
// every descendant, with status, duration, owner and name. The task asked
// for is marked with a star.
func (e *env) tree(ctx context.Context, args []string) error {
	fs, sf := e.flags("tree", " ID")
	pos, err := e.parse(fs, args, 1)
	if err != nil {
		return err
	}
	src, err := e.open(ctx, fs, sf)
	if err != nil {
		return err
	}
	defer src.close()
	m, err := getTask(ctx, src, pos[0])
	if err != nil {
		return err
	}
	root := m
	for range maxDepth {
		if root.Parent.TaskID == "" {
			break
		}
		p, err := src.get(ctx, root.Parent.TaskID)
		if errors.Is(err, bgtask.ErrNotFound) {
			break // the parent's record is gone (retention): start here
		}
		if err != nil {
			return err
		}
		root = p
	}
	d := drawer{ctx: ctx, src: src, mark: m.ID, now: e.now()}
	d.tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(d.tw, "TASK\tSTATUS\tDURATION\tOWNER\tNAME")
	if root.Parent.TaskID != "" {
		fmt.Fprintf(d.tw, "(parent %s not kept)\t\t\t\t\n", clean(root.Parent.TaskID))
	}
	err = d.draw(root, "", "")
	if ferr := d.tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// getTask reads a task; an unknown id is "no task ID".
func getTask(ctx context.Context, src source, id string) (bgtype.TaskMeta, error) {
	m, err := src.get(ctx, id)
	if errors.Is(err, bgtask.ErrNotFound) {
		return m, fmt.Errorf("no task %s", clean(id))
	}
	return m, err
}

type drawer struct {
	ctx   context.Context
	src   source
	tw    *tabwriter.Writer
	mark  string
	now   time.Time
	drawn int
}

// draw writes m's line, first prefixed by lead, and its children's under
// it, each prefixed by indent and a branch.
func (d *drawer) draw(m bgtype.TaskMeta, lead, indent string) error {
	d.drawn++
	id := clean(m.ID)
	if m.ID == d.mark {
		id += " *"
	}
	name := orDash(m.Name)
	if m.Detached {
		name += " (detached)"
	}
	line := fmt.Sprintf("%s%s\t%s\t%s\t%s\t%s", lead, id, clean(string(m.Status)), duration(m, d.now), clean(m.Owner), name)
	if p := progressText(m); p != "" {
		line += "  " + p
	}
	fmt.Fprintln(d.tw, line)
	var kids []bgtype.TaskMeta
	for c, err := range d.src.children(d.ctx, m.ID) {
		if err != nil {
			return err
		}
		kids = append(kids, c)
	}
	for i, c := range kids {
		if d.drawn >= maxNodes {
			fmt.Fprintf(d.tw, "%s└── … %d more not drawn\t\t\t\t\n", indent, len(kids)-i)
			return nil
		}
		branch, next := "├── ", "│   "
		if i == len(kids)-1 {
			branch, next = "└── ", "    "
		}
		if err := d.draw(c, indent+branch, indent+next); err != nil {
			return err
		}
	}
	return nil
}
