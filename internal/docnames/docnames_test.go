// Package docnames holds a test that keeps the repository's comments
// honest: a comment that names an exported identifier of one of bgtask's
// packages names one that exists. A rename that misses a comment fails it.
package docnames

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// pkg is what one package of the repository declares.
type pkg struct {
	dir     string
	names   map[string]bool            // exported top-level names
	members map[string]map[string]bool // type -> its exported methods and fields (embedded ones' too, by name)
	files   []*ast.File
}

// load parses every non-test Go file of the repository under root,
// grouped by package directory.
func load(t *testing.T, root string) (map[string][]*pkg, *token.FileSet, map[string]bool) {
	t.Helper()
	testNames := map[string]bool{}
	fset := token.NewFileSet()
	byDir := map[string]*pkg{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if strings.HasSuffix(path, "_test.go") { // its tests and benchmarks, which comments name
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
					testNames[fd.Name.Name] = true
				}
			}
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool { // the names of subtests, in tables
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && camelLit.MatchString(lit.Value) {
				testNames[strings.Trim(lit.Value, "\"`")] = true
			}
			return true
		})
		dir := filepath.Dir(path)
		p := byDir[dir]
		if p == nil {
			p = &pkg{dir: dir, names: map[string]bool{}, members: map[string]map[string]bool{}}
			byDir[dir] = p
		}
		p.files = append(p.files, f)
		declare(p, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]*pkg{}
	for _, p := range byDir {
		name := p.files[0].Name.Name
		byName[name] = append(byName[name], p)
	}
	return byName, fset, testNames
}

// declare adds what f declares to p.
func declare(p *pkg, f *ast.File) {
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.names[d.Name.Name] = true
				continue
			}
			typ := d.Recv.List[0].Type
			for {
				switch x := typ.(type) {
				case *ast.StarExpr:
					typ = x.X
					continue
				case *ast.IndexExpr:
					typ = x.X
					continue
				case *ast.IndexListExpr:
					typ = x.X
					continue
				}
				break
			}
			if id, ok := typ.(*ast.Ident); ok {
				member(id.Name, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					p.names[s.Name.Name] = true
					var fields *ast.FieldList
					switch x := s.Type.(type) {
					case *ast.StructType:
						fields = x.Fields
					case *ast.InterfaceType:
						fields = x.Methods
					}
					if fields == nil {
						member(s.Name.Name, "")
						continue
					}
					for _, fl := range fields.List {
						for _, n := range fl.Names {
							member(s.Name.Name, n.Name)
						}
						if len(fl.Names) == 0 { // embedded: its name, and its members once resolved
							member(s.Name.Name, embeddedName(fl.Type))
							member(s.Name.Name, "*"+embeddedName(fl.Type))
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.names[n.Name] = true
					}
				}
			}
		}
	}
}

func embeddedName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return embeddedName(x.X)
	}
	return ""
}

var (
	qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	selector  = regexp.MustCompile(`(^|[^\w.])([A-Z]\w*)\.([A-Z]\w*)\b`)
	camelLit  = regexp.MustCompile("^[\"`][A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+[\"`]$")
	camel     = regexp.MustCompile(`(^|[^\w.*])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\b([^.(]|$)`)
)

// external are the words in CamelCase that comments use and that no
// package of the repository declares: other projects' names and units,
// and identifiers of the libraries bgtask builds on.
var external = []string{
	"A2A", "Agent2Agent", "JavaScript", "TypeScript", "OpenAI", "OpenAPI", "OpenTelemetry", "PostgreSQL",
	"CloudWeGo", "LangChainGo", "ReAct", "KiB", "MiB", "ChaCha8",
	"CacheControl", "ToolsNode", "InvokableTool", "UnknownToolsHandler", "PreviousResponseID", "RunInBackground",
	"StopAndCancel", "WaitGroup", "CompareAndSwap", "TryLock", "MaxLineLength", "AfterConnect",
	"ReplaceAll", "TaskMetas",
}

