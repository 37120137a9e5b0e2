package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// runResearcher is a research sub-agent: its own agent loop, on its own
// inbox, whose tool starts two page fetches as its children. At its natural
// end it waits for them (a sub-agent run), then answers once.
// It closes searching once its sources are being fetched.
func (d *demo) runResearcher(ctx context.Context, t *bgtask.Task, topic string, searching chan<- struct{}) (any, error) {
	plugin, err := agent.NewPlugin(d.m, t.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: t.Inbox()}})
	if err != nil {
		return nil, err
	}
	defer plugin.Close(context.WithoutCancel(ctx))
	search := agentloop.Tool{
		Name:        "search",
		Description: "Fetch the two best sources on the topic in the background.",
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			var ids []string
			for i, source := range []string{"paper", "blog"} {
				ag, err := t.Agent()
				if err != nil {
					return nil, err
				}
				id, err := ag.Spawn(ctx, func(ctx context.Context, page *bgtask.Task) (any, error) {
					steps := 4 + 2*i
					for s := 1; s <= steps; s++ {
						if err := d.pause(ctx, 250*time.Millisecond); err != nil {
							return nil, err
						}
						d.ui.progress(page.ID(), t.Name()+"/"+page.Name(), s, steps)
					}
					return fmt.Sprintf("%s on %s", source, topic), nil
				}, bgtask.WithName(source), bgtask.WithType("fetch"), bgtask.WithDescription("fetch a "+source+" on "+topic))
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			close(searching)
			return agentloop.Text(strings.Join(ids, ",")), nil
		},
	}
	model := agentloop.NewScriptedModel(
		agentloop.Call(agentloop.CallSpec{Name: "search", Args: map[string]string{"topic": topic}}),
		summarise(plugin, topic), summarise(plugin, topic), summarise(plugin, topic),
	)
	res, err := agentloop.Run(ctx, agentloop.Config{
		Model: model, Tools: []agentloop.Tool{search}, Hooks: plugin,
		RunID: "run-" + t.ID(), AgentID: t.Name(), SubAgent: true,
	}, []agentloop.Message{{Role: "user", Content: "Research " + topic}})
	switch {
	case err != nil:
		return nil, err
	case res.Reason == agentloop.ReasonCanceled:
		return nil, context.Cause(ctx)
	}
	return res.Response, nil
}

// summarise answers once both sources reported, and says it waits before.
func summarise(plugin *agent.Plugin, topic string) agentloop.ScriptStep {
	return func(req agentloop.Request) agentloop.Response {
		var read []string
		for _, msg := range req.Messages {
			if ev, ok := parseEvent(plugin, msg); ok && ev.Kind == bgtype.EventCompleted {
				read = append(read, strings.Trim(string(ev.Result), `"`))
			}
		}
		if len(read) < 2 {
			return agentloop.Response{Text: "waiting for my sources"}
		}
		return agentloop.Response{Text: fmt.Sprintf("%s: read %s", topic, strings.Join(read, " and "))}
	}
}
