package bgtask_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/internal/testbuild"
)

// The README's Go blocks are read one after another: a name one block
// declares (search, plugin, ts) is the name a later block uses. Each block
// compiles inside its own function (TestReadmeSnippetsAreExamples), whose
// setup declares the names the block uses; so that the blocks also
// compile together, TestReadmeSnippetsAgree type-checks those functions
// and compares, for each name a block uses and another block declares,
// the two objects.

// snippetName is what a block says of a name: "var T", "func T",
// "package path" or "type T", types qualified by import path.
type snippetName struct {
	desc string
	pos  token.Position // in the Example's file
}

// snippetNames is what one block declares and uses.
type snippetNames struct {
	s        readmeSnippet
	declared map[string]snippetName // the names the block declares for what follows it
	used     map[string]snippetName // the names the block uses and its function declares outside it
}

// describe says what obj is, so that two objects of two packages compare.
func describe(obj types.Object) string {
	q := func(p *types.Package) string { return p.Path() }
	switch o := obj.(type) {
	case *types.PkgName:
		return "package " + o.Imported().Path()
	case *types.TypeName:
		return "type " + types.TypeString(o.Type(), q)
	case *types.Func:
		return "func " + types.TypeString(o.Type(), q)
	case *types.Const:
		return "const " + types.TypeString(o.Type(), q)
	default:
		return "var " + types.TypeString(obj.Type(), q)
	}
}

// snippetLines returns the line range [first, last] of the file that s is,
// line for line: as it is, or each line with one more tab (a function's
// body). It looks inside the function s names first.
func snippetLines(fset *token.FileSet, f *ast.File, src []byte, s readmeSnippet) (first, last int, ok bool) {
	lines := strings.Split(string(src), "\n")
	want := strings.Split(strings.TrimSuffix(s.text, "\n"), "\n")
	match := func(k int, indent string) bool {
		if k+len(want) > len(lines) {
			return false
		}
		for i, w := range want {
			if l := lines[k+i]; l != indent+w && !(w == "" && l == "") {
				return false
			}
		}
		return true
	}
	lo, hi := 0, len(lines)
	for _, d := range f.Decls {
		if fd, isFunc := d.(*ast.FuncDecl); isFunc && fd.Name.Name == s.name {
			lo, hi = fset.Position(fd.Pos()).Line-1, fset.Position(fd.End()).Line
		}
	}
	for _, r := range [][2]int{{lo, hi}, {0, len(lines)}} {
		for _, indent := range []string{"\t", ""} {
			for k := r[0]; k < r[1]; k++ {
				if match(k, indent) {
					return k + 1, k + len(want), true
				}
			}
		}
	}
	return 0, 0, false
}

// exportData lists, with go list -export, the compiled export data of every
// package the test packages of dirs import, by import path. A package the
// test of a dir recompiles (it, and what imports it) is listed per dir.
func exportData(t *testing.T, dirs []string) (shared map[string]string, forTest map[string]map[string]string) {
	t.Helper()
	work, err := filepath.Abs("go.work") // the tree's modules, whatever GOWORK the caller has
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"list", "-e", "-export", "-test", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	if testbuild.Race() {
		args = append(args, "-race") // the build the tests make anyway: no second compile of the SDKs
	}
	for _, d := range dirs {
		args = append(args, "./"+d)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	shared, forTest = map[string]string{}, map[string]map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, export, _ := strings.Cut(sc.Text(), "\t")
		if export == "" {
			continue
		}
		if p, variant, ok := strings.Cut(path, " ["); ok {
			test := strings.TrimSuffix(variant, "]")
			if forTest[test] == nil {
				forTest[test] = map[string]string{}
			}
			forTest[test][p] = export
			continue
		}
		shared[path] = export
	}
	return shared, forTest
}

