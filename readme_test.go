package bgtask_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeSnippetIsExample keeps the README's first Go snippet compiling
// and truthful: it must be, line for line, the body of Example_readme, which
// go test compiles and whose output it checks.
func TestReadmeSnippetIsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	snippet, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md: the first ```go block is not closed")
	}

	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func Example_readme() {\n")
	if !ok {
		t.Fatal("example_readme_test.go has no Example_readme")
	}
	body, _, ok = strings.Cut(body, "\t// Output:")
	if !ok {
		t.Fatal("Example_readme has no // Output: block")
	}
	var want strings.Builder
	for line := range strings.Lines(body) {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if snippet != want.String() {
		t.Errorf("README.md's first Go snippet differs from Example_readme's body:\n--- README\n%s--- Example_readme\n%s", snippet, want.String())
	}
}
