package bgtask

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxRootNames is the most exported top-level names (types, functions,
// constants, variables) the root package may have: it is the agent
// builder's page, and the store authors' and the runtime's own names live
// in other packages. 110 since decision 569 (three features this release).
const maxRootNames = 110

// exportedNames counts the exported names go doc shows for the package in
// dir: top-level names (a type's constructors, constants and variables
// included) and methods of exported types.
func exportedNames(t *testing.T, dir string) (topLevel, methods int) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if len(files) == 0 {
		return 0, 0
	}
	var list []*ast.File
	for _, f := range files {
		list = append(list, f)
	}
	p, err := doc.NewFromFiles(fset, list, "example.com/"+dir)
	if err != nil {
		t.Fatal(err)
	}
	values := func(vs []*doc.Value) (n int) {
		for _, v := range vs {
			n += len(v.Names)
		}
		return n
	}
	topLevel = values(p.Consts) + values(p.Vars) + len(p.Funcs)
	for _, ty := range p.Types {
		topLevel += 1 + values(ty.Consts) + values(ty.Vars) + len(ty.Funcs)
		methods += len(ty.Methods)
	}
	return topLevel, methods
}

// TestExportedNames keeps the root package an agent builder's page (at most
// maxRootNames top-level names) and prints the count of every package of
// this module (go test -v -run TestExportedNames).
func TestExportedNames(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." {
			if name := d.Name(); name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
		}
		top, methods := exportedNames(t, path)
		if top+methods > 0 {
			t.Logf("%-28s %3d top-level names, %3d methods", path, top, methods)
		}
		if path == "." && top > maxRootNames {
			t.Errorf("the root package exports %d top-level names, want at most %d", top, maxRootNames)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
