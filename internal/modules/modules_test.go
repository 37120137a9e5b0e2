// The tests of this package check the repository's module wiring: that
// go.work lists every module, and that every module builds on its own
// (GOWORK=off, -mod=readonly) from its committed go.mod and go.sum, with the
// other bgtask modules it requires fetched at their required versions as `go
// get` would fetch them, not through replace directives.
//
// Nothing is published while the tests run, so a local GOPROXY (a directory in
// the proxy layout) serves the tree's own modules at the versions the go.mod
// files require, zipped from the files git tracks (or would: untracked files
// that are not ignored count too), as a tag of this commit would hold them.
// Their hashes cannot be stable (they change with every commit), so no go.sum
// lists bgtask's own modules: the test leaves them out of the checksum
// database (GONOSUMDB) and lets `go mod tidy` record the hashes of the zips it
// made, in a copy of the module, then checks that the copy's go.mod and go.sum
// are the committed ones (but for those lines) and loads the copy's packages
// and tests with its committed go.mod and go.sum plus those lines, read-only.
// Where every package it loads is the workspace's (the same module versions,
// files and imports), the workspace's build and vet, which the check runs
// once (test.sh's vet leaves it in the build cache), is the copy's;
// a copy that loads anything else builds and vets on its own. Last, a user's
// module outside the tree does what the README says: `go get` of every tagged
// module and `go install` of the inspector, at @latest.
//
// `go test ./internal/modules -run TestModulesBuildAlone -tidy` rewrites every
// module's go.mod and go.sum instead (what `go work sync` does, then `go mod
// tidy` in each module against the same local proxy) and go.work.sum: the
// step of the release checklist (docs/release.md) after a change of
// requirements.
package modules_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var tidy = flag.Bool("tidy", false, "instead of checking them, rewrite every module's go.mod and go.sum (requirements at the workspace's versions, go mod tidy against the tree's own modules) and go.work.sum")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ownPrefix is the path of the root module: every module of the repository
// has it as its path or a prefix of its path.
const ownPrefix = "github.com/bgtask/bgtask"

// module is one module of the repository.
type module struct {
	dir   string // slash-separated, relative to the repository's root ("." for the root)
	path  string // module path
	files []file // the files a tag would hold
}

// file is one file of a module, read once: the zips and the copies agree
// even if the tree changes while the test runs.
type file struct {
	name string // slash-separated, relative to the module's directory
	data []byte
}

// repoRoot is the repository's root: two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goCmd runs the go command in dir with env added to the test's environment
// and returns its combined output; it fails the test if the command fails.
func goCmd(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	out, err := goCmdErr(dir, env, args...)
	if err != nil {
		t.Fatalf("in %s: go %s: %v\n%s", dir, strings.Join(args, " "), err, out)
	}
	return out
}

// goCmdErr is goCmd that returns the command's error instead of failing.
func goCmdErr(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// workspaceDirs are the directories go.work uses, slash-separated and
// relative to the root, sorted.
func workspaceDirs(t *testing.T, root string) []string {
	t.Helper()
	out := goCmd(t, root, nil, "work", "edit", "-json", filepath.Join(root, "go.work"))
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, path.Clean(filepath.ToSlash(u.DiskPath)))
	}
	slices.Sort(used)
	return used
}

