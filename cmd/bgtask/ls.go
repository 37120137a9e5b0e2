package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ls lists the tasks the filters select, oldest first, across owners.
func (e *env) ls(ctx context.Context, args []string) error {
	fs, sf := e.flags("ls", "")
	ff := addFilterFlags(fs)
	asJSON := fs.Bool("json", false, "write one JSON object per task and line")
	if _, err := e.parse(fs, args, 0); err != nil {
		return err
	}
	f, err := ff.filter(e, fs)
	if err != nil {
		return err
	}
	src, err := e.open(ctx, fs, sf)
	if err != nil {
		return err
	}
	defer src.close()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for m, err := range src.list(ctx, f) {
			if err != nil {
				return err
			}
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	return e.table(ctx, e.stdout, src, f, e.now())
}

// table writes the tasks f selects as a table, with a count at the end.
// Durations of live tasks count up to now.
func (e *env) table(ctx context.Context, w io.Writer, src source, f filter, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tSTATUS\tNAME\tCREATED\tDURATION\tTAGS\tRUN")
	n := 0
	for m, err := range src.list(ctx, f) {
		if err != nil {
			tw.Flush()
			return err
		}
		n++
		tags := make([]string, len(m.Tags))
		for i, t := range m.Tags {
			tags[i] = clean(t)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(m.ID), clean(m.Owner), clean(string(m.Status)),
			orDash(m.Name), stamp(m.CreatedAt), duration(m, now), orDash(strings.Join(tags, ",")), orDash(m.Parent.RunID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d %s\n", n, plural(n, "task", "tasks"))
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
