package bgtask_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleMarker is the line right before each ```go block of README.md:
// <!-- example: DIR/Name --> names the function (an Example, or a Test for
// a snippet that needs a *testing.T) in DIR's _test.go files that the
// block is taken from; DIR is a directory of the repository, left out (with
// its slash) for the root.
var exampleMarker = regexp.MustCompile(`^<!-- example: (?:([a-z0-9/._-]+)/)?([A-Z]\w*) -->$`)

// readmeSnippet is one ```go block of README.md.
type readmeSnippet struct {
	line      int    // the line of its ```go fence
	dir, name string // from its marker; name is "" without one
	text      string // the lines inside the fences
}

// readmeSnippets returns every ```go block of readme, with the marker on
// the line before it.
func readmeSnippets(readme string) ([]readmeSnippet, error) {
	var (
		out  []readmeSnippet
		prev string
		cur  *readmeSnippet
		body strings.Builder
	)
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case cur != nil && line == "```":
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		case line == "```go":
			cur = &readmeSnippet{line: i + 1}
			body.Reset()
			if m := exampleMarker.FindStringSubmatch(prev); m != nil {
				cur.dir, cur.name = m[1], m[2]
				if cur.dir == "" {
					cur.dir = "."
				}
			}
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: the ```go block is not closed", cur.line)
	}
	return out, nil
}

// findFunc returns the file of dir's _test.go files that declares the
// function name, and the function's body with each line without its first
// tab.
func findFunc(dir, name string) (file, body string, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return "", "", err
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return "", "", err
		}
		_, rest, ok := strings.Cut(string(src), "\nfunc "+name+"(")
		if !ok {
			continue
		}
		_, rest, ok = strings.Cut(rest, "{\n")
		if !ok {
			return "", "", fmt.Errorf("%s: func %s has no body", p, name)
		}
		rest, _, ok = strings.Cut(rest, "\n}\n")
		if !ok {
			return "", "", fmt.Errorf("%s: func %s is not closed", p, name)
		}
		return string(src), dedent(rest + "\n"), nil
	}
	return "", "", fmt.Errorf("no func %s in %s/*_test.go", name, dir)
}

// hasOutput reports whether an Example's body has an output comment that
// go test reads: a comment group that starts with "Output:" (a comment
// right before it would make it part of that group, and not run).
func hasOutput(body string) bool {
	prev := ""
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "// Output:") && !strings.HasPrefix(prev, "//") {
			return true
		}
		prev = line
	}
	return false
}

// dedent removes the first tab of each line of s.
func dedent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.TrimPrefix(line, "\t"))
	}
	return b.String()
}

// TestReadmeSnippetsAreExamples keeps every Go snippet of README.md
// compiling and truthful. Each ```go block has a marker naming a function
// of some package's tests (an Example, or a Test for a snippet that needs
// a *testing.T), and is, line for line, a run of lines of that function's
// body (the setup the prose leaves out comes before, the checks after) or,
// failing that, of its file, as it is (a function the snippet declares)
// or each line without its first tab (a function whose body the snippet
// is, that the Example calls). go
// test compiles those files in their own modules, runs the functions and
// checks an Example's output: an Example named here must have an
// // Output: comment.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets, err := readmeSnippets(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if len(snippets) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	for _, s := range snippets {
		if s.name == "" {
			t.Errorf("README.md:%d: the ```go block has no <!-- example: DIR/Name --> line before it", s.line)
			continue
		}
		file, body, err := findFunc(s.dir, s.name)
		if err != nil {
			t.Errorf("README.md:%d: %v", s.line, err)
			continue
		}
		if strings.HasPrefix(s.name, "Example") && !hasOutput(body) {
			t.Errorf("README.md:%d: %s/%s has no // Output: comment: go test would compile it but not run it", s.line, s.dir, s.name)
		}
		if strings.TrimSpace(s.text) == "" {
			t.Errorf("README.md:%d: the ```go block is empty", s.line)
			continue
		}
		if !strings.Contains("\n"+body, "\n"+s.text) && !strings.Contains("\n"+file, "\n"+s.text) && !strings.Contains("\n"+dedent(file), "\n"+s.text) {
			t.Errorf("README.md:%d: the Go snippet is not a run of lines of %s/%s (or of its file):\n--- README\n%s--- %s\n%s", s.line, s.dir, s.name, s.text, s.name, body)
		}
	}
}

// TestReadmeSnippets checks the block reader on its own: markers, the
// root's dir, a block without a marker, the lines kept.
func TestReadmeSnippets(t *testing.T) {
	readme := "# x\n\n<!-- example: agent/ExamplePlugin -->\n```go\na := 1\n\tb()\n```\n\n" +
		"```go\nno marker\n```\n<!-- example: ExampleInbox -->\n```go\n```\n```sh\nnot go\n```\n"
	got, err := readmeSnippets(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := []readmeSnippet{
		{line: 4, dir: "agent", name: "ExamplePlugin", text: "a := 1\n\tb()\n"},
		{line: 9, text: "no marker\n"},
		{line: 13, dir: ".", name: "ExampleInbox", text: ""},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("readmeSnippets:\ngot  %+v\nwant %+v", got, want)
	}
	for body, want := range map[string]bool{
		"f()\n// Output: 1\n":           true,
		"f()\n\t// Output:\n":           true,
		"f()\n":                         false,
		"f()\n// g()\n// Output:\n":     false,
		"f()\n// g()\n\n// Output: 1\n": true,
		"fmt.Println(\"// Output:\")\n": false,
	} {
		if got := hasOutput(body); got != want {
			t.Errorf("hasOutput(%q) = %v, want %v", body, got, want)
		}
	}
	if _, err := readmeSnippets("```go\nx\n"); err == nil || err.Error() != "README.md:1: the ```go block is not closed" {
		t.Errorf("an unclosed block: err = %v", err)
	}
}
