package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

const maxQuery = 200 // bytes

const lookupSchema = `{"type":"object","additionalProperties":false,"required":["query"],"properties":{` +
	`"query":{"type":"string","description":"What to look up, at most 200 bytes."}}}`

// lookupTool is the host's tool for work that is usually quick: it runs in
// the foreground (Owner.Foreground) and answers with its result; if it is
// still running after wait, it is promoted to a background task, and the
// answer says so (its end then comes as an event, like research's).
//
// Its answer goes through agent.ToolOutput: what the lookup found (or
// the error it failed with) is text the tool does not control, escaped and
// cut for the model as the Plugin shows a task's result.
//
// It runs with the call's ctx, which a client that hangs up does not end:
// the call is not abandoned then, it finishes and its answer stays in the
// thread's conversation. The user's stop ends ctx: the call is promoted to
// the background, and the run's end cancels it with the run's other tasks.
func lookupTool(owner bgtask.Owner, client openai.Client, model string, wait time.Duration) agent.Tool {
	return agent.Tool{
		Name: "lookup",
		Description: "Looks something up and answers with what it found. If that takes long, " +
			"it goes on in the background and the answer gives its task id; its result is announced when it ends.",
		Schema: json.RawMessage(lookupSchema),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Query *string `json:"query"`
			}
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return nil, fmt.Errorf("%w: %v", agent.ErrToolArguments, err)
			}
			if in.Query == nil || strings.TrimSpace(*in.Query) == "" || len(*in.Query) > maxQuery || !utf8.ValidString(*in.Query) {
				return nil, fmt.Errorf("%w: query: want a non-blank text of at most %d bytes", agent.ErrToolArguments, maxQuery)
			}
			query := strings.TrimSpace(*in.Query)
			res, err := owner.Foreground(ctx, wait, func(ctx context.Context, _ *bgtask.Task) (any, error) {
				resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("Answer in one sentence."),
					openai.UserMessage("Look up: " + query),
				}})
				if err != nil {
					if ctx.Err() != nil {
						return nil, context.Cause(ctx)
					}
					return nil, err
				}
				if len(resp.Choices) == 0 {
					return nil, errors.New("the model answered no choice")
				}
				return resp.Choices[0].Message.Content, nil
			}, bgtask.WithDescription("look up "+query))
			var te *bgtask.TaskError
			if errors.As(err, &te) { // the lookup failed: the model may try again
				failed, merr := json.Marshal(map[string]string{"status": "failed", "task_id": te.TaskID, "error": te.Message})
				return agent.ToolOutput(failed, merr)
			}
			return agent.ToolOutput(res.Result, err)
		},
	}
}
