package bganthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/bgtask/bgtask"
	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
	"github.com/bgtask/bgtask/agent"
)

// The README's "Framework adapters": one Messages step with the Toolset, a
// host tool beside bgtask's, and what the Plugin delivered.
func Example_readmeMessages() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	runID := "run-1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, messageReply([]toolUse{{"toolu_1", "search", `{"query":"lsm"}`}, {"toolu_2", "list_tasks", "{}"}}, ""))
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("none"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	search := agent.Tool{
		Name:        "search",
		Description: "Searches the notes.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{"query":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`["lsm.txt"]`), nil
		},
	}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Find my notes on LSM trees."))}
	baseSystem := []anthropic.TextBlockParam{{Text: "You are a research assistant."}}
	delivered := []agent.PromptMessage{
		{Role: "system", Content: "Background tasks: …", Internal: true, Ephemeral: true},
		{Role: "user", Content: "<background-task-event …>…</background-task-event>", Internal: true},
	}

	ts, err := bganthropic.New(append(agent.Tools(owner), search))
	params := anthropic.MessageNewParams{Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 1024, Messages: msgs, Tools: ts.MessageTools()}
	msg, err := client.Messages.New(ctx, params)
	results, err := ts.AnswerMessage(ctx, msg, bganthropic.WithRunID(runID)) // one tool_result per tool_use, is_error on a mistake
	system, events := bganthropic.MessagePrompt(delivered)                   // plugin.BeforeInference's messages: instructions, and events as user text
	params.System = append(baseSystem, system...)
	params.Messages = append(params.Messages, msg.ToParam())
	params.Messages = bganthropic.AppendUserTurn(params.Messages, append(results, events...)...) // one user turn, tool_results first

	fmt.Println(len(params.Tools), "tools;", err)
	fmt.Println(len(params.System), "system blocks;", len(params.Messages), "messages")
	last := params.Messages[len(params.Messages)-1]
	for _, b := range last.Content {
		if r := b.OfToolResult; r != nil {
			fmt.Println(r.ToolUseID, r.Content[0].OfText.Text)
		} else if b.OfText != nil {
			fmt.Println("text")
		}
	}
	// Output:
	// 6 tools; <nil>
	// 2 system blocks; 3 messages
	// toolu_1 ["lsm.txt"]
	// toolu_2 {"tasks":[],"total":0}
	// text
}
