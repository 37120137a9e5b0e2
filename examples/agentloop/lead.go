package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// topics are what the research sub-agents look into, one each.
var topics = []string{"btree", "lsm", "columnar", "hash", "skiplist", "rtree", "trie", "fractal", "log"}

// leadModel plays the lead agent. Its first step starts the work, the
// second cancels one researcher (and so everything it started), the third
// ends the turn while the rest runs; every later step reads the events it
// was given and, once nothing is left running, writes the summary.
type leadModel struct {
	agents int
	plugin *bgtask.Plugin // reads back the events it rendered

	mu      sync.Mutex
	step    int
	results map[string]string // task id → what it reported
	names   map[string]string // task id → name, from the tool results
}

func newLeadModel(agents int, plugin *bgtask.Plugin) *leadModel {
	return &leadModel{agents: agents, plugin: plugin, results: map[string]string{}, names: map[string]string{}}
}

func researcher(i int) string { return "researcher-" + topics[i] }

// Next implements agentloop.Model.
func (l *leadModel) Next(ctx context.Context, req agentloop.Request) (agentloop.Response, error) {
	if err := ctx.Err(); err != nil {
		return agentloop.Response{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.step++
	l.read(req.Messages)
	switch l.step {
	case 1:
		var calls []agentloop.CallSpec
		for i := range l.agents {
			calls = append(calls, agentloop.CallSpec{Name: "research", Args: map[string]string{"topic": topics[i], "name": researcher(i)}})
		}
		calls = append(calls, agentloop.CallSpec{Name: "index_repo", Args: map[string]int{"files": 120}})
		return agentloop.Call(calls...)(req), nil
	case 2:
		victim := researcher(l.agents - 1)
		return agentloop.Call(agentloop.CallSpec{Name: "cancel_task", Args: map[string]any{
			"target": map[string]string{"relation": "child", "name": victim},
		}})(req), nil
	}
	if view := viewOf(req.Messages); view != "" {
		return agentloop.Response{Text: fmt.Sprintf("Still running: %s. I'll report when they finish.", view)}, nil
	}
	return agentloop.Response{Text: l.summary()}, nil
}

// read notes what each delivered event says.
func (l *leadModel) read(msgs []agentloop.Message) {
	for _, msg := range msgs {
		ev, ok := parseEvent(l.plugin, msg)
		if !ok || !ev.Kind.IsTerminal() {
			continue
		}
		switch ev.Kind {
		case bgtask.EventCompleted:
			l.results[ev.TaskID] = strings.Trim(string(ev.Result), `"`)
		default:
			l.results[ev.TaskID] = string(ev.Kind)
		}
	}
}

// viewOf returns the names in the prompt view's task list (an internal user
// message; the system role holds only the plugin's instructions), or ""
// when it is absent (nothing is running).
func viewOf(msgs []agentloop.Message) string {
	for _, msg := range msgs {
		if msg.Role == "user" && msg.Internal && strings.HasPrefix(msg.Content, "<background-tasks ") {
			var names []string
			for _, line := range strings.Split(msg.Content, "\n") {
				if _, rest, ok := strings.Cut(line, ` name="`); ok {
					name, _, _ := strings.Cut(rest, `"`)
					names = append(names, name)
				}
			}
			return strings.Join(names, ", ")
		}
	}
	return ""
}

func (l *leadModel) summary() string {
	var parts []string
	ended := map[string]int{}
	for _, r := range l.results {
		if r == string(bgtask.EventCancelled) || r == string(bgtask.EventInterrupted) || r == string(bgtask.EventFailed) {
			ended[r]++
			continue
		}
		parts = append(parts, r)
	}
	sort.Strings(parts)
	text := fmt.Sprintf("%s. Cancelled: %d task(s).", strings.Join(parts, "; "), ended["cancelled"])
	if n := ended["interrupted"]; n > 0 {
		text += fmt.Sprintf(" Interrupted by a restart: %d.", n)
	}
	if n := ended["failed"]; n > 0 {
		text += fmt.Sprintf(" Failed: %d.", n)
	}
	return text
}
