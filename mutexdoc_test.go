package bgtask_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// undocumentedMutexes returns a line for each sync.Mutex or sync.RWMutex
// (a struct field, embedded or named, or a variable) declared in src whose
// comment, beside it or above it, does not say what it guards: it must
// contain "guards" or "serializes".
func undocumentedMutexes(fset *token.FileSet, name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []string
	check := func(pos token.Pos, what string, typ ast.Expr, docs ...*ast.CommentGroup) {
		sel, ok := typ.(*ast.SelectorExpr)
		if !ok {
			return
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "sync" || (sel.Sel.Name != "Mutex" && sel.Sel.Name != "RWMutex") {
			return
		}
		if strings.HasSuffix(what, ".") {
			what += sel.Sel.Name // embedded
		}
		for _, d := range docs {
			if t := d.Text(); strings.Contains(t, "guards") || strings.Contains(t, "serializes") {
				return
			}
		}
		out = append(out, fmt.Sprintf("%s: %s (sync.%s) has no comment saying what it guards (\"guards ...\" or \"serializes ...\")",
			fset.Position(pos), what, sel.Sel.Name))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			st, ok := n.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				var names []string // none for an embedded mutex: check names it by its type
				for _, id := range fld.Names {
					names = append(names, id.Name)
				}
				check(fld.Pos(), n.Name.Name+"."+strings.Join(names, ", "), fld.Type, fld.Doc, fld.Comment)
			}
		case *ast.GenDecl:
			if n.Tok != token.VAR {
				return true
			}
			for _, spec := range n.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type == nil {
					continue
				}
				var names []string
				for _, id := range vs.Names {
					names = append(names, id.Name)
				}
				docs := []*ast.CommentGroup{vs.Doc, vs.Comment}
				if len(n.Specs) == 1 {
					docs = append(docs, n.Doc)
				}
				check(vs.Pos(), "var "+strings.Join(names, ", "), vs.Type, docs...)
			}
		}
		return true
	})
	return out, nil
}

// TestMutexesSayWhatTheyGuard checks every mutex of the root module's
// non-test files (nested modules have their own): each says beside it what
// it guards, so that the lock order in task.go can name them all.
func TestMutexesSayWhatTheyGuard(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			if name := d.Name(); name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines, err := undocumentedMutexes(fset, path, src)
		bad = append(bad, lines...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bad {
		t.Error(line)
	}
}

// TestUndocumentedMutexes checks the checker: which declarations it finds
// and the exact text it reports.
func TestUndocumentedMutexes(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"beside", "type s struct {\n\tmu sync.Mutex // guards n\n\tn int\n}", nil},
		{"above", "type s struct {\n\t// serializes Restore\n\tmu sync.RWMutex\n}", nil},
		{"none", "type s struct {\n\tmu sync.Mutex\n\tn int\n}", []string{
			`x.go:5:2: s.mu (sync.Mutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"British spelling", "type s struct {\n\tmu sync.Mutex // serialises n\n}", []string{
			`x.go:5:2: s.mu (sync.Mutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"protects", "type s struct {\n\tmu sync.RWMutex // protects n\n}", []string{
			`x.go:5:2: s.mu (sync.RWMutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"embedded", "type s struct {\n\tsync.Mutex\n}", []string{
			`x.go:5:2: s.Mutex (sync.Mutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"two names", "type s struct {\n\ta, b sync.Mutex\n}", []string{
			`x.go:5:2: s.a, b (sync.Mutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"variable", "func f() {\n\tvar mu sync.Mutex\n\t_ = &mu\n}", []string{
			`x.go:5:6: var mu (sync.Mutex) has no comment saying what it guards ("guards ..." or "serializes ...")`,
		}},
		{"variable in a block", "var (\n\tn  int\n\tmu sync.Mutex // guards n\n)", nil},
		{"other types", "type s struct {\n\tonce sync.Once\n\twg sync.WaitGroup\n\tm mutex\n}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\n\nimport \"sync\"\n" + tt.src + "\n"
			got, err := undocumentedMutexes(token.NewFileSet(), "x.go", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("undocumentedMutexes:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}
