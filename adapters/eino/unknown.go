package bgeino

import (
	"context"

	"github.com/cloudwego/eino/components/tool"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
)

// UnknownTools returns the handler of compose.ToolsNodeConfig's
// UnknownToolsHandler for a ToolsNode of tools: a call of a tool that is
// not among them (a name the model made up) is answered, in its place
// among the reply's calls, with a text that names the tools, for the model
// to correct:
//
//	unknown tool "x": the tools are list_tasks, get_task, …
//
// instead of ending the run with an error, as a ToolsNode without a
// handler does. Give it the tools the node holds, bgtask's and the
// host's own:
//
//	compose.ToolsNodeConfig{Tools: tools, UnknownToolsHandler: bgeino.UnknownTools(tools)}
//
// The names are read from each tool's Info with the call's ctx (a tool
// whose Info fails is left out of the text). The handler never returns an
// error and is safe for concurrent use.
func UnknownTools(tools []tool.BaseTool) func(ctx context.Context, name, input string) (string, error) {
	return func(ctx context.Context, name, _ string) (string, error) {
		known := make([]agent.Tool, 0, len(tools))
		for _, t := range tools {
			if info, err := t.Info(ctx); err == nil && info != nil {
				known = append(known, agent.Tool{Name: info.Name})
			}
		}
		return toolcall.UnknownText(name, known), nil
	}
}
