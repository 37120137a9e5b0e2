package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"
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

// Caps of the tools' string arguments, in characters (Unicode code points,
// as JSON Schema's maxLength counts them).
const (
	argTextMax    = 128    // an id, a name, a type
	argMessageMax = 16_384 // send_message's message
)

// Arguments of each tool, as decoded. Their JSON encoding is an accepted
// input that decodes to the same value (the fuzz tests check it).
type (
	listArgs struct {
		Status []bgtype.Status `json:"status,omitempty"`
		Type   string          `json:"type,omitempty"`
		Tag    string          `json:"tag,omitempty"`
		Limit  int             `json:"limit"`
		Cursor string          `json:"cursor,omitempty"`
		after  listCursor      // Cursor decoded; zero without one
	}
	getArgs struct {
		TaskID      string `json:"task_id"`
		OutputSince *int64 `json:"output_since,omitempty"`
		OutputTail  *int   `json:"output_tail,omitempty"`
	}
	relTarget struct {
		Relation string `json:"relation"`
		Name     string `json:"name,omitempty"`
	}
	cancelArgs struct {
		Target relTarget `json:"target"`
		Reason string    `json:"reason,omitempty"`
	}
	sendArgs struct {
		To        relTarget `json:"to"`
		Message   string    `json:"message"`
		InReplyTo string    `json:"in_reply_to,omitempty"`
	}
	waitArgs struct {
		TaskID         string `json:"task_id"`
		TimeoutSeconds int    `json:"timeout_seconds"`
		OutputSince    *int64 `json:"output_since,omitempty"`
	}
)

// argObject is a JSON object's fields as read by readObject: a field given
// null is left out, as if absent.
type argObject map[string]json.RawMessage

// readTop reads the arguments of a call: exactly one JSON object, with only
// the known keys. A repeated key counts once, with its last value.
func readTop(raw []byte, known ...string) (argObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	obj, fieldErr, err := readObject(dec, "", known)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, argError("trailing data after the JSON object")
	}
	return obj, fieldErr
}

// readNested reads the object held by field path of an object already read.
func readNested(raw json.RawMessage, path string, known ...string) (argObject, error) {
	if raw[0] != '{' {
		return nil, argError("%q must be an object", path)
	}
	obj, fieldErr, err := readObject(json.NewDecoder(bytes.NewReader(raw)), path+".", known)
	if err != nil {
		return nil, err
	}
	return obj, fieldErr
}

// readObject reads one object from dec; prefix names its fields in errors.
// A syntax error is err; the first unknown key is fieldErr, reported only
// once the input is known to be well formed.
//
// A repeated key keeps its last value (null included, which removes it), as
// JSON Schema validators and most JSON parsers read it: a host that checked
// the arguments against the schema saw the same call the tool runs. JSON
// Schema cannot refuse a repeated key, so refusing it here would make the
// schema promise a call the tool then rejects.
func readObject(dec *json.Decoder, prefix string, known []string) (obj argObject, fieldErr, err error) {
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, nil, argError("not a JSON object")
	case err != nil:
		return nil, nil, argError("malformed JSON")
	case tok != json.Delim('{'):
		return nil, nil, argError("not a JSON object")
	}
	obj = argObject{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, argError("malformed JSON")
		}
		key, _ := tok.(string) // a key is always a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, argError("malformed JSON")
		}
		if fieldErr == nil && !slices.Contains(known, key) {
			fieldErr = argError("unknown field %q", prefix+key)
		}
		if string(v) == "null" {
			delete(obj, key)
		} else {
			obj[key] = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, argError("malformed JSON")
	}
	return obj, fieldErr, nil
}

// str returns the string field key (path names it in errors) and whether it
// was given; a string longer than maxLen characters is an error.
func (o argObject) str(key, path string, maxLen int) (string, bool, error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	s, err := argString(raw, path)
	if err == nil && utf8.RuneCountInString(s) > maxLen {
		err = argError("%q is longer than %d characters", path, maxLen)
	}
	return s, err == nil, err
}

// argString decodes a JSON string value; path names it in errors.
func argString(raw json.RawMessage, path string) (string, error) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", argError("%q must be a string", path)
	}
	return s, nil
}

// id returns a required identifier field, trimmed: missing and blank are
// errors.
func (o argObject) id(key, path string) (string, error) {
	s, ok, err := o.str(key, path, argTextMax)
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
	s, ok, err := o.str(key, path, argTextMax)
	if err != nil || !ok {
		return "", err
	}
	return nonBlank(s, path)
}

