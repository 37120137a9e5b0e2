package bgtask

import (
	"context"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// TestDoorsMirror: a method name that both Manager and Owner have has the
// same shape on both doors (issue 34 §3, decision 700): the same results,
// and the same parameters once the Manager's owner (the string after ctx,
// or first without a ctx) is left out; a Manager method that spans owners
// (Get, Wait, Cancel of a task by id) has exactly the Owner's parameters.
func TestDoorsMirror(t *testing.T) {
	mt, ot := reflect.TypeFor[*Manager](), reflect.TypeFor[Owner]()
	ctxType := reflect.TypeFor[context.Context]()
	params := func(f reflect.Type, skip int) []reflect.Type {
		var in []reflect.Type
		for i := skip; i < f.NumIn(); i++ {
			in = append(in, f.In(i))
		}
		return in
	}
	results := func(f reflect.Type) []reflect.Type {
		var out []reflect.Type
		for i := range f.NumOut() {
			out = append(out, f.Out(i))
		}
		return out
	}
	shared := 0
	for i := range mt.NumMethod() {
		mm := mt.Method(i)
		om, ok := ot.MethodByName(mm.Name)
		if !ok {
			continue
		}
		shared++
		min, oin := params(mm.Type, 1), params(om.Type, 1) // past the receiver
		withOwner := slices.Clone(oin)
		at := 0
		if len(oin) > 0 && oin[0] == ctxType {
			at = 1
		}
		withOwner = slices.Insert(withOwner, at, reflect.TypeFor[string]())
		if !slices.Equal(min, oin) && !slices.Equal(min, withOwner) {
			t.Errorf("Manager.%s takes %v, Owner.%s %v: want the Owner's parameters, with the owner or without", mm.Name, min, om.Name, oin)
		}
		if mr, or := results(mm.Type), results(om.Type); !slices.Equal(mr, or) {
			t.Errorf("Manager.%s returns %v, Owner.%s %v: want the same", mm.Name, mr, om.Name, or)
		}
	}
	if shared < 8 {
		t.Fatalf("%d methods on both doors, want at least 8 (Get, Wait, Send, Inbox and the cancels)", shared)
	}
}

// TestTestFilesNameTheirSource: a test file is named after the source file
// whose code it tests (receiver_test.go, receiver_idle_test.go for
// receiver.go), so the file list leads from a concept to its tests; the
// exceptions are the package's helpers, examples, benchmarks and the
// checks of the repository itself (issue 34 §1).
func TestTestFilesNameTheirSource(t *testing.T) {
	meta := []string{"bench", "example", "helpers", "logcapture", "main", "mutexdoc", "names", "packages", "readme"}
	for _, dir := range []string{".", "agent"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var sources []string
		for _, e := range entries {
			if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				sources = append(sources, strings.TrimSuffix(n, ".go"))
			}
		}
		for _, e := range entries {
			stem, ok := strings.CutSuffix(e.Name(), "_test.go")
			if !ok {
				continue
			}
			named := func(s string) bool { return stem == s || strings.HasPrefix(stem, s+"_") }
			if !slices.ContainsFunc(sources, named) && !slices.ContainsFunc(meta, named) {
				t.Errorf("%s: names no source file of %s (want <source>_test.go or <source>_<what>_test.go)", filepath.Join(dir, e.Name()), dir)
			}
		}
	}
}