// The repository's go.work uses every module of the repository, so that
// `go doc` of any of them works from the root, test.sh runs each one in
// workspace mode and the readonly build below checks each one; and it maps
// the version of bgtask's modules that the go.mod files require to the tree,
// since that version is not tagged before the release.
func TestWorkspaceHasEveryModule(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var modules []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			modules = append(modules, path.Clean(filepath.ToSlash(rel)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(modules)
	if used := workspaceDirs(t, root); !slices.Equal(modules, used) {
		t.Errorf("go.work uses %q\nthe repository's modules are %q", used, modules)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work.sum")); err != nil {
		t.Error(err)
	}

	// go.work maps each module, at each version the modules require of
	// bgtask's own, to its directory, and replaces nothing else.
	var want, got []string
	versions := map[string]bool{}
	for _, dir := range modules {
		for _, r := range readModFile(t, filepath.Join(root, filepath.FromSlash(dir))).Require {
			if r.Path == ownPrefix || strings.HasPrefix(r.Path, ownPrefix+"/") {
				versions[r.Version] = true
			}
		}
	}
	for _, dir := range modules {
		p := readModFile(t, filepath.Join(root, filepath.FromSlash(dir))).Module.Path
		for v := range versions {
			want = append(want, p+" "+v+" => "+dir)
		}
	}
	var work struct {
		Replace []struct {
			Old struct{ Path, Version string }
			New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(goCmd(t, root, nil, "work", "edit", "-json", filepath.Join(root, "go.work")), &work); err != nil {
		t.Fatal(err)
	}
	for _, r := range work.Replace {
		got = append(got, strings.TrimSpace(r.Old.Path+" "+r.Old.Version)+" => "+path.Clean(filepath.ToSlash(r.New.Path))+strings.TrimSpace(" "+r.New.Version))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("go.work replaces%s\nwant (each module at the version the modules require, to its directory)%s", "\n\t"+strings.Join(got, "\n\t"), "\n\t"+strings.Join(want, "\n\t"))
	}
}

// Every module requires each third-party module at the version the workspace
// selects (the highest any module needs), as `go work sync` leaves them: the
// tests of test.sh, which run in the workspace, build what a user of any one
// module gets. splitDeps are the exceptions.
func TestOneVersionPerDependency(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	selected := workspaceSelection(t, root, "-mod=readonly")
	for _, dir := range workspaceDirs(t, root) {
		for _, r := range readModFile(t, filepath.Join(root, filepath.FromSlash(dir))).Require {
			if r.Path == ownPrefix || strings.HasPrefix(r.Path, ownPrefix+"/") {
				continue // ownVersions checks them
			}
			if _, ok := splitDeps[r.Path]; ok {
				continue
			}
			if v := selected[r.Path]; r.Version != v {
				t.Errorf("%s requires %s %s, the workspace selects %s (`go test ./internal/modules -run TestModulesBuildAlone -tidy` syncs them)", goModName(dir, "go.mod"), r.Path, r.Version, v)
			}
		}
	}
}

// workspaceSelection is the version of each module the workspace selects;
// goflags is the GOFLAGS of the go command.
func workspaceSelection(t *testing.T, root, goflags string) map[string]string {
	t.Helper()
	out := goCmd(t, root, []string{"GOWORK=" + filepath.Join(root, "go.work"), "GOFLAGS=" + goflags}, "list", "-m", "-json", "all")
	selected := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct{ Path, Version string }
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		selected[m.Path] = m.Version
	}
	return selected
}

// modFile is the part of `go mod edit -json` the test reads.
type modFile struct {
	Module  struct{ Path string }
	Require []struct {
		Path     string
		Version  string
		Indirect bool
	}
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

// readModFile reads the go.mod in dir.
func readModFile(t *testing.T, dir string) modFile {
	t.Helper()
	var mf modFile
	if err := json.Unmarshal(goCmd(t, dir, []string{"GOWORK=off"}, "mod", "edit", "-json"), &mf); err != nil {
		t.Fatal(err)
	}
	return mf
}

// listModules reads the workspace's modules and the files of each.
func listModules(t *testing.T, root string) []*module {
	t.Helper()
	var mods []*module
	for _, dir := range workspaceDirs(t, root) {
		mf := readModFile(t, filepath.Join(root, filepath.FromSlash(dir)))
		if mf.Module.Path != ownPrefix && !strings.HasPrefix(mf.Module.Path, ownPrefix+"/") {
			t.Fatalf("module %s in %s: not under %s", mf.Module.Path, dir, ownPrefix)
		}
		mods = append(mods, &module{dir: dir, path: mf.Module.Path})
	}
	// The files a commit would hold: tracked ones and untracked ones git does
	// not ignore (so a new file counts before it is committed), each in the
	// innermost module holding it. Files deleted from the work tree are gone.
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the check zips the files git would commit): %v", root, err)
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		var owner *module
		for _, m := range mods {
			if (m.dir == "." || f == m.dir || strings.HasPrefix(f, m.dir+"/")) && (owner == nil || len(m.dir) > len(owner.dir) || owner.dir == ".") {
				owner = m
			}
		}
		if owner == nil {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(f))
		if fi, err := os.Lstat(full); err != nil || !fi.Mode().IsRegular() {
			continue // deleted, or a symbolic link (a module zip holds neither)
		}
		data, err := os.ReadFile(full)
		if os.IsNotExist(err) {
			continue // deleted since
		}
		if err != nil {
			t.Fatal(err)
		}
		rel := f
		if owner.dir != "." {
			rel = strings.TrimPrefix(f, owner.dir+"/")
		}
		owner.files = append(owner.files, file{rel, data})
	}
	return mods
}

// escapePath is the module path as the proxy protocol spells it in URLs
// (an upper-case letter becomes '!' and its lower case).
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeProxy lays out in dir a module proxy serving each module at each
// version in versions, made of the module's files.
func writeProxy(t *testing.T, dir string, mods []*module, versions []string) {
	t.Helper()
	for _, m := range mods {
		var gomod []byte
		for _, f := range m.files {
			if f.name == "go.mod" {
				gomod = f.data
			}
		}
		if gomod == nil {
			t.Fatalf("%s: no go.mod among the files git would commit", m.dir)
		}
		vdir := filepath.Join(dir, filepath.FromSlash(escapePath(m.path)), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range versions {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			for _, f := range m.files {
				w, err := zw.Create(m.path + "@" + v + "/" + f.name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(f.data); err != nil {
					t.Fatal(err)
				}
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			info := fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, v)
			for name, data := range map[string][]byte{v + ".zip": buf.Bytes(), v + ".mod": gomod, v + ".info": []byte(info)} {
				if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(vdir, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ownVersions checks that every module requires the repository's modules
// without replace directives and at one release version, and returns the
// versions required (one, unless the check failed).
func ownVersions(t *testing.T, root string, mods []*module) []string {
	t.Helper()
	seen := map[string][]string{} // version -> "dir requires path"
	for _, m := range mods {
		mf := readModFile(t, filepath.Join(root, filepath.FromSlash(m.dir)))
		for _, r := range mf.Replace {
			if r.Old.Path == ownPrefix || strings.HasPrefix(r.Old.Path, ownPrefix+"/") {
				t.Errorf("%s replaces %s with %s: `go get` and `go install ...@latest` ignore replace directives (go.work builds the modules against the tree)", goModName(m.dir, "go.mod"), r.Old.Path, strings.TrimSpace(r.New.Path+" "+r.New.Version))
			}
		}
		for _, r := range mf.Require {
			if r.Path == ownPrefix || strings.HasPrefix(r.Path, ownPrefix+"/") {
				seen[r.Version] = append(seen[r.Version], m.dir+" requires "+r.Path)
			}
		}
	}
	var versions []string
	for v := range seen {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	if len(versions) > 1 {
		var b strings.Builder
		for _, v := range versions {
			fmt.Fprintf(&b, "\n%s: %s", v, strings.Join(seen[v], ", "))
		}
		t.Errorf("the modules require bgtask's own modules at %d versions, want one:%s", len(versions), b.String())
	}
	for _, v := range versions {
		if !isRelease(v) {
			t.Errorf("bgtask's own modules are required at %s (%s), want a release version vX.Y.Z", v, strings.Join(seen[v], ", "))
		}
	}
	return versions
}

// goModName is the path of dir's file name relative to the root, for messages.
func goModName(dir, name string) string {
	return path.Join(dir, name)
}

// isRelease reports whether v is vMAJOR.MINOR.PATCH, without pre-release or
// build suffix.
func isRelease(v string) bool {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if !strings.HasPrefix(v, "v") || len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
			return false
		}
	}
	return true
}

// isOwnSumLine reports whether a go.sum line is about one of bgtask's own
// modules.
func isOwnSumLine(line string) bool {
	p, _, _ := strings.Cut(line, " ")
	return p == ownPrefix || strings.HasPrefix(p, ownPrefix+"/")
}

// splitSum splits go.sum's content into its lines about bgtask's own modules
// and the rest.
func splitSum(data []byte) (own, rest []string) {
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "":
		case isOwnSumLine(line):
			own = append(own, line)
		default:
			rest = append(rest, line)
		}
	}
	return own, rest
}

// sumDiff describes the lines one go.sum has and the other lacks.
func sumDiff(committed, tidied []string) string {
	var b strings.Builder
	for _, l := range tidied {
		if !slices.Contains(committed, l) {
			fmt.Fprintf(&b, "\n+ %s", l)
		}
	}
	for _, l := range committed {
		if !slices.Contains(tidied, l) {
			fmt.Fprintf(&b, "\n- %s", l)
		}
	}
	return b.String()
}

// proxyEnv is the environment of the go commands of the check: the module
// proxy in proxyDir first for bgtask's own modules (outside the checksum
// database), then the module cache's downloads (so a warm cache needs no
// network), then the configured proxies; a private module cache, since the
// shared one must never hold unpublished versions of bgtask's modules.
func proxyEnv(t *testing.T, proxyDir, modCache string) []string {
	t.Helper()
	out, err := goCmdErr(".", []string{"GOWORK=off"}, "env", "GOMODCACHE", "GOPROXY")
	if err != nil {
		t.Fatalf("go env: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("go env GOMODCACHE GOPROXY: %q", out)
	}
	linkModCache(t, lines[0], modCache)
	proxies := []string{fileURL(proxyDir), fileURL(filepath.Join(lines[0], "cache", "download"))}
	if lines[1] != "" {
		proxies = append(proxies, lines[1])
	}
	return slices.Clip([]string{
		"GOPROXY=" + strings.Join(proxies, ","),
		"GONOSUMDB=" + ownPrefix,
		"GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
		"GOMODCACHE=" + modCache,
		"GOTOOLCHAIN=local",
	})
}

// linkModCache makes priv a module cache that holds bgtask's own modules
// alone and links everything else to the shared cache in shared, so that the
// third-party modules already there are neither copied nor extracted again.
// What go adds for a linked host or owner goes to the shared cache, as any
// download would.
func linkModCache(t *testing.T, shared, priv string) {
	t.Helper()
	// link links each entry of from in to, but those in skip.
	link := func(from, to string, skip ...string) {
		entries, err := os.ReadDir(from)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if slices.Contains(skip, e.Name()) {
				continue
			}
			if err := os.Symlink(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	// github.com/bgtask (ownPrefix's host and owner) is left out, in the
	// extracted modules and in cache/download; cache/lock and cache/vcs stay
	// private.
	host, rest, _ := strings.Cut(ownPrefix, "/")
	owner, _, _ := strings.Cut(rest, "/")
	download := filepath.Join("cache", "download")
	link(shared, priv, "cache", host)
	link(filepath.Join(shared, host), filepath.Join(priv, host), owner)
	link(filepath.Join(shared, download), filepath.Join(priv, download), host)
	link(filepath.Join(shared, download, host), filepath.Join(priv, download, host), owner)
}

func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

// Every module builds on its own, as a user's `go get` or `go install
// ...@latest` builds it: no replace directive, bgtask's own modules required at
// one release version and fetched at it, a tidy go.mod and go.sum (`go mod
// tidy` changes nothing but the lines for bgtask's own modules, which no go.sum
// commits), and `go build ./...` and `go vet ./...` (the tests' dependencies
// too) pass with GOWORK=off and -mod=readonly (and -race when the test has it:
// buildFlags). The build and vet of a module whose packages are all the
// workspace's (sameBuild) are the workspace's, run once for every module
// (docs/decisions.md 780).
func TestModulesBuildAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every module of the repository (-short)")
	}
	root := repoRoot(t)
	mods := listModules(t, root)
	versions := ownVersions(t, root, mods)
	if t.Failed() {
		return // a replace directive or mixed versions: the builds would only repeat it
	}
	if len(versions) == 0 {
		t.Fatal("no module requires another of bgtask's modules")
	}
	if *tidy {
		tidyModules(t, root, mods, versions)
		return
	}
	tmp := t.TempDir()
	proxyDir := filepath.Join(tmp, "proxy")
	writeProxy(t, proxyDir, mods, versions)
	env := proxyEnv(t, proxyDir, filepath.Join(tmp, "modcache"))
	flags := buildFlags()
	workspace := workspaceBuild(t, root, mods, flags)
	roEnv := slices.Concat(env, []string{"GOWORK=off", "GOFLAGS=-mod=readonly -modcacherw " + flags})
	for i, m := range mods {
		start := time.Now()
		dir := filepath.Join(tmp, "src", fmt.Sprint(i))
		for _, f := range m.files {
			dst := filepath.Join(dir, filepath.FromSlash(f.name))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, f.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		how, ok := checkModule(t, m, dir, roEnv, workspace)
		if !ok {
			continue
		}
		t.Logf("%s: tidy, %s (%.1f s)", m.dir, how, time.Since(start).Seconds())
	}
	if !t.Failed() {
		checkInstall(t, mods, versions[0], filepath.Join(tmp, "user"), slices.Concat(env, []string{"GOWORK=off", "GOFLAGS=-modcacherw " + flags, "GOBIN=" + filepath.Join(tmp, "bin")}))
	}
}

// tagged reports whether a release tags the module in dir (docs/release.md):
// not the examples and the benchmarks, which nobody imports.
func tagged(dir string) bool {
	return dir != "bench" && !strings.HasPrefix(dir, "examples/")
}

// checkInstall does what the README tells a user, in a module of the user's
// own outside the repository: `go get` of every tagged module at @latest (the
// proxy's only version, as after a release), a program that imports each, and
// `go install` of the commands at @latest. Every bgtask module must come at
// version.
func checkInstall(t *testing.T, mods []*module, version, dir string, env []string) {
	t.Helper()
	start := time.Now()
	var get, install []string
	var prog strings.Builder
	prog.WriteString("package main\n\nimport (\n")
	for _, m := range mods {
		switch {
		case !tagged(m.dir):
		case strings.HasPrefix(m.dir, "cmd/"):
			install = append(install, m.path+"@latest")
		default:
			get = append(get, m.path+"@latest")
			fmt.Fprintf(&prog, "\t_ %q\n", m.path)
		}
	}
	prog.WriteString(")\n\nfunc main() {}\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"go.mod": "module example.com/user\n\ngo 1.26.0\n", "main.go": prog.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{append([]string{"get"}, get...), {"mod", "tidy"}, {"build", "-o", os.DevNull, "."}, append([]string{"install"}, install...)} {
		if out, err := goCmdErr(dir, env, args...); err != nil {
			t.Errorf("a user's module: go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
	}
	out := goCmd(t, dir, env, "list", "-m", "all")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, v, _ := strings.Cut(line, " ")
		if (p == ownPrefix || strings.HasPrefix(p, ownPrefix+"/")) && v != version {
			t.Errorf("a user's module gets %s %s, want %s", p, v, version)
		}
	}
	t.Logf("a user's module: go get, build and go install of every tagged module at @latest (%.1f s)", time.Since(start).Seconds())
}

// workspaceBuild builds and vets every package of every module in the
// workspace, tests included, with the flags of the check, and lists the
// packages of that build. Under test.sh, whose `go vet -race` of every module
// ran first with the same flags, the build cache holds the vet and nearly
// all of the build.
func workspaceBuild(t *testing.T, root string, mods []*module, flags string) map[string]*listedPackage {
	t.Helper()
	start := time.Now()
	env := []string{"GOWORK=" + filepath.Join(root, "go.work"), "GOFLAGS=-mod=readonly " + flags}
	var patterns []string
	for _, m := range mods {
		patterns = append(patterns, "./"+path.Join(m.dir, "..."))
	}
	for _, args := range [][]string{{"build"}, {"vet"}} {
		goCmd(t, root, env, append(args, patterns...)...)
	}
	pkgs, err := listPackages(root, env, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the workspace: every module builds and vets, %d packages (%.1f s)", len(pkgs), time.Since(start).Seconds())
	return pkgs
}

// checkModule checks the copy of m in dir, reporting what fails; it tells
// whether all passed, and how the module was found to build alone: the
// packages its build lists alone (GOWORK=off, -mod=readonly, which fails on
// an import that nothing provides or a hash go.sum lacks) are the workspace's
// build's, or, where they differ (another version of a module), the copy
// builds and vets.
func checkModule(t *testing.T, m *module, dir string, env []string, workspace map[string]*listedPackage) (how string, ok bool) {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	own, committed := splitSum(gosum)
	if len(own) > 0 {
		t.Errorf("%s lists bgtask's own modules (their hashes change with every commit; the check adds them):\n%s", goModName(m.dir, "go.sum"), strings.Join(own, "\n"))
		return "", false
	}
	if out, err := goCmdErr(dir, env, "mod", "tidy"); err != nil {
		t.Errorf("%s: go mod tidy: %v\n%s", m.dir, err, out)
		return "", false
	}
	tidyMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	tidySum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	own, rest := splitSum(tidySum)
	ok = true
	if !bytes.Equal(tidyMod, gomod) {
		t.Errorf("%s is not tidy (`go test ./internal/modules -run TestModulesBuildAlone -tidy` tidies every module): `go mod tidy` (GOWORK=off) adds (+) and drops (-)%s", goModName(m.dir, "go.mod"), sumDiff(strings.Split(string(gomod), "\n"), strings.Split(string(tidyMod), "\n")))
		ok = false
	}
	if !slices.Equal(rest, committed) {
		t.Errorf("%s is not tidy (`go test ./internal/modules -run TestModulesBuildAlone -tidy` tidies every module): `go mod tidy` (GOWORK=off) adds (+) and drops (-)%s", goModName(m.dir, "go.sum"), sumDiff(committed, rest))
		ok = false
	}
	if !ok {
		return "", false
	}
	// The committed go.mod and go.sum, plus the hashes of bgtask's own
	// modules that the checksum database would give once they are tagged.
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), []byte(strings.Join(append(committed, own...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alone, err := listPackages(dir, env, "./...")
	if err != nil {
		t.Errorf("%s (GOWORK=off, -mod=readonly): %v", m.dir, err)
		return "", false
	}
	diff := sameBuild(alone, workspace)
	if diff == "" {
		return fmt.Sprintf("its %d packages alone are the workspace's build's", len(alone)), true
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		if out, err := goCmdErr(dir, env, args...); err != nil {
			t.Errorf("%s: go %s (GOWORK=off, -mod=readonly): %v\n%s", m.dir, strings.Join(args, " "), err, out)
			return "", false
		}
	}
	return "builds and vets alone (" + diff + ")", true
}

// splitDeps are the third-party modules the repository's modules may require
// at different versions, each with the reason (docs/decisions.md); every
// other module is required at one version across the repository.
var splitDeps = map[string]string{
	"github.com/cloudwego/eino": "adapters/eino requires a release in the checksum database, which a user's `go get` verifies; bench the pre-release with adk/backgroundtask, which is not in it",
}

// tidyModules rewrites every module's go.mod and go.sum in root: each
// third-party requirement moves to the version the workspace selects (but
// splitDeps), as `go work sync` would do (which leaves a module alone without a
// word when it cannot load it, and would move splitDeps too), then `go mod
// tidy` runs in each module on its own, and the go.sum lines for bgtask's own
// modules are dropped. A module's tidy go.mod depends on the go.mod of the
// bgtask modules it requires, and an upgrade can raise the workspace's
// selection, so it goes round until a round changes nothing, each round
// against a proxy and a module cache made anew from the tree.
func tidyModules(t *testing.T, root string, mods []*module, versions []string) {
	t.Helper()
	// The pre-releases among splitDeps are not in the checksum database:
	// their hashes come from the go.sum that has them, or from the zip.
	noSumDB := ownPrefix
	for p := range splitDeps {
		noSumDB += "," + p
	}
	read := func() []byte {
		var all []byte
		for _, m := range mods {
			for _, name := range []string{"go.mod", "go.sum"} {
				data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.dir), name))
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(append(all, m.dir+"/"+name+"\n"...), data...)
			}
		}
		return all
	}
	for round := 1; ; round++ {
		if round > 5 {
			t.Fatal("go.mod and go.sum files still change after 5 rounds of go work sync and go mod tidy")
		}
		before := read()
		mods = listModules(t, root) // the files as the last round left them
		tmp := t.TempDir()
		proxyDir := filepath.Join(tmp, "proxy")
		writeProxy(t, proxyDir, mods, versions)
		env := append(proxyEnv(t, proxyDir, filepath.Join(tmp, "modcache")), "GOFLAGS=-modcacherw", "GONOSUMDB="+noSumDB)
		// (go.work.sum may need new lines after a bump: not read-only)
		selected := workspaceSelection(t, root, "")
		for _, m := range mods {
			dir := filepath.Join(root, filepath.FromSlash(m.dir))
			env := append(env, "GOWORK=off")
			var up []string
			for _, r := range readModFile(t, dir).Require {
				_, split := splitDeps[r.Path]
				if v := selected[r.Path]; !split && v != "" && v != r.Version && r.Path != ownPrefix && !strings.HasPrefix(r.Path, ownPrefix+"/") {
					up = append(up, r.Path+"@"+v)
				}
			}
			if len(up) > 0 {
				goCmd(t, dir, env, append([]string{"get"}, up...)...)
			}
			goCmd(t, dir, env, "mod", "tidy")
			sumFile := filepath.Join(dir, "go.sum")
			data, err := os.ReadFile(sumFile)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			_, rest := splitSum(data)
			text := ""
			if len(rest) > 0 {
				text = strings.Join(rest, "\n") + "\n"
			}
			if err := os.WriteFile(sumFile, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if bytes.Equal(read(), before) {
			t.Logf("round %d changed nothing: every go.mod and go.sum is tidy", round)
			break
		}
		t.Logf("round %d: go.mod and go.sum files changed", round)
	}
	// go.work.sum: the hashes the workspace needs that no module's go.sum
	// has, written anew by loading every module's packages and tests.
	if err := os.Remove(filepath.Join(root, "go.work.sum")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	wsEnv := []string{"GOWORK=" + filepath.Join(root, "go.work"), "GOFLAGS=-mod=readonly"}
	for _, m := range mods {
		dir := filepath.Join(root, filepath.FromSlash(m.dir))
		goCmd(t, dir, wsEnv, "list", "-m", "all")
		goCmd(t, dir, wsEnv, "list", "-deps", "-test", "./...")
	}
}