// index is what the repository declares, as the tests below look it up.
type index struct {
	byName  map[string][]*pkg // package name -> its directories
	ours    map[string]bool   // the repository's package names, but main
	anyName map[string]bool   // every declared name and member, tests' and external words
}

// newIndex loads the repository under root.
func newIndex(t *testing.T, root string) (*index, *token.FileSet) {
	t.Helper()
	byName, fset, anyName := load(t, root)
	ix := &index{byName: byName, ours: map[string]bool{}, anyName: anyName}
	for name := range byName {
		if name != "main" {
			ix.ours[name] = true
		}
	}
	for _, w := range external {
		anyName[w] = true
	}
	for _, ps := range byName {
		for _, p := range ps {
			for n := range p.names {
				anyName[n] = true
			}
			for _, ms := range p.members {
				for n := range ms {
					anyName[n] = true
				}
			}
		}
	}
	return ix, fset
}

// has reports whether package pkgName declares name (and name's member,
// when member is not empty).
func (ix *index) has(pkgName, name, member string) bool {
	for _, p := range ix.byName[pkgName] {
		if !p.names[name] {
			continue
		}
		if member == "" || hasMember(p, ix.byName, name, member, 0) {
			return true
		}
	}
	return false
}

// hasSelector reports whether typ.member exists: in p when p declares typ
// (p may be nil), else in any package that declares typ. A type no
// package declares is someone else's and passes.
func (ix *index) hasSelector(p *pkg, typ, member string) bool {
	var cands []*pkg
	if p != nil && p.members[typ] != nil {
		cands = []*pkg{p}
	} else {
		for name, qs := range ix.byName {
			if name == "main" {
				continue
			}
			for _, q := range qs {
				if q.members[typ] != nil {
					cands = append(cands, q)
				}
			}
		}
	}
	found := len(cands) == 0
	for _, q := range cands {
		found = found || hasMember(q, ix.byName, typ, member, 0)
	}
	return found
}

// core reports whether the file at rel (slash or OS separated, from the
// repository's root) is in a package whose comments speak of bgtask's own
// names only: not a protocol server's, an adapter's or an example's, whose
// comments also name the protocol's or the SDK's types unqualified.
func core(rel string) bool {
	rel = filepath.ToSlash(rel)
	for _, dir := range []string{"mcp/", "a2a/", "adapters/", "otel/", "examples/", "bench/", "cmd/"} {
		if strings.HasPrefix(rel, dir) {
			return false
		}
	}
	return true
}

// TestCommentsNameIdentifiersThatExist fails when a comment of a non-test
// file names what no package of the repository declares: pkg.Name or
// pkg.Type.Member for a package of the repository (in every file), and,
// in the core packages (see core), Type.Member for a type of one of them,
// or a bare name in CamelCase that is neither one of theirs, nor a
// test's, nor an external word.
func TestCommentsNameIdentifiersThatExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ix, fset := newIndex(t, root)
	var bad []string
	for _, ps := range ix.byName {
		for _, p := range ps {
			for _, f := range p.files {
				for _, cg := range f.Comments {
					text := cg.Text()
					rel, _ := filepath.Rel(root, fset.Position(cg.Pos()).Filename)
					for _, m := range qualified.FindAllStringSubmatch(text, -1) {
						if ix.ours[m[1]] && !ix.has(m[1], m[2], m[3]) {
							bad = append(bad, rel+": "+strings.TrimSuffix(m[0], "."))
						}
					}
					if !core(rel) {
						continue // a protocol's or an SDK's own names: Type.Member and bare ones are theirs
					}
					for _, m := range selector.FindAllStringSubmatch(text, -1) {
						if !ix.hasSelector(p, m[2], m[3]) {
							bad = append(bad, rel+": "+m[2]+"."+m[3])
						}
					}
					for _, m := range camel.FindAllStringSubmatch(text, -1) {
						if !ix.anyName[m[2]] {
							bad = append(bad, rel+": bare "+m[2])
						}
					}
				}
			}
		}
	}
	sort.Strings(bad)
	bad = slices.Compact(bad)
	for _, b := range bad {
		t.Errorf("%s: no such identifier in the repository (renamed or removed?)", b)
	}
}

