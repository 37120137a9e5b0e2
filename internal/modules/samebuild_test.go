package modules_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// listedPackage is the part of `go list -deps -test -json` that decides what
// compiling and vetting a package is: its module at its version, its Go
// version, its files and the packages its imports resolve to. Two builds that
// list a package alike (and alike every package it imports, all the way
// down) compile and vet the same sources the same way.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Module     *struct {
		Path      string
		Version   string
		GoVersion string
		Replace   *struct{ Path, Version string }
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, FFiles, SFiles []string
	SwigFiles, SwigCXXFiles, SysoFiles, EmbedFiles                      []string
	TestGoFiles, XTestGoFiles, TestEmbedFiles, XTestEmbedFiles          []string
	Imports                                                             []string
}

// key is what two builds must agree on for the package: bgtask's own
// modules count as the same at the version the go.mod files require (the
// proxy's zip of the tree's files, which the file names then check) and in
// the tree (the workspace); every other module at its version and
// replacement.
func (p *listedPackage) key() string {
	var b strings.Builder
	if m := p.Module; m != nil {
		switch {
		case isOwn(m.Path):
			fmt.Fprintf(&b, "module %s (the tree's) go %s\n", m.Path, m.GoVersion)
		case m.Replace != nil:
			fmt.Fprintf(&b, "module %s %s => %s %s go %s\n", m.Path, m.Version, m.Replace.Path, m.Replace.Version, m.GoVersion)
		default:
			fmt.Fprintf(&b, "module %s %s go %s\n", m.Path, m.Version, m.GoVersion)
		}
	}
	for _, files := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles, p.FFiles, p.SFiles, p.SwigFiles, p.SwigCXXFiles, p.SysoFiles, p.EmbedFiles, p.TestGoFiles, p.XTestGoFiles, p.TestEmbedFiles, p.XTestEmbedFiles} {
		fmt.Fprintf(&b, "%q\n", files)
	}
	fmt.Fprintf(&b, "imports %q\n", p.Imports)
	return b.String()
}

// moduleOf names p's module and version for messages.
func (p *listedPackage) moduleOf() string {
	if p.Module == nil {
		return "no module"
	}
	return strings.TrimSpace(p.Module.Path + " " + p.Module.Version)
}

// listPackages runs `go list -deps -test -json` with args in dir and returns
// the packages by import path (a test variant, "p [p.test]", is a package of
// its own), the standard library's left out. Without -e, an import that no
// required module provides, a go.sum without a hash the build needs or a
// go.mod that -mod=readonly would have to update fails it, as it fails `go
// build`.
func listPackages(dir string, env []string, args ...string) (map[string]*listedPackage, error) {
	out, err := goCmdErr(dir, env, append([]string{"list", "-deps", "-test", "-json"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("go list -deps -test %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	pkgs := map[string]*listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := new(listedPackage)
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("go list -deps -test %s: %w", strings.Join(args, " "), err)
		}
		if !p.Standard {
			pkgs[p.ImportPath] = p
		}
	}
	return pkgs, nil
}

// sameBuild compares the packages a module's build lists alone with the
// workspace's: it returns how they differ (a line per module at another
// version, or per package otherwise listed), or "" when every package of the
// build is listed alike in the workspace. Then building the module alone
// compiles and vets the very sources the workspace's build does, with the
// same flags: the workspace's build is its build.
func sameBuild(alone, workspace map[string]*listedPackage) string {
	var diffs []string
	add := func(d string) {
		if !slices.Contains(diffs, d) {
			diffs = append(diffs, d)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(alone)) {
		a := alone[path]
		w, ok := workspace[path]
		switch {
		case !ok:
			add(fmt.Sprintf("%s (%s) is not in the workspace's build", path, a.moduleOf()))
		case a.Module != nil && w.Module != nil && a.Module.Path == w.Module.Path && a.Module.Version != w.Module.Version && !isOwn(a.Module.Path):
			add(fmt.Sprintf("%s %s alone, %s in the workspace", a.Module.Path, a.Module.Version, w.Module.Version))
		case a.key() != w.key():
			add(fmt.Sprintf("%s is listed otherwise alone:\n%s\nin the workspace:\n%s", path, a.key(), w.key()))
		}
	}
	if len(diffs) > 3 {
		diffs = append(diffs[:3], fmt.Sprintf("and %d more", len(diffs)-3))
	}
	return strings.Join(diffs, "; ")
}

// isOwn reports whether the module path p is one of bgtask's own.
func isOwn(p string) bool { return p == ownPrefix || strings.HasPrefix(p, ownPrefix+"/") }

// sameBuild finds a module's build alone to be the workspace's only when
// every package is listed alike: bgtask's own modules at their required
// version count as the tree's, anything else that differs is named.
func TestSameBuild(t *testing.T) {
	t.Parallel()
	pkg := func(path, mod, version string, files ...string) *listedPackage {
		p := &listedPackage{ImportPath: path, GoFiles: files, Imports: []string{"fmt"}}
		p.Module = &struct {
			Path      string
			Version   string
			GoVersion string
			Replace   *struct{ Path, Version string }
		}{Path: mod, Version: version, GoVersion: "1.26.0"}
		return p
	}
	workspace := map[string]*listedPackage{
		ownPrefix:             pkg(ownPrefix, ownPrefix, "", "a.go"),
		"example.com/dep/sub": pkg("example.com/dep/sub", "example.com/dep", "v1.2.0", "sub.go"),
	}
	for _, tc := range []struct {
		name  string
		alone *listedPackage
		want  string // "" for the same build, else a part of the difference
	}{
		{"own module at its required version", pkg(ownPrefix, ownPrefix, "v0.1.0", "a.go"), ""},
		{"third-party at the workspace's version", pkg("example.com/dep/sub", "example.com/dep", "v1.2.0", "sub.go"), ""},
		{"third-party at another version", pkg("example.com/dep/sub", "example.com/dep", "v1.1.0", "sub.go"), "example.com/dep v1.1.0 alone, v1.2.0 in the workspace"},
		{"own module without a file the tree has", pkg(ownPrefix, ownPrefix, "v0.1.0"), ownPrefix + " is listed otherwise alone"},
		{"a package the workspace does not build", pkg("example.com/other", "example.com/other", "v1.0.0", "o.go"), "example.com/other (example.com/other v1.0.0) is not in the workspace's build"},
	} {
		got := sameBuild(map[string]*listedPackage{tc.alone.ImportPath: tc.alone}, workspace)
		if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: sameBuild = %q, want %q", tc.name, got, tc.want)
		}
	}
}