// checkSnippetPackage type-checks the package of dir's test files that
// declares the functions of snippets, and returns what each block
// declares and uses.
func checkSnippetPackage(t *testing.T, dir string, snippets []readmeSnippet, exports func(path string) string) []snippetNames {
	t.Helper()
	fset := token.NewFileSet()
	var pkgName string
	for _, s := range snippets {
		file, _, err := findFunc(s.dir, s.name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), "", file, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if pkgName != "" && f.Name.Name != pkgName {
			t.Fatalf("%s: README blocks come from packages %s and %s", dir, pkgName, f.Name.Name)
		}
		pkgName = f.Name.Name
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	byName := map[string]*ast.File{}
	srcs := map[string][]byte{}
	for _, p := range paths {
		if ok, err := build.Default.MatchFile(dir, filepath.Base(p)); err != nil || !ok {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != pkgName {
			continue
		}
		files = append(files, f)
		byName[p], srcs[p] = f, src
	}
	lookup := func(path string) (io.ReadCloser, error) {
		e := exports(path)
		if e == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(e)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(pkgName, fset, files, info)
	if err != nil {
		t.Fatalf("%s: type-checking package %s: %v", dir, pkgName, err)
	}

	var out []snippetNames
	for _, s := range snippets {
		var file string
		var f *ast.File
		for p, pf := range byName {
			if strings.Contains(string(srcs[p]), "\nfunc "+s.name+"(") {
				file, f = p, pf
			}
		}
		if f == nil {
			t.Fatalf("README.md:%d: no file of %s declares %s", s.line, dir, s.name)
		}
		first, last, ok := snippetLines(fset, f, srcs[file], s)
		if !ok {
			t.Fatalf("README.md:%d: the block is not in %s", s.line, file)
		}
		in := func(p token.Pos) bool {
			l := fset.Position(p)
			return l.Filename == file && l.Line >= first && l.Line <= last
		}
		sn := snippetNames{s: s, declared: map[string]snippetName{}, used: map[string]snippetName{}}
		for id, obj := range info.Defs {
			// A name flows to the next blocks when its scope began before
			// the block: the function's body (or the file's, for a
			// function the block declares), not a closure or a loop of the
			// block.
			if obj == nil || id.Name == "_" || !in(id.Pos()) {
				continue
			}
			if v, isVar := obj.(*types.Var); isVar && v.IsField() {
				continue
			}
			if sc := obj.Parent(); sc == nil || (sc != pkg.Scope() && in(sc.Pos())) {
				continue
			}
			sn.declared[id.Name] = snippetName{describe(obj), fset.Position(id.Pos())}
		}
		for id, obj := range info.Uses {
			if !in(id.Pos()) || in(obj.Pos()) || obj.Pkg() == nil {
				continue
			}
			_, isPkg := obj.(*types.PkgName)
			if !isPkg && obj.Pkg() != pkg {
				continue // a name of another package, reached through a selector
			}
			if v, isVar := obj.(*types.Var); isVar && v.IsField() {
				continue
			}
			if fn, isFunc := obj.(*types.Func); isFunc && fn.Signature().Recv() != nil {
				continue
			}
			sn.used[id.Name] = snippetName{describe(obj), fset.Position(id.Pos())}
		}
		out = append(out, sn)
	}
	return out
}

// TestReadmeSnippetsAgree checks that the README's Go blocks compile
// together: a name one block uses that another block declares is the
// same thing in both (a search tool built as one type and later handed on
// as another, a variable that hides a package a later block imports).
// Each block's names are read from the type-checked function it is taken
// from (see TestReadmeSnippetsAreExamples).
func TestReadmeSnippetsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the test packages of every module a README block comes from")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets, err := readmeSnippets(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	byDir := map[string][]readmeSnippet{}
	for _, s := range snippets {
		if s.name != "" {
			byDir[s.dir] = append(byDir[s.dir], s)
		}
	}
	dirs := slices.Sorted(func(yield func(string) bool) {
		for d := range byDir {
			if !yield(d) {
				return
			}
		}
	})
	shared, forTest := exportData(t, dirs)
	var all []snippetNames
	for _, dir := range dirs {
		importPath := "github.com/bgtask/bgtask"
		if dir != "." {
			importPath += "/" + dir
		}
		variants := forTest[importPath+".test"]
		exports := func(path string) string {
			if e, ok := variants[path]; ok {
				return e
			}
			return shared[path]
		}
		all = append(all, checkSnippetPackage(t, dir, byDir[dir], exports)...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s.line < all[j].s.line })

	for _, b := range all {
		for name, use := range b.used {
			var decls []string
			agree := false
			for _, a := range all {
				d, ok := a.declared[name]
				if !ok || a.s.line == b.s.line {
					continue
				}
				agree = agree || d.desc == use.desc
				decls = append(decls, fmt.Sprintf("README.md:%d (%s) declares it %s", a.s.line, a.s.name, d.desc))
			}
			if len(decls) > 0 && !agree {
				t.Errorf("README.md:%d (%s) uses %s as %s, but\n\t%s", b.s.line, b.s.name, name, use.desc, strings.Join(decls, "\n\t"))
			}
		}
	}
}
