package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's first command: the program runs to the end and prints every
// event and both final records.
func TestQuickstartRuns(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`"event_type":"progress","payload":{"percent":100}`,
		`"kind":"completed"`,
		"task indexer (task, ",
		`): completed {"files":42}`,
		"task writer (sub_agent, ",
		`): completed "draft for \"release notes\" from thread-1"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "event: "); n != 6 {
		t.Errorf("%d events printed, want 6 (4 progress, 2 completed):\n%s", n, text)
	}
}
