package bgtask

import (
	"encoding/json"
	"strings"
)

// renderEvent turns one event into what the model sees (D7): a direct
// message keeps its role and text; anything else is one internal user
// message, awaken's wrapper around the event's compact JSON:
//
//	<background-task-event kind="completed" task_id="task_…">{"kind":"completed",…}</background-task-event>
func renderEvent(ev *Event) PromptMessage {
	if msg, ok := ev.Message(); ok {
		return PromptMessage{Role: "user", Content: msg.Content, From: msg.From, Event: ev}
	}
	body, err := json.Marshal(ev)
	if err != nil { // an event this package did not make: say so rather than drop it
		body, _ = json.Marshal(map[string]string{"kind": string(ev.Kind), "task_id": ev.TaskID, "error": err.Error()})
	}
	var b strings.Builder
	b.WriteString(`<background-task-event kind="`)
	b.WriteString(xmlAttr(string(ev.Kind)))
	b.WriteString(`" task_id="`)
	b.WriteString(xmlAttr(ev.TaskID))
	b.WriteString(`">`)
	b.Write(body)
	b.WriteString(`</background-task-event>`)
	return PromptMessage{Role: "user", Content: b.String(), Internal: true, Event: ev}
}

// RenderTaskView renders the prompt view of tasks (Appendix A of the
// reference): one line per task with its id, type, name, status,
// description, parent and open input request, and a hint naming the tools.
// It returns "" for no tasks.
func RenderTaskView(tasks []TaskMeta) string {
	if len(tasks) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<background_tasks>\n")
	for i := range tasks {
		t := &tasks[i]
		b.WriteString(`<task id="` + xmlAttr(t.ID) + `" type="` + xmlAttr(t.Type) + `"`)
		attr := func(name, v string) {
			if v != "" {
				b.WriteString(" " + name + `="` + xmlAttr(v) + `"`)
			}
		}
		attr("name", t.Name)
		attr("status", string(t.Status))
		attr("description", t.Description)
		attr("parent_task_id", t.Parent.TaskID)
		if t.Input != nil {
			attr("input_request_id", t.Input.ID)
			attr("input_prompt", t.Input.Prompt)
		}
		b.WriteString("/>\n")
	}
	b.WriteString("</background_tasks>\n")
	b.WriteString(`Use "list_tasks" and "get_task" to check on them, "wait_task" to wait, "send_message" to message a sub-agent or answer an input request, and "cancel_task" to stop one.`)
	return b.String()
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&quot;", "\n", "&#10;", "\r", "&#13;", "\t", "&#9;")

// xmlAttr escapes s for a double-quoted XML attribute, so a task's name or
// description cannot break out of the view.
func xmlAttr(s string) string { return attrEscaper.Replace(s) }

// ParseEventMessage reads back the event of a message the Plugin rendered
// (<background-task-event …>{json}</background-task-event>), for a host or
// a model stand-in that needs the structured event again. ok is false for
// any other text.
func ParseEventMessage(content string) (ev Event, ok bool) {
	const open, end = `<background-task-event `, `</background-task-event>`
	if !strings.HasPrefix(content, open) || !strings.HasSuffix(content, end) {
		return Event{}, false
	}
	_, body, found := strings.Cut(content[:len(content)-len(end)], `">`)
	if !found || json.Unmarshal([]byte(body), &ev) != nil {
		return Event{}, false
	}
	return ev, true
}
