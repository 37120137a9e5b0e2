package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask"
)

// BackgroundMode says who decides whether a call of a tool that
// Background wraps runs in the background.
type BackgroundMode int

const (
	// ModelChooses (the zero value) adds the boolean run_in_background to
	// the tool's schema: the model sets it per call; false or null runs
	// the call in the foreground.
	ModelChooses BackgroundMode = iota
	// AlwaysBackground runs every call in the background; the schema is
	// unchanged.
	AlwaysBackground
	// NeverBackground runs every call in the foreground (promoted if it
	// outlives BackgroundOptions.Wait); the schema is unchanged.
	NeverBackground
)

// BackgroundParam is the argument Background adds to a tool's schema.
const BackgroundParam = "run_in_background"

// DefaultForegroundWait is BackgroundOptions.Wait's default.
const DefaultForegroundWait = 30 * time.Second

// BackgroundOptions configures Background. The zero value lets the model
// choose, waits DefaultForegroundWait in the foreground and streams
// nothing.
type BackgroundOptions struct {
	// Mode says who chooses the background: the model (the default), or
	// the host, always or never.
	Mode BackgroundMode
	// Wait is how long a foreground call waits for its task before it is
	// promoted to the background (bgtask.Owner.Foreground's d). 0 means
	// DefaultForegroundWait; a negative Wait makes Background fail. The
	// model never sets it, nor any other limit: they are the host's.
	Wait time.Duration
	// OnOutput, if set, gets what a foreground call's task writes to its
	// output (bgtask.Task.Output) while the call is in the foreground,
	// with the call's ctx (its bgtask.ToolCall names the call), each
	// piece's offset and the piece, in order, on the writing goroutine
	// (see bgtask.WithOutputFunc): a host streams it to its user's screen.
	// It is never called once the call has returned; p must not be kept.
	OnOutput func(ctx context.Context, offset int64, p []byte)
	// CancelOnStop makes a user's stop of the turn that made the call (the
	// turn's ctx ended, RunOutcome.Canceled) cancel the call's task, in the
	// background or in the foreground. By default it does not: work the
	// model put in the background, or that a stop found still in the
	// foreground (promoted then, as a hang-up is), goes on and its end is
	// announced at the owner's next run; the model or the user cancels it
	// with cancel_task. A sub-agent's calls are its children either way:
	// cancelling the sub-agent cancels them.
	CancelOnStop bool
	// SpawnOptions are given to every task the tool starts, after the
	// defaults (type: the tool's name; description: the tool's name and
	// its arguments, cut to 200 bytes): bgtask.WithTags, WithTimeout,
	// WithWakePolicy...
	SpawnOptions []bgtask.SpawnOption
}

// Background wraps a host's own tool so that its calls run as tasks of the
// owner o, in the background when the model asks (or always, or never,
// as opt.Mode says):
//
//   - in the background, the call spawns a task at once and its result is
//     a JSON object naming the task and saying that a notice will come
//     when it ends (so the model does not poll):
//     {"status":"started","task_id":id,"message":m}; the task's end
//     reaches the owner like any task's;
//   - in the foreground, the call is bgtask.Owner.Foreground with
//     opt.Wait: a call that ends in time returns the tool's own result or
//     error through ToolOutput (escaped and cut; the error still matches
//     what the tool's Call returned, so a bad argument matches
//     ErrToolArguments); one that outlives it is promoted, and its result is the
//     promotion notice, which carries the last part of what the task
//     wrote and the offset to read on from (get_task's output_since).
//
// The tool's Call runs in the task, with the task's context: it writes its
// output to bgtask.OutputFrom(ctx), and bgtask.TaskFromContext(ctx) is its
// task. Its arguments reach it without run_in_background. Its result
// must be JSON (it is the task's result, cut to Caps.MaxResultBytes).
//
// With ModelChooses the schema gains the property run_in_background,
// {"type":["boolean","null"]}, listed in "required" when the schema has a
// "required" (strict mode wants every key), and the description one line
// that says what it does. The call refuses a run_in_background that is
// neither a boolean nor null with an error matching ErrToolArguments:
// invalid arguments: "run_in_background" must be a boolean.
//
// Background fails if tool's Schema is not a JSON object with a
// "properties" object, if it has a run_in_background property already
// (with ModelChooses), if Call is nil, or if opt.Wait is negative. The
// returned Tool is safe for concurrent use if tool is.
func Background(o bgtask.Owner, tool Tool, opt BackgroundOptions) (Tool, error) {
	switch {
	case tool.Call == nil:
		return Tool{}, fmt.Errorf("agent: Background: tool %q has no Call", tool.Name)
	case opt.Wait < 0:
		return Tool{}, fmt.Errorf("%w: agent: Background: negative Wait %v", bgtask.ErrInvalidArgument, opt.Wait)
	case opt.Wait == 0:
		opt.Wait = DefaultForegroundWait
	}
	out := tool
	switch opt.Mode {
	case ModelChooses:
		schema, err := withBackgroundParam(tool.Schema)
		if err != nil {
			return Tool{}, fmt.Errorf("agent: Background: tool %q: %w", tool.Name, err)
		}
		out.Schema = schema
		out.Description += " Set " + BackgroundParam + " to true for work that may take long: you get a task id at once " +
			"and are notified when it ends; do not poll or wait for it."
	case AlwaysBackground:
		out.Description += " It runs in the background: you get a task id at once and are notified when it ends; do not poll or wait for it."
	case NeverBackground:
	default:
		return Tool{}, fmt.Errorf("%w: agent: Background: unknown mode %d", bgtask.ErrInvalidArgument, opt.Mode)
	}
	b := backgroundTool{o: o, tool: tool, opt: opt}
	out.Call = b.call
	return out, nil
}

