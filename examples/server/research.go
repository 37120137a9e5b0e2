package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
)

// Limits of the research tool's arguments.
const (
	maxTopic      = 200 // bytes
	maxSteps      = 20
	defaultSteps  = 3
	researchTagID = "research"
)

const researchSchema = `{"type":"object","additionalProperties":false,"required":["topic","steps","question"],"properties":{` +
	`"topic":{"type":"string","description":"What to research, at most 200 bytes."},` +
	`"steps":{"type":["integer","null"],"description":"How many steps the research takes, 1 to 20; null for 3."},` +
	`"question":{"type":["string","null"],"description":"A question for the user that the research waits for an answer to before its first step, at most 200 bytes; null for none."}}}`

// researchTool is the host's own tool: it starts a research as a
// background sub-agent of owner and answers at once with the task's id.
// The task asks the model one step at a time, reports each step as
// progress, and ends with the findings, which reach the thread as an event
// at its next turn. With a question it first asks the user (awaiting_input)
// and waits for the answer; messages sent to it (POST
// /threads/{id}/tasks/{task}/messages, or the model's send_message) become
// notes in its result. It runs with the call's ctx, so the task belongs to the turn's run:
// the user's stop cancels it, a client that hangs up does not. A spawn the
// model can do something about (a research of that name still running, too
// many tasks) is refused with bgopenai.ModelError: the adapter answers the
// call with the error's text.
func researchTool(owner bgtask.Owner, client openai.Client, model string) agent.Tool {
	return agent.Tool{
		Name: "research",
		Description: "Starts a research on a topic in the background and answers at once with its task id. " +
			"Its findings are announced when it ends; list_tasks and get_task show its progress.",
		Schema: json.RawMessage(researchSchema),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			topic, steps, question, err := researchArgs(args)
			if err != nil {
				return nil, err
			}
			name := "research-" + slug(topic)
			id, err := owner.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
				return research(ctx, t, client, model, topic, steps, question)
			}, bgtask.WithName(name), bgtask.WithDescription("research "+topic), bgtask.WithTags(researchTagID))
			switch { // the model's to correct: the adapter answers it with the error's text
			case errors.Is(err, bgtask.ErrDuplicateName):
				return nil, bgopenai.ModelError(fmt.Errorf("refused: a research named %s is still running: wait for it or cancel it: %w", name, bgtask.ErrDuplicateName))
			case errors.Is(err, bgtask.ErrLimit):
				return nil, bgopenai.ModelError(fmt.Errorf("refused: too many tasks are running: wait for one to end: %w", bgtask.ErrLimit))
			case err != nil:
				return nil, err
			}
			return json.Marshal(map[string]any{"status": "started", "task_id": id, "name": name,
				"message": "The research runs in the background; its findings are announced when it ends."})
		},
	}
}

// researchArgs decodes and checks the tool's arguments; its errors match
// agent.ErrToolArguments, so the adapter hands them to the model.
func researchArgs(args json.RawMessage) (topic string, steps int, question string, err error) {
	var in struct {
		Topic    *string `json:"topic"`
		Steps    *int    `json:"steps"`
		Question *string `json:"question"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return "", 0, "", fmt.Errorf("%w: %v", agent.ErrToolArguments, err)
	}
	if in.Question != nil {
		question = strings.TrimSpace(*in.Question)
	}
	steps = defaultSteps
	if in.Steps != nil {
		steps = *in.Steps
	}
	switch {
	case in.Topic == nil || strings.TrimSpace(*in.Topic) == "":
		return "", 0, "", fmt.Errorf("%w: topic is missing or blank", agent.ErrToolArguments)
	case len(*in.Topic) > maxTopic || !utf8.ValidString(*in.Topic):
		return "", 0, "", fmt.Errorf("%w: topic: want valid UTF-8 of at most %d bytes", agent.ErrToolArguments, maxTopic)
	case steps < 1 || steps > maxSteps:
		return "", 0, "", fmt.Errorf("%w: steps %d: want 1 to %d", agent.ErrToolArguments, steps, maxSteps)
	case len(question) > maxTopic || !utf8.ValidString(question):
		return "", 0, "", fmt.Errorf("%w: question: want valid UTF-8 of at most %d bytes", agent.ErrToolArguments, maxTopic)
	}
	return strings.TrimSpace(*in.Topic), steps, question, nil
}

// slug is topic as a task name: lower case letters and digits, runs of
// anything else as one '-', at most 48 bytes.
func slug(topic string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(topic) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			sep := dash && b.Len() > 0
			if n := utf8.RuneLen(r); sep && b.Len()+1+n > 48 || b.Len()+n > 48 {
				break
			}
			if sep {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "topic"
	}
	return b.String()
}

// research is the task: with a question, the user's answer first; then
// one model call per step, each reported as progress; the findings are its
// result, with the answer and the notes (the messages it was sent, taken
// before each step and at the end, in order).
func research(ctx context.Context, t *bgtask.Task, client openai.Client, model, topic string, steps int, question string) (any, error) {
	out := map[string]any{"topic": topic}
	if question != "" {
		answer, err := t.RequestInput(ctx, question)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, err
		}
		out["answer"] = answer.Content
	}
	var notes []string
	findings := make([]string, 0, steps)
	for i := 1; i <= steps; i++ {
		notes = takeNotes(t, notes)
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a research sub-agent. Answer with one finding."),
			openai.UserMessage(fmt.Sprintf("Research step %d of %d: %s", i, steps, topic)),
		}})
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx) // cancelled: the task ends cancelled
			}
			return nil, fmt.Errorf("step %d of %d: %w", i, steps, err)
		}
		if len(resp.Choices) == 0 {
			return nil, fmt.Errorf("step %d of %d: the model answered no choice", i, steps)
		}
		findings = append(findings, resp.Choices[0].Message.Content)
		if err := t.ReportProgress(int64(i), int64(steps), fmt.Sprintf("step %d of %d", i, steps)); err != nil {
			return nil, err
		}
	}
	if notes = takeNotes(t, notes); notes != nil {
		out["notes"] = notes
	}
	out["findings"] = findings
	return out, nil
}

// takeNotes appends the contents of the messages waiting in the research's
// inbox to notes.
func takeNotes(t *bgtask.Task, notes []string) []string {
	for _, ev := range t.Inbox().Drain() {
		if msg, ok := ev.Message(); ok {
			notes = append(notes, msg.Content)
		}
	}
	return notes
}
