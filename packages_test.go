package bgtask_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// modulePath is the root module's path; the graph writes it "bgtask".
const modulePath = "github.com/bgtask/bgtask"

// graphMarker is the line that opens docs/packages.md's graph block.
const graphMarker = "```text\n"

// importGraph regenerates docs/importgraph.sh's output: for every module
// of the repository (in the workspace of the root go.work, in the order of
// their directories), one
// line per non-main package, "pkg: imports" with only bgtask's own
// packages and modulePath shortened to "bgtask". It also returns the
// directory of every package, main ones included ("bgtask" for the root).
func importGraph(t *testing.T) (graph string, dirs []string) {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			mods = append(mods, "./"+filepath.ToSlash(filepath.Dir(path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range mods {
		if m == "./." {
			mods[i] = "."
		}
	}
	slices.Sort(mods) // as LC_ALL=C sort does in the script

	out := make([][]byte, len(mods))
	errs := make([]error, len(mods))
	var wg sync.WaitGroup
	work, err := filepath.Abs("go.work") // the tree's modules, whatever GOWORK the caller has
	if err != nil {
		t.Fatal(err)
	}
	for i, mod := range mods {
		wg.Go(func() {
			cmd := exec.Command("go", "list", "-f",
				`{{.Name}} {{.ImportPath}}: {{join .Imports " "}}`, "./...")
			cmd.Dir = mod
			cmd.Env = append(os.Environ(), "GOWORK="+work)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out[i], errs[i] = cmd.Output()
			if errs[i] != nil {
				errs[i] = fmt.Errorf("go list in %s: %w\n%s", mod, errs[i], stderr.Bytes())
			}
		})
	}
	wg.Wait()

	var b strings.Builder
	for i := range mods {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for line := range strings.Lines(string(out[i])) {
			fields := strings.Fields(strings.ReplaceAll(line, modulePath, "bgtask"))
			if len(fields) < 2 {
				continue
			}
			name, pkg := fields[0], fields[1]
			dir := strings.TrimSuffix(pkg, ":")
			if dir != "bgtask" {
				dir = strings.TrimPrefix(dir, "bgtask/")
			}
			dirs = append(dirs, dir)
			if name == "main" {
				continue
			}
			fields = fields[1:]
			b.WriteString(fields[0])
			sep := " "
			for _, imp := range fields[1:] {
				if imp == "bgtask" || strings.HasPrefix(imp, "bgtask/") {
					b.WriteString(sep + imp)
					sep = ", "
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String(), dirs
}

// parseGraph reads the graph's lines into each package's imports.
func parseGraph(graph string) map[string][]string {
	g := map[string][]string{}
	for line := range strings.Lines(graph) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), ":")
		g[pkg] = nil
		for imp := range strings.SplitSeq(imports, ",") {
			if imp = strings.TrimSpace(imp); imp != "" {
				g[pkg] = append(g[pkg], imp)
			}
		}
	}
	return g
}

// pathTo returns the shortest chain of imports from one package to
// another, "a → b → c", or "" when from does not reach to.
func pathTo(g map[string][]string, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			chain := []string{p}
			for p != from {
				p = prev[p]
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return strings.Join(chain, " → ")
		}
		for _, imp := range g[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return ""
}

// layerRules checks the one-way rules between the layers and returns one
// line per broken rule, naming the arrows.
func layerRules(g map[string][]string) []string {
	var broken []string
	// Nothing of the runtime's may reach these, even through another package.
	never := []struct {
		from []string
		to   []string
		why  string
	}{
		{[]string{"bgtask"}, []string{"bgtask/agent"}, "the runtime never imports the model layer"},
		{
			[]string{"bgtask/store/sqlitestore", "bgtask/store/pgstore"},
			[]string{"bgtask", "bgtask/agent", "bgtask/internal/memstore"},
			"a store imports the store authors' packages, not the runtime",
		},
	}
	for _, r := range never {
		for _, from := range r.from {
			for _, to := range r.to {
				if path := pathTo(g, from, to); path != "" {
					broken = append(broken, fmt.Sprintf("%s: %s", path, r.why))
				}
			}
		}
	}
	// These import nothing of bgtask but the packages listed.
	only := []struct {
		pkg     string
		allowed []string
	}{
		{"bgtask/bgtype", nil},
		{"bgtask/internal/reduce", []string{"bgtask/bgtype"}},
		{"bgtask/store", []string{"bgtask/bgtype", "bgtask/internal/reduce"}},
	}
	for _, r := range only {
		for _, imp := range g[r.pkg] {
			if !slices.Contains(r.allowed, imp) {
				broken = append(broken, fmt.Sprintf("%s → %s: %s imports no bgtask package%s",
					r.pkg, imp, r.pkg, but(r.allowed)))
			}
		}
	}
	return broken
}

// but names the packages a rule allows, for its failure text.
func but(pkgs []string) string {
	if len(pkgs) == 0 {
		return ""
	}
	return " but " + strings.Join(pkgs, " and ")
}

// TestPackagesImportGraph keeps docs/packages.md current: a row for every
// package and the import graph (both regenerated with go list in every
// module), and the layers one way.
func TestPackagesImportGraph(t *testing.T) {
	got, dirs := importGraph(t)
	for _, rule := range layerRules(parseGraph(got)) {
		t.Errorf("import graph: %s", rule)
	}

	doc, err := os.ReadFile("docs/packages.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if !strings.Contains(string(doc), "\n| `"+dir+"`") {
			t.Errorf("docs/packages.md has no row for package %s (a line starting \"| `%s`\")", dir, dir)
		}
	}
	_, rest, ok := strings.Cut(string(doc), "## Import graph\n")
	if !ok {
		t.Fatal("docs/packages.md has no \"## Import graph\" section")
	}
	_, rest, ok = strings.Cut(rest, graphMarker)
	if !ok {
		t.Fatal("docs/packages.md: the import graph section has no ```text block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/packages.md: the import graph block is not closed")
	}
	if block != got {
		t.Errorf("docs/packages.md's import graph is stale: run docs/importgraph.sh . and paste its output into the block\n--- docs/packages.md\n%s--- go list\n%s", block, got)
	}
}

// TestLayerRules checks that each one-way rule catches an arrow that
// breaks it, directly or through another package, with the arrow's text.
func TestLayerRules(t *testing.T) {
	const ok = `bgtask: bgtask/bgtype, bgtask/store, bgtask/internal/memstore
bgtask/agent: bgtask, bgtask/bgtype
bgtask/bgtype:
bgtask/internal/reduce: bgtask/bgtype
bgtask/internal/memstore: bgtask/bgtype, bgtask/internal/reduce, bgtask/store
bgtask/store: bgtask/bgtype, bgtask/internal/reduce
bgtask/store/sqlitestore: bgtask/bgtype, bgtask/store
bgtask/store/pgstore: bgtask/bgtype, bgtask/store
`
	tests := []struct {
		name  string
		extra string // a line appended to ok
		want  []string
	}{
		{"layered", "", nil},
		{"root imports agent", "bgtask: bgtask/agent\n", []string{
			"bgtask → bgtask/agent: the runtime never imports the model layer",
		}},
		{"root reaches agent through a package", "bgtask: bgtask/bgtype, bgtask/internal/y\nbgtask/internal/y: bgtask/agent\n", []string{
			"bgtask → bgtask/internal/y → bgtask/agent: the runtime never imports the model layer",
		}},
		{"sqlitestore imports the runtime", "bgtask/store/sqlitestore: bgtask/store, bgtask\n", []string{
			"bgtask/store/sqlitestore → bgtask: a store imports the store authors' packages, not the runtime",
			"bgtask/store/sqlitestore → bgtask → bgtask/internal/memstore: a store imports the store authors' packages, not the runtime",
		}},
		{"pgstore imports memstore", "bgtask/store/pgstore: bgtask/store, bgtask/internal/memstore\n", []string{
			"bgtask/store/pgstore → bgtask/internal/memstore: a store imports the store authors' packages, not the runtime",
		}},
		{"bgtype imports store", "bgtask/bgtype: bgtask/store\n", []string{
			"bgtask/bgtype → bgtask/store: bgtask/bgtype imports no bgtask package",
		}},
		{"reduce imports memstore", "bgtask/internal/reduce: bgtask/bgtype, bgtask/internal/memstore\n", []string{
			"bgtask/store/sqlitestore → bgtask/store → bgtask/internal/reduce → bgtask/internal/memstore: a store imports the store authors' packages, not the runtime",
			"bgtask/store/pgstore → bgtask/store → bgtask/internal/reduce → bgtask/internal/memstore: a store imports the store authors' packages, not the runtime",
			"bgtask/internal/reduce → bgtask/internal/memstore: bgtask/internal/reduce imports no bgtask package but bgtask/bgtype",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := layerRules(parseGraph(ok + tt.extra))
			if !slices.Equal(got, tt.want) {
				t.Errorf("layerRules:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}
