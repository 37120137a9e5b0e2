package bgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InputRequired is a round of questions a Tool's Prepare puts to the client
// before the call may run (a multi-round-trip input round, SEP-2322). The
// zero value, like a nil one, asks nothing.
type InputRequired struct {
	// Requests are the questions, keyed by ids the tool chooses
	// (*mcp.ElicitParams, *mcp.CreateMessageParams,
	// *mcp.CreateMessageWithToolsParams, *mcp.ListRootsParams); the
	// client answers each under its key in the next round's
	// Call.InputResponses.
	Requests mcp.InputRequestMap
	// State is opaque to the client, which sends it back as it is in the
	// next round's Call.RequestState. It passes through the client: a tool
	// that relies on it signs it and checks it.
	State string
}

// maxPrepareRounds bounds the rounds of questions bgmcp puts to a client
// of an older revision itself, as the SDK's own client bounds its retries.
const maxPrepareRounds = 10

// prepareCall runs t's Prepare, if any, on call. It returns the round of
// questions to answer (nil when the call may run), or the result the call
// answers with instead: Prepare's error as a tool result with isError, or
// as itself when it is a *jsonrpc.Error, and a panic as a tool result with
// isError.
func prepareCall(ctx context.Context, t *hostTool, call *Call) (ask *InputRequired, res *mcp.CallToolResult, err error) {
	if t.Prepare == nil {
		return nil, nil, nil
	}
	defer func() {
		if p := recover(); p != nil {
			ask, res, err = nil, errorResult(fmt.Errorf("bgmcp: tool %s: Prepare panicked: %v", t.Name, p)), nil
		}
	}()
	ask, err = t.Prepare(ctx, call)
	if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return nil, nil, rpcErr
	}
	if err != nil {
		return nil, errorResult(err), nil
	}
	if ask == nil || len(ask.Requests) == 0 {
		return nil, nil, nil
	}
	return ask, nil, nil
}

// gather runs Prepare's rounds for a client of an older revision, which
// knows no input-required result: bgmcp puts each round's questions to the
// client itself, as the session's own requests (elicitation/create,
// sampling/createMessage, roots/list), until Prepare lets the call run. It
// returns nil, nil then, else the result the call answers with.
func gather(ctx context.Context, ss *mcp.ServerSession, t *hostTool, call *Call) (*mcp.CallToolResult, error) {
	for range maxPrepareRounds {
		ask, res, err := prepareCall(ctx, t, call)
		if ask == nil {
			return res, err
		}
		responses, err := askSession(ctx, ss, ask.Requests)
		if err != nil {
			return errorResult(fmt.Errorf("bgmcp: tool %s: %w", t.Name, err)), nil
		}
		call.InputResponses, call.RequestState = responses, ask.State
	}
	return errorResult(fmt.Errorf("bgmcp: tool %s: still asking for input after %d rounds", t.Name, maxPrepareRounds)), nil
}

// askSession sends each request to the session's client, in the order of
// their keys, and returns the responses by key.
func askSession(ctx context.Context, ss *mcp.ServerSession, requests mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if ss == nil {
		return nil, errors.New("no session to ask for input")
	}
	out := make(mcp.InputResponseMap, len(requests))
	for _, key := range slices.Sorted(maps.Keys(requests)) {
		var (
			res mcp.InputResponse
			err error
		)
		switch p := requests[key].(type) {
		case *mcp.ElicitParams:
			res, err = ss.Elicit(ctx, p)
		case *mcp.CreateMessageParams:
			res, err = ss.CreateMessage(ctx, p)
		case *mcp.CreateMessageWithToolsParams:
			res, err = ss.CreateMessageWithTools(ctx, p)
		case *mcp.ListRootsParams:
			res, err = ss.ListRoots(ctx, p)
		default:
			err = fmt.Errorf("unknown kind %T", p)
		}
		if err != nil {
			return nil, fmt.Errorf("input request %q: %w", key, err)
		}
		out[key] = res
	}
	return out, nil
}

// Result types of a 2026-07-28 tools/call that bgmcp answers itself.
const resultInputRequired = "input_required"

// typedResult is a tool result of the 2026-07-28 revision that bgmcp
// answers itself, past the SDK's handler, which would otherwise set its
// resultType: "complete", or "input_required" for a round of questions.
type typedResult struct {
	*mcp.CallToolResult
	resultType string
}

func (r *typedResult) MarshalJSON() ([]byte, error) {
	return addFields(r.CallToolResult, func(obj map[string]json.RawMessage) error {
		obj["resultType"] = json.RawMessage(`"` + r.resultType + `"`)
		if string(obj["content"]) == "null" { // a round of questions has none
			delete(obj, "content")
		}
		return nil
	})
}

// inputRequiredResult is the answer of a 2026-07-28 tools/call that asks a
// round of questions.
func inputRequiredResult(ask *InputRequired) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: ask.Requests, RequestState: ask.State}
}
