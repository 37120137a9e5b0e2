package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/bgtask/bgtask/bgtype"
)

// show writes every field of one task, one per line, or its JSON.
func (e *env) show(ctx context.Context, args []string) error {
	fs, sf := e.flags("show", " ID")
	asJSON := fs.Bool("json", false, "write the record as JSON")
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
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	for _, f := range fields(m, e) {
		if f[0] == "" { // a continuation line
			fmt.Fprintf(tw, "\t%s\n", f[1])
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	return tw.Flush()
}

// fields are the record's fields as (name, value) pairs, in the order of
// TaskMeta, values cleaned for the terminal.
func fields(m bgtype.TaskMeta, e *env) [][2]string {
	yesNo := map[bool]string{true: "yes", false: "no"}
	tags := make([]string, len(m.Tags))
	for i, t := range m.Tags {
		tags[i] = clean(t)
	}
	result := "-"
	if m.Result != nil {
		result = clean(string(m.Result))
	}
	input := "-"
	if m.Input != nil {
		input = clean(m.Input.ID) + ": " + clean(m.Input.Prompt)
	}
	wake := string(m.Wake)
	if wake == "" {
		wake = string(bgtype.WakeOnTerminal)
	}
	fs := [][2]string{
		{"id", clean(m.ID)},
		{"owner", clean(m.Owner)},
		{"type", orDash(m.Type)},
		{"name", orDash(m.Name)},
		{"description", orDash(m.Description)},
		{"status", clean(string(m.Status))},
	}
	if p := progressText(m); p != "" {
		fs = append(fs, [2]string{"progress", p})
	}
	fs = append(fs, [][2]string{
		{"error", orDash(m.Error)},
		{"error kind", orDash(string(m.ErrorKind))},
		{"cancel reason", orDash(m.CancelReason)},
		{"result", result},
		{"created", stamp(m.CreatedAt)},
		{"started", stamp(m.StartedAt)},
		{"finished", stamp(m.FinishedAt)},
		{"duration", duration(m, e.now())},
		{"parent task", orDash(m.Parent.TaskID)},
		{"parent run", orDash(m.Parent.RunID)},
		{"parent call", orDash(m.Parent.CallID)},
		{"parent agent", orDash(m.Parent.AgentID)},
		{"detached", yesNo[m.Detached]},
		{"idempotency key", orDash(m.IdempotencyKey)},
		{"instance", orDash(m.Instance)},
		{"attempt", fmt.Sprint(m.Attempt)},
		{"wake", clean(wake)},
		{"input request", input},
		{"tags", orDash(strings.Join(tags, ","))},
	}...)
	// The stack last, a line each, since it is long.
	if m.Stack == "" {
		return append(fs, [2]string{"stack", "-"})
	}
	for i, l := range strings.Split(strings.TrimRight(m.Stack, "\n"), "\n") {
		name := ""
		if i == 0 {
			name = "stack"
		}
		fs = append(fs, [2]string{name, clean(l)})
	}
	return fs
}
