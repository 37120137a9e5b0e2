package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/agentloop"
)

// topics are what the research sub-agents look into, one each.
var topics = []string{"btree", "lsm", "columnar", "hash", "skiplist", "rtree", "trie", "fractal", "log"}

// leadModel plays the lead agent. Its first step starts the work, the
// second cancels one researcher (and so everything it started), the third
// says what the cancel did and ends the turn while the rest runs; every
// later step reads the events it was given and, once nothing is left
// running, writes the summary. What it says follows what it was told: a
// task it cancelled is never "still running".
type leadModel struct {
	agents int
	plugin *agent.Plugin // reads back the events it rendered

	mu       sync.Mutex
	step     int
	results  map[string]string // task id → what it reported
	finished []string          // names of tasks that completed since the last answer
	stopped  []string          // names of tasks the lead cancelled that ended since the last answer
	canceled map[string]bool   // names of tasks the lead cancelled
}

func newLeadModel(agents int, plugin *agent.Plugin) *leadModel {
	return &leadModel{agents: agents, plugin: plugin, results: map[string]string{}, canceled: map[string]bool{}}
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
	done := l.cancelResult(req.Messages) // first: read sees which tasks the lead cancelled
	l.read(req.Messages)
	switch l.step {
	case 1:
		var calls []agentloop.CallSpec
		for i := range l.agents {
			calls = append(calls, agentloop.CallSpec{Name: "research", Args: map[string]string{"topic": topics[i], "name": researcher(i)}})
		}
		calls = append(calls, agentloop.CallSpec{Name: "index_repo", Args: map[string]int{"files": 120}},
			agentloop.CallSpec{Name: "run_tests", Args: map[string]any{}},
			// The model's choice: lint goes in the background at once.
			agentloop.CallSpec{Name: "lint", Args: map[string]any{"packages": 6, "run_in_background": true}})
		return agentloop.Call(calls...)(req), nil
	case 2:
		victim := researcher(l.agents - 1)
		return agentloop.Call(agentloop.CallSpec{Name: "cancel_task", Args: map[string]any{
			"target": map[string]string{"relation": "child", "name": victim},
		}})(req), nil
	}
	var said []string
	if done != "" {
		said = append(said, done)
	}
	if done != "" { // what the cancel's result said covers them
		l.stopped = nil
	}
	if len(l.stopped) > 0 {
		said = append(said, fmt.Sprintf("Stopped: %s.", strings.Join(l.stopped, ", ")))
		l.stopped = nil
	}
	if len(l.finished) > 0 {
		said = append(said, fmt.Sprintf("Finished: %s.", strings.Join(l.finished, ", ")))
		l.finished = nil
	}
	var running []string
	for _, name := range viewOf(req.Messages) {
		if !l.canceled[name] {
			running = append(running, name)
		}
	}
	if len(running) == 0 {
		return agentloop.Response{Text: l.summary()}, nil
	}
	said = append(said, fmt.Sprintf("Still running: %s. I'll report when they finish.", strings.Join(running, ", ")))
	return agentloop.Response{Text: strings.Join(said, " ")}, nil
}

// cancelResult says what the lead's last cancel_task call did, read from
// its tool result, when the model's last answer was that call; "" otherwise.
// It notes the cancelled task's name, so that it is not said to run.
func (l *leadModel) cancelResult(msgs []agentloop.Message) string {
	last := -1
	for i, msg := range msgs {
		if msg.Role == "assistant" {
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	for _, call := range msgs[last].Calls {
		if call.Name != "cancel_task" {
			continue
		}
		var args struct {
			Target struct{ Name string } `json:"target"`
		}
		var res struct {
			Status        string `json:"status"`
			CanceledCount int    `json:"cancelled_count"`
			Error         string `json:"error"`
		}
		for _, msg := range msgs[last+1:] {
			if msg.Role == "tool" && msg.ToolCallID == call.ID {
				_ = json.Unmarshal(call.Args, &args)
				if err := json.Unmarshal([]byte(msg.Content), &res); err != nil {
					return fmt.Sprintf("Could not cancel %s: %s.", args.Target.Name, msg.Content)
				}
			}
		}
		switch res.Status {
		case "accepted":
			l.canceled[args.Target.Name] = true
			return fmt.Sprintf("Cancelled %s and the %d task(s) it started.", args.Target.Name, res.CanceledCount-1)
		case "already_cancelled":
			l.canceled[args.Target.Name] = true
			return fmt.Sprintf("%s was already cancelled.", args.Target.Name)
		default:
			return fmt.Sprintf("Could not cancel %s: %s.", args.Target.Name, res.Error)
		}
	}
	return ""
}

// read notes what each delivered event says.
func (l *leadModel) read(msgs []agentloop.Message) {
	for _, msg := range msgs {
		ev, ok := parseEvent(l.plugin, msg)
		if !ok || !ev.Kind.IsTerminal() {
			continue
		}
		if _, seen := l.results[ev.TaskID]; seen {
			continue // the conversation holds every event delivered so far
		}
		switch ev.Kind {
		case bgtype.EventCompleted:
			l.results[ev.TaskID] = strings.Trim(string(ev.Result), `"`)
			l.finished = append(l.finished, ev.Name)
		case bgtype.EventCanceled:
			l.results[ev.TaskID] = string(ev.Kind)
			if l.canceled[ev.Name] {
				l.stopped = append(l.stopped, ev.Name)
			}
		default:
			l.results[ev.TaskID] = string(ev.Kind)
		}
	}
}

// viewOf returns the names in the prompt view's task list (an internal user
// message; the system role holds only the plugin's instructions), none
// when it is absent (nothing is running).
func viewOf(msgs []agentloop.Message) []string {
	for _, msg := range msgs {
		if msg.Role == "user" && msg.Internal && strings.HasPrefix(msg.Content, "<background-tasks ") {
			var names []string
			for _, line := range strings.Split(msg.Content, "\n") {
				if _, rest, ok := strings.Cut(line, ` name="`); ok {
					name, _, _ := strings.Cut(rest, `"`)
					names = append(names, name)
				}
			}
			return names
		}
	}
	return nil
}

func (l *leadModel) summary() string {
	var parts []string
	ended := map[string]int{}
	for _, r := range l.results {
		if r == string(bgtype.EventCanceled) || r == string(bgtype.EventInterrupted) || r == string(bgtype.EventFailed) {
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
