package bgtask

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// ErrToolArguments is wrapped by every error a tool returns for bad
// arguments; its text is the prefix of theirs ("invalid arguments: …"). A
// host tells them from execution errors with errors.Is, for instance to
// show them to the model as a retryable mistake. A call with bad arguments
// has no effect.
var ErrToolArguments = errors.New("invalid arguments")

// argError is a bad-arguments error: "invalid arguments: " and the text.
func argError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrToolArguments, fmt.Sprintf(format, a...))
}

// Relations a tool's "target" or "to" may name.
const (
	relSelf   = "self"
	relChild  = "child"
	relParent = "parent"
)

// Arguments of each tool, as decoded. Their JSON encoding is an accepted
// input that decodes to the same value (the fuzz tests check it).
type (
	listArgs struct {
		Status TaskStatus `json:"status,omitempty"`
		Type   string     `json:"type,omitempty"`
	}
	getArgs struct {
		TaskID string `json:"task_id"`
	}
	relTarget struct {
		Relation string `json:"relation"`
		Name     string `json:"name,omitempty"`
	}
	cancelArgs struct {
		Target relTarget `json:"target"`
	}
	sendArgs struct {
		To        relTarget `json:"to"`
		Message   string    `json:"message"`
		InReplyTo string    `json:"in_reply_to,omitempty"`
	}
	waitArgs struct {
		TaskID         string `json:"task_id"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
)

// argObject is a JSON object's fields as read by readObject: a field given
// null is left out, as if absent.
type argObject map[string]json.RawMessage

// readTop reads the arguments of a call: exactly one JSON object, with only
// the known keys, each at most once.
func readTop(raw []byte, known ...string) (argObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	obj, err := readObject(dec, "", known)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, argError("trailing data after the JSON object")
	}
	return obj, nil
}

// readNested reads the object held by field path of an object already read.
func readNested(raw json.RawMessage, path string, known ...string) (argObject, error) {
	if raw[0] != '{' {
		return nil, argError("%q must be an object", path)
	}
	return readObject(json.NewDecoder(bytes.NewReader(raw)), path+".", known)
}

// readObject reads one object from dec; prefix names its fields in errors.
func readObject(dec *json.Decoder, prefix string, known []string) (argObject, error) {
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, argError("not a JSON object")
	case err != nil:
		return nil, argError("malformed JSON")
	case tok != json.Delim('{'):
		return nil, argError("not a JSON object")
	}
	obj := argObject{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, argError("malformed JSON")
		}
		key, _ := tok.(string) // a key is always a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, argError("malformed JSON")
		}
		switch {
		case !contains(known, key):
			return nil, argError("unknown field %q", prefix+key)
		case seen[key]:
			return nil, argError("duplicate field %q", prefix+key)
		}
		seen[key] = true
		if string(v) != "null" {
			obj[key] = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, argError("malformed JSON")
	}
	return obj, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// str returns the string field key (path names it in errors) and whether it
// was given.
func (o argObject) str(key, path string) (string, bool, error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, argError("%q must be a string", path)
	}
	return s, true, nil
}

// id returns a required identifier field, trimmed: missing and blank are
// errors.
func (o argObject) id(key, path string) (string, error) {
	s, ok, err := o.str(key, path)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", argError("missing %q", path)
	}
	return nonBlank(s, path)
}

// optID returns an optional identifier field, trimmed; given blank is an
// error (leave it out instead).
func (o argObject) optID(key, path string) (string, error) {
	s, ok, err := o.str(key, path)
	if err != nil || !ok {
		return "", err
	}
	return nonBlank(s, path)
}

func nonBlank(s, path string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", argError("%q is blank", path)
	}
	return s, nil
}

// integer returns the integer field key within [lo, hi], or def when it is
// absent. An integral number written as a float (30.0, 3e1) is accepted.
func (o argObject) integer(key string, lo, hi, def int) (int, error) {
	raw, ok := o[key]
	if !ok {
		return def, nil
	}
	var n json.Number
	if c := raw[0]; (c != '-' && (c < '0' || c > '9')) || json.Unmarshal(raw, &n) != nil {
		return 0, argError("%q must be an integer", key)
	}
	f, err := n.Float64()
	switch {
	case err == nil && f != math.Trunc(f):
		return 0, argError("%q must be an integer", key)
	case err != nil || f < float64(lo) || f > float64(hi):
		return 0, argError("%q must be from %d to %d", key, lo, hi)
	}
	return int(f), nil
}

// statusNames lists the statuses for the error of an unknown one.
func statusNames() string {
	var b strings.Builder
	for i, s := range Statuses() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

func decodeListArgs(raw []byte) (listArgs, error) {
	obj, err := readTop(raw, "status", "type")
	if err != nil {
		return listArgs{}, err
	}
	var a listArgs
	st, ok, err := obj.str("status", "status")
	switch {
	case err != nil:
		return listArgs{}, err
	case ok && !TaskStatus(st).Valid():
		return listArgs{}, argError("unknown status %q; valid: %s", st, statusNames())
	}
	a.Status = TaskStatus(st)
	if a.Type, err = obj.optID("type", "type"); err != nil {
		return listArgs{}, err
	}
	return a, nil
}

func decodeGetArgs(raw []byte) (getArgs, error) {
	obj, err := readTop(raw, "task_id")
	if err != nil {
		return getArgs{}, err
	}
	id, err := obj.id("task_id", "task_id")
	return getArgs{TaskID: id}, err
}

// decodeTarget reads the relation object in field key: relation one of
// rels, and a name exactly when the relation is child.
func decodeTarget(obj argObject, key string, rels ...string) (relTarget, error) {
	raw, ok := obj[key]
	if !ok {
		return relTarget{}, argError("missing %q", key)
	}
	t, err := readNested(raw, key, "relation", "name")
	if err != nil {
		return relTarget{}, err
	}
	relPath, namePath := key+".relation", key+".name"
	rel, ok, err := t.str("relation", relPath)
	switch {
	case err != nil:
		return relTarget{}, err
	case !ok:
		return relTarget{}, argError("missing %q", relPath)
	case !contains(rels, rel):
		return relTarget{}, argError("unknown relation %q in %q; valid: %s", rel, relPath, strings.Join(rels, ", "))
	}
	if rel != relChild {
		if _, given := t["name"]; given {
			return relTarget{}, argError("%q is not allowed with relation %q", namePath, rel)
		}
		return relTarget{Relation: rel}, nil
	}
	name, err := t.id("name", namePath)
	if err != nil {
		return relTarget{}, err
	}
	return relTarget{Relation: rel, Name: name}, nil
}

func decodeCancelArgs(raw []byte) (cancelArgs, error) {
	obj, err := readTop(raw, "target")
	if err != nil {
		return cancelArgs{}, err
	}
	t, err := decodeTarget(obj, "target", relSelf, relChild)
	return cancelArgs{Target: t}, err
}

func decodeSendArgs(raw []byte) (sendArgs, error) {
	obj, err := readTop(raw, "to", "message", "in_reply_to")
	if err != nil {
		return sendArgs{}, err
	}
	to, err := decodeTarget(obj, "to", relChild, relParent)
	if err != nil {
		return sendArgs{}, err
	}
	msg, ok, err := obj.str("message", "message")
	switch {
	case err != nil:
		return sendArgs{}, err
	case !ok:
		return sendArgs{}, argError("missing %q", "message")
	case strings.TrimSpace(msg) == "":
		return sendArgs{}, argError("%q is blank", "message")
	}
	reply, err := obj.optID("in_reply_to", "in_reply_to")
	switch {
	case err != nil:
		return sendArgs{}, err
	case reply != "" && to.Relation == relParent:
		return sendArgs{}, argError("%q is not allowed with relation %q", "in_reply_to", relParent)
	}
	return sendArgs{To: to, Message: msg, InReplyTo: reply}, nil
}

// Bounds of wait_task's timeout_seconds.
const (
	waitDefaultSeconds = 30
	waitMaxSeconds     = 300
)

func decodeWaitArgs(raw []byte, maxSeconds int) (waitArgs, error) {
	obj, err := readTop(raw, "task_id", "timeout_seconds")
	if err != nil {
		return waitArgs{}, err
	}
	id, err := obj.id("task_id", "task_id")
	if err != nil {
		return waitArgs{}, err
	}
	secs, err := obj.integer("timeout_seconds", 1, maxSeconds, min(waitDefaultSeconds, maxSeconds))
	if err != nil {
		return waitArgs{}, err
	}
	return waitArgs{TaskID: id, TimeoutSeconds: secs}, nil
}