// backgroundTool is a tool that Background wrapped.
type backgroundTool struct {
	o    bgtask.Owner
	tool Tool
	opt  BackgroundOptions
}

func (b backgroundTool) call(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	bg := b.opt.Mode == AlwaysBackground
	if b.opt.Mode == ModelChooses {
		var err error
		if raw, bg, err = takeBackgroundParam(raw); err != nil {
			return nil, err
		}
	}
	var callErr atomic.Pointer[error] // what the tool returned, for a foreground call that fails
	fn := func(ctx context.Context, _ *bgtask.Task) (any, error) {
		res, err := b.tool.Call(ctx, raw)
		if err != nil {
			callErr.Store(&err)
			return nil, err
		}
		if len(bytes.TrimSpace(res)) == 0 {
			return nil, nil
		}
		return res, nil
	}
	opts := []bgtask.SpawnOption{
		bgtask.WithType(b.tool.Name),
		bgtask.WithDescription(cutText(b.tool.Name+" "+string(raw), listDescriptionMax)),
	}
	_, inTask := bgtask.TaskFromContext(ctx)
	switch {
	case b.opt.CancelOnStop:
		opts = append(opts, bgtask.WithCancelOnAbandon())
	case !inTask:
		// A stop of the turn (CancelRun) does not reach it; a sub-agent's
		// call stays attached to the sub-agent, whose cancel reaches it.
		opts = append(opts, bgtask.WithDetached())
	}
	opts = append(opts, b.opt.SpawnOptions...)
	if bg {
		id, err := b.o.Spawn(ctx, fn, opts...)
		if err != nil {
			return nil, err
		}
		return toolJSON(startedNotice{Status: "started", TaskID: id, Message: "The call runs in the background as task " + id +
			". You will be notified when it ends: do not poll or wait for it, go on with other work. " +
			"To read its output as it goes, call get_task with output_since 0, then with each next_offset."})
	}
	if f := b.opt.OnOutput; f != nil {
		opts = append(opts, bgtask.WithOutputFunc(func(off int64, p []byte) { f(ctx, off, p) }))
	}
	res, err := b.o.Foreground(ctx, b.opt.Wait, fn, opts...)
	if _, failed := errors.AsType[*bgtask.TaskError](err); failed && !res.Promoted {
		if p := callErr.Load(); p != nil {
			// The tool's own error, as a plain call would return it: a bad
			// argument still matches ErrToolArguments, the model's mistake.
			return ToolOutput(nil, *p)
		}
	}
	if err == nil && res.Promoted {
		return res.Result, nil // the notice: escaped already, and never cut (its output part is bounded)
	}
	// What the task returned is as untrusted as what a background task
	// reports: escaped and cut as the Plugin shows a result.
	return ToolOutput(res.Result, err)
}

// startedNotice is the result of a call started in the background.
type startedNotice struct {
	Status  string `json:"status"` // "started"
	TaskID  string `json:"task_id"`
	Message string `json:"message"`
}

// withBackgroundParam returns schema with the run_in_background property
// added, and listed in "required" if it has one. The properties keep their
// order (a model reads them in it); the new one comes last.
func withBackgroundParam(schema json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil || top == nil {
		return nil, errors.New("schema is not a JSON object")
	}
	props := bytes.TrimSpace(top["properties"])
	var names map[string]json.RawMessage
	if err := json.Unmarshal(props, &names); err != nil || names == nil {
		return nil, errors.New(`schema has no "properties" object`)
	}
	if _, ok := names[BackgroundParam]; ok {
		return nil, fmt.Errorf("schema has a %q property already", BackgroundParam)
	}
	param := `"` + BackgroundParam + `":{"type":["boolean","null"],"description":` +
		jsonString("true to run the call in the background: you get a task id at once and a notice when it ends. false or null to wait for it here.") + `}`
	body := bytes.TrimSuffix(props, []byte("}"))
	if len(names) > 0 {
		param = "," + param
	}
	top["properties"] = json.RawMessage(string(body) + param + "}")
	if req, ok := top["required"]; ok {
		var list []string
		if err := json.Unmarshal(req, &list); err != nil {
			return nil, errors.New(`schema's "required" is not a list of names`)
		}
		top["required"], _ = json.Marshal(append(slices.Clip(list), BackgroundParam))
	}
	return json.Marshal(top)
}

// takeBackgroundParam returns the arguments raw without run_in_background,
// the other keys in their order, and its value (null or absent: false). A
// call whose arguments are not a JSON object is passed on as it is, for the
// tool to refuse.
func takeBackgroundParam(raw json.RawMessage) (json.RawMessage, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw, false, nil
	}
	var out bytes.Buffer
	out.WriteByte('{')
	bg, first := false, true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return raw, false, nil
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return raw, false, nil
		}
		if key == BackgroundParam {
			switch string(bytes.TrimSpace(v)) {
			case "true":
				bg = true
			case "false", "null":
				bg = false
			default:
				return nil, false, argError("%q must be a boolean", BackgroundParam)
			}
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return raw, false, nil
	}
	if _, err := dec.Token(); err != io.EOF { // trailing data: the tool refuses it
		return raw, false, nil
	}
	out.WriteByte('}')
	return out.Bytes(), bg, nil
}