var (
	backquoted = regexp.MustCompile("`([^`\\n]+)`")
	// bareName is an exported-looking name alone in a span (not after a
	// dot, so not a selector's member): a name with a lower-case letter,
	// so SIGTERM and JSON are not taken for identifiers.
	bareName = regexp.MustCompile(`(^|[^\w.*])([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\b([^.]|$)`)
)

// markdownNames returns what the backquoted spans of a Markdown file name
// and the repository does not declare: pkg.Name or pkg.Type.Member for a
// package of the repository, Type.Member for a type of one of them, or a
// bare exported name that no package, test or external word has.
func markdownNames(ix *index, text string) []string {
	var bad []string
	for _, span := range backquoted.FindAllStringSubmatch(text, -1) {
		code := span[1]
		for _, m := range qualified.FindAllStringSubmatch(code, -1) {
			if ix.ours[m[1]] && !ix.has(m[1], m[2], m[3]) {
				bad = append(bad, strings.TrimSuffix(m[0], "."))
			}
		}
		for _, m := range selector.FindAllStringSubmatch(code, -1) {
			if !ix.hasSelector(nil, m[2], m[3]) {
				bad = append(bad, m[2]+"."+m[3])
			}
		}
		for _, m := range bareName.FindAllStringSubmatch(code, -1) {
			if !ix.anyName[m[2]] {
				bad = append(bad, "bare "+m[2])
			}
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad)
}

// TestDesignNamesIdentifiersThatExist fails when docs/design.md, the rules
// that hold today, names in backquotes an identifier the repository does
// not declare: design.md describes the code as it is, so a rename that
// misses it fails here (docs/decisions.md is the log and keeps old names).
func TestDesignNamesIdentifiersThatExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := newIndex(t, root)
	text, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range markdownNames(ix, string(text)) {
		t.Errorf("docs/design.md: %s: no such identifier in the repository (renamed or removed?)", b)
	}
}

var (
	entryNumber = regexp.MustCompile(`(?m)^(\d+)\. `)
	citation    = regexp.MustCompile(`\((\d+(?:,\s*\d+)*)\)\s*$`)
	number      = regexp.MustCompile(`\d+`)
)

// TestDesignCitesDecisionsThatExist fails when a rule of docs/design.md (a
// paragraph that starts in bold) does not end with the numbers of the
// docs/decisions.md entries that chose it, in parentheses, or cites a
// number that no entry has.
func TestDesignCitesDecisionsThatExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	decisions, err := os.ReadFile(filepath.Join(root, "docs", "decisions.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, m := range entryNumber.FindAllStringSubmatch(string(decisions), -1) {
		entries[m[1]] = true
	}
	rules := 0
	for _, para := range strings.Split(string(design), "\n\n") {
		if !strings.HasPrefix(para, "**") {
			continue
		}
		rules++
		rule, _, _ := strings.Cut(strings.TrimPrefix(para, "**"), "**")
		m := citation.FindStringSubmatch(para)
		if m == nil {
			t.Errorf("docs/design.md: rule %q cites no decision: end it with (N, M)", rule)
			continue
		}
		for _, n := range number.FindAllString(m[1], -1) {
			if !entries[n] {
				t.Errorf("docs/design.md: rule %q cites %s, which docs/decisions.md has no entry for", rule, n)
			}
		}
	}
	if rules == 0 {
		t.Error("docs/design.md: no rule found (a paragraph that starts in bold)")
	}
}

// hasMember reports whether type typ of p has member (a method or field),
// directly or through an embedded type of p.
func hasMember(p *pkg, byName map[string][]*pkg, typ, member string, depth int) bool {
	ms := p.members[typ]
	if ms[member] {
		return true
	}
	if depth > 3 {
		return false
	}
	for m := range ms {
		if strings.HasPrefix(m, "*") && hasMember(p, byName, m[1:], member, depth+1) {
			return true
		}
	}
	return false
}
