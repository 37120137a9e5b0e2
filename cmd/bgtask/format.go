package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"
)

// clean makes task-controlled text safe to print on a terminal and in a
// table: control characters (newlines and tabs included), bidirectional
// overrides and invalid UTF-8 are written as escapes.
func clean(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsClean(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unsafeRune(r) {
			return true
		}
	}
	return false
}

// unsafeRune reports a rune that could move the cursor, change the
// terminal's state or reorder what follows it.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// orDash is s, cleaned, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// stamp writes a time in UTC to the second's fraction, "-" when unset.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// duration is how long m ran: from its start to its end, or to now while
// it is live; "-" when it never started or its end is unknown.
func duration(m bgtype.TaskMeta, now time.Time) string {
	end := m.FinishedAt
	if !m.Status.IsTerminal() {
		end = now
	}
	if m.StartedAt.IsZero() || end.IsZero() {
		return "-"
	}
	return fmtDuration(end.Sub(m.StartedAt))
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// progressText is the progress the task last reported (Task.ReportProgress),
// "" when the record carries none: "3/8 (37%) message" with a known total,
// "3 message" without one.
func progressText(m bgtype.TaskMeta) string {
	p := m.Progress
	if p == nil {
		return ""
	}
	s := strconv.FormatInt(p.Done, 10)
	if p.Total > 0 {
		s = fmt.Sprintf("%d/%d (%d%%)", p.Done, p.Total, p.Done*100/p.Total)
	}
	if p.Message != "" {
		s += " " + clean(p.Message)
	}
	return s
}
