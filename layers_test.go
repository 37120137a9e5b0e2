package bgtask

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// modelLayer reports whether a source file of this package belongs to the
// model-facing layer: what the model sees and calls (the plugin, its
// rendering, the tools). Every other file is the runtime.
func modelLayer(name string) bool {
	return name == "plugin.go" || strings.HasPrefix(name, "plugin_") || name == "render.go" || name == "tools.go" || strings.HasPrefix(name, "tools_")
}

// TestRuntimeDoesNotUseModelLayer keeps the line between the runtime and
// the model-facing layer: no runtime file uses a name that a model-layer
// file declares, so the runtime can be read, changed and tested without the
// plugin, and the model layer is one client of the runtime's API among others.
func TestRuntimeDoesNotUseModelLayer(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]*ast.File{}
	modelNames := map[string]string{} // name -> the model file declaring it
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
		if !modelLayer(name) {
			continue
		}
		for _, d := range f.Decls {
			for _, n := range declaredNames(d) {
				modelNames[n] = name
			}
		}
	}
	var crossings []string
	for name, f := range parsed {
		if modelLayer(name) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			if decl, ok := modelNames[id.Name]; ok {
				crossings = append(crossings, fset.Position(id.Pos()).String()+": "+id.Name+" (declared in "+decl+")")
			}
			return true
		})
	}
	sort.Strings(crossings)
	crossings = slices.Compact(crossings)
	for _, c := range crossings {
		t.Error("runtime uses the model layer: " + c)
	}
}

// declaredNames lists the package-level names a declaration introduces:
// types, functions (not methods: a method name is reached through its
// receiver), variables and constants.
func declaredNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			names = append(names, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.Name != "_" {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}
