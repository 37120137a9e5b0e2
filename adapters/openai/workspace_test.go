package bgopenai_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"testing"
)

// The repository's go.work uses every module of the repository, so that
// `go doc` of any of them (this adapter's included) works from the root.
func TestWorkspaceHasEveryModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var modules []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
	out, err := exec.Command("go", "work", "edit", "-json", filepath.Join(root, "go.work")).Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, path.Clean(u.DiskPath))
	}
	slices.Sort(modules)
	slices.Sort(used)
	if !slices.Equal(modules, used) {
		t.Errorf("go.work uses %q\nthe repository's modules are %q", used, modules)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work.sum")); err != nil {
		t.Error(err)
	}
}
