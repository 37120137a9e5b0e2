package bgopenai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
)

// scriptedChat is a Chat Completions endpoint that answers with replies in
// order (the last one again once they are used up), and a client of the
// SDK that talks to it. close stops the server.
func scriptedChat(replies ...string) (client openai.Client, close func()) {
	var mu sync.Mutex // guards replies
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reply := replies[0]
		if len(replies) > 1 {
			replies = replies[1:]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, reply)
	}))
	return openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("none"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0)), srv.Close
}

// The README's "Framework adapters": one Chat Completions step with the
// Toolset, a host tool beside bgtask's, and the events the Plugin
// delivered.
func Example_readmeChat() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	runID := "run-1"
	client, stop := scriptedChat(chatReply([]scriptedCall{{"call_1", "search", `{"query":"lsm"}`}, {"call_2", "list_tasks", "{}"}}, ""))
	defer stop()
	search := agent.Tool{
		Name:        "search",
		Description: "Searches the notes.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{"query":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`["lsm.txt"]`), nil
		},
	}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Find my notes on LSM trees.")}
	delivered := []agent.PromptMessage{{Role: "user", Content: "<background-task-event …>…</background-task-event>", Internal: true}}

	ts, err := bgopenai.New(append(agent.Tools(owner), search)) // strict function calling; bgopenai.WithStrict(false) to turn it off
	params := openai.ChatCompletionNewParams{Model: openai.ChatModelGPT5, Messages: msgs, Tools: ts.ChatTools()}
	resp, err := client.Chat.Completions.New(ctx, params)
	msg := resp.Choices[0].Message
	answers, err := ts.AnswerChat(ctx, msg, bgopenai.WithRunID(runID)) // one tool message per call, in order
	params.Messages = append(append(params.Messages, msg.ToParam()), answers...)
	params.Messages = append(params.Messages, bgopenai.ChatPrompt(delivered)...) // plugin.BeforeInference's messages: events as user messages

	fmt.Println(len(params.Tools), "tools;", err)
	for _, a := range answers {
		fmt.Println(a.OfTool.ToolCallID, a.OfTool.Content.OfString.Value)
	}
	fmt.Println(len(params.Messages), "messages")
	// Output:
	// 6 tools; <nil>
	// call_1 ["lsm.txt"]
	// call_2 {"tasks":[],"total":0}
	// 5 messages
}

// chatParams builds a request of the conversation, this step's prompt and the
// tools.
func chatParams(conv, prompt []openai.ChatCompletionMessageParamUnion, tools []openai.ChatCompletionToolUnionParam) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: openai.ChatModelGPT5, Messages: append(conv[:len(conv):len(conv)], prompt...), Tools: tools}
}

// The README's "Running bgtask in a server": one turn of a request, on a
// context the client's hang-up does not cancel, through the Plugin's
// boundaries and the Toolset.
func Example_readmeServer() {
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	plugin, err := agent.NewPlugin(m, "thread-1", agent.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer plugin.Close(context.Background())
	ts, err := bgopenai.New(agent.Tools(plugin.Owner()))
	if err != nil {
		log.Fatal(err)
	}
	client, closeModel := scriptedChat(chatReply([]scriptedCall{{"call_1", "list_tasks", "{}"}}, ""), chatReply(nil, "Nothing runs."))
	defer closeModel()
	r := httptest.NewRequest(http.MethodPost, "/threads/thread-1/messages", strings.NewReader("What runs?"))
	runID, maxSteps := "run-1", 8
	conv := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What runs?")}
	var reply string

	turnCtx, stop := context.WithCancelCause(context.WithoutCancel(r.Context())) // stop(bgtask.ErrRunStopped) from POST /stop
	modelCtx, cancelModel := context.WithCancelCause(turnCtx)
	defer context.AfterFunc(r.Context(), func() { cancelModel(context.Cause(r.Context())) })() // a hang-up ends model calls only

	plugin.RunStart(turnCtx, bgtask.RunInfo{RunID: runID})
	defer func() { // Aborted: no answer, so the model has not heard the last step's events yet
		plugin.RunEnd(turnCtx, bgtask.RunOutcome{RunID: runID, Canceled: bgtask.RunStopped(turnCtx), Aborted: reply == ""})
	}()
	for step := 0; step < maxSteps; step++ {
		msgs, _ := plugin.BeforeInference(turnCtx) // the events, once each: into the response and the conversation
		resp, err := client.Chat.Completions.New(modelCtx, chatParams(conv, bgopenai.ChatPrompt(msgs), ts.ChatTools()))
		if err != nil {
			break // stopped, client gone, or the model failed: the turn's end says which
		}
		if len(resp.Choices[0].Message.ToolCalls) == 0 {
			reply = resp.Choices[0].Message.Content // the answer
			break
		}
		answers, _ := ts.AnswerChat(turnCtx, resp.Choices[0].Message, bgopenai.WithRunID(runID)) // every call answered, even with an error
		conv = append(append(conv, resp.Choices[0].Message.ToParam()), answers...)
		plugin.AfterToolCall(turnCtx, bgtask.ToolCall{RunID: runID})
		plugin.StepEnd(turnCtx)
	}

	stop(nil)
	fmt.Println("answer:", reply)
	fmt.Println(len(conv), "messages in the conversation")
	// Output:
	// answer: Nothing runs.
	// 3 messages in the conversation
}