// nonBlank returns s trimmed, or an error if nothing is left: blank is
// every character a space by unicode.IsSpace, as notBlankPattern says.
func nonBlank(s, path string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", argError("%q is blank", path)
	}
	return s, nil
}

// integer returns the integer field key within [lo, hi], or def when it is
// absent. An integral number written as a float (30.0, 3e1) is accepted; a
// number that is not integral is refused however close it is (1.0000000000000001),
// as JSON Schema's "integer" does.
func (o argObject) integer(key string, lo, hi, def int) (int, error) {
	raw, ok := o[key]
	if !ok {
		return def, nil
	}
	var n json.Number
	if c := raw[0]; (c != '-' && (c < '0' || c > '9')) || json.Unmarshal(raw, &n) != nil {
		return 0, argError("%q must be an integer", key)
	}
	v, integral, fits := exactInt(string(n))
	switch {
	case !integral:
		return 0, argError("%q must be an integer", key)
	case !fits || v < int64(lo) || v > int64(hi):
		return 0, argError("%q must be from %d to %d", key, lo, hi)
	}
	return int(v), nil
}

// exactInt reads a JSON number literal exactly, without rounding it to a
// float: whether it is an integer, and if so whether its magnitude is below
// 10^18, and then its value.
func exactInt(lit string) (v int64, integral, fits bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expText := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant, expText = lit[:i], lit[i+1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp := int64(0)
	if expText != "" {
		var err error
		if exp, err = strconv.ParseInt(expText, 10, 64); err != nil { // out of range: huge either way
			exp = 1 << 40
			if strings.HasPrefix(expText, "-") {
				exp = -exp
			}
		}
		exp = min(max(exp, -1<<40), 1<<40)
	}
	trimmed := strings.TrimRight(digits, "0")
	scale := exp - int64(len(frac)) + int64(len(digits)-len(trimmed)) // value = trimmed × 10^scale
	switch {
	case trimmed == "":
		return 0, true, true
	case scale < 0: // the last digit is not 0, so a fraction is left
		return 0, false, false
	case int64(len(trimmed))+scale > 18:
		return 0, true, false
	}
	v, _ = strconv.ParseInt(trimmed+strings.Repeat("0", int(scale)), 10, 64)
	if neg {
		v = -v
	}
	return v, true, true
}

// statusNames lists the statuses for the error of an unknown one.
func statusNames() string {
	var b strings.Builder
	for i, s := range bgtype.Statuses() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// Bounds of list_tasks' limit.
const (
	listDefaultLimit = 50
	listMaxLimit     = 200
)

func decodeListArgs(raw []byte) (listArgs, error) {
	obj, err := readTop(raw, "status", "type", "tag", "limit", "cursor")
	if err != nil {
		return listArgs{}, err
	}
	var a listArgs
	if a.Status, err = obj.statuses("status"); err != nil {
		return listArgs{}, err
	}
	if a.Type, err = obj.optID("type", "type"); err != nil {
		return listArgs{}, err
	}
	if a.Tag, err = obj.optID("tag", "tag"); err != nil {
		return listArgs{}, err
	}
	if a.Limit, err = obj.integer("limit", 1, listMaxLimit, listDefaultLimit); err != nil {
		return listArgs{}, err
	}
	cur, ok, err := obj.str("cursor", "cursor", listCursorMax)
	if err != nil || !ok {
		return a, err
	}
	if a.after, ok = parseListCursor(cur); !ok {
		return listArgs{}, argError("%q is not a next_cursor of list_tasks", "cursor")
	}
	a.Cursor = cur
	return a, nil
}

// statuses returns the optional status filter in field key: an array of
// distinct statuses, at least one.
func (o argObject) statuses(key string) ([]bgtype.Status, error) {
	raw, ok := o[key]
	if !ok {
		return nil, nil
	}
	var elems []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, argError("%q must be an array", key)
	}
	if len(elems) == 0 {
		return nil, argError("%q is empty", key)
	}
	out := make([]bgtype.Status, 0, len(elems))
	for i, e := range elems {
		s, err := argString(e, fmt.Sprintf("%s[%d]", key, i))
		switch st := bgtype.Status(s); {
		case err != nil:
			return nil, err
		case !st.Valid():
			return nil, argError("unknown status %q; valid: %s", s, statusNames())
		case slices.Contains(out, st):
			return nil, argError("%q lists %q twice", key, s)
		}
		out = append(out, bgtype.Status(s))
	}
	return out, nil
}

// Bounds of get_task's and wait_task's output arguments, in bytes.
const (
	outputReadMax  = 8 << 10 // what one read returns at most: output_tail's maximum
	outputSinceMax = 1 << 50 // output_since's maximum: far beyond any output
)

func decodeGetArgs(raw []byte) (getArgs, error) {
	obj, err := readTop(raw, "task_id", "output_since", "output_tail")
	if err != nil {
		return getArgs{}, err
	}
	id, err := obj.id("task_id", "task_id")
	if err != nil {
		return getArgs{}, err
	}
	args := getArgs{TaskID: id}
	if args.OutputSince, err = obj.optOffset("output_since"); err != nil {
		return getArgs{}, err
	}
	if _, ok := obj["output_tail"]; ok {
		n, err := obj.integer("output_tail", 1, outputReadMax, 0)
		if err != nil {
			return getArgs{}, err
		}
		if args.OutputSince != nil {
			return getArgs{}, argError(`"output_tail" is not allowed with "output_since"`)
		}
		args.OutputTail = &n
	}
	return args, nil
}

// optOffset returns the output offset in field key, or nil when it is
// absent.
func (o argObject) optOffset(key string) (*int64, error) {
	if _, ok := o[key]; !ok {
		return nil, nil
	}
	n, err := o.integer(key, 0, outputSinceMax, 0)
	if err != nil {
		return nil, err
	}
	v := int64(n)
	return &v, nil
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
	rel, ok, err := t.str("relation", relPath, argTextMax)
	switch {
	case err != nil:
		return relTarget{}, err
	case !ok:
		return relTarget{}, argError("missing %q", relPath)
	case !slices.Contains(rels, rel):
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
	obj, err := readTop(raw, "target", "reason")
	if err != nil {
		return cancelArgs{}, err
	}
	t, err := decodeTarget(obj, "target", relSelf, relChild)
	if err != nil {
		return cancelArgs{}, err
	}
	// A reason is optional, but one given must say something: blank is
	// refused, as the schema's pattern refuses it (null means no reason).
	reason, given, err := obj.str("reason", "reason", argReasonMax)
	if err == nil && given {
		reason, err = nonBlank(reason, "reason")
	}
	if err != nil {
		return cancelArgs{}, err
	}
	return cancelArgs{Target: t, Reason: reason}, nil
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
	msg, ok, err := obj.str("message", "message", argMessageMax)
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
	obj, err := readTop(raw, "task_id", "timeout_seconds", "output_since")
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
	since, err := obj.optOffset("output_since")
	if err != nil {
		return waitArgs{}, err
	}
	return waitArgs{TaskID: id, TimeoutSeconds: secs, OutputSince: since}, nil
}

// spaceChars is a regexp character class body of the characters
// unicode.IsSpace calls spaces: the ASCII ones as escapes, the others as
// characters, which every regexp dialect reads alike (JSON Schema's
// ECMA-262 and Go's RE2 disagree on what \s and \S mean).
const spaceChars = `\t\n\v\f\r ` + "\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

// notBlankPattern is the JSON Schema pattern of a string that is not
// blank: it has a character that unicode.IsSpace does not call a space. It
// is anchored at both ends, so it means the same to a validator that
// searches (JSON Schema) and to a constrained decoder that matches the
// whole string; [\s\S] is every character in both dialects.
const notBlankPattern = `^[` + spaceChars + `]*[^` + spaceChars + `][\s\S]*$`

// jsonString is s as a JSON string in ASCII: other characters are \u
// escapes, so a schema reads the same wherever it is shown.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// textSchema is the schema of a string argument that the decoder refuses
// when blank (the pattern says so too) or longer than maxLen characters
// (the description says so: strict mode has no maxLength). A nullable one
// may be null, which means left out.
func textSchema(maxLen int, nullable bool, desc string) string {
	return `{"type":` + nullableType("string", nullable) + `,"pattern":` + jsonString(notBlankPattern) +
		`,"description":` + jsonString(desc+" At most "+strconv.Itoa(maxLen)+" characters.") + `}`
}

// nullableType is the "type" of a schema: typ, or typ or null.
func nullableType(typ string, nullable bool) string {
	if nullable {
		return `["` + typ + `","null"]`
	}
	return `"` + typ + `"`
}
