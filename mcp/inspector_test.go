package bgmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectorCLI drives the server with the MCP Inspector's connection
// CLI, mcpdo, and its daemon (the inspector package locked in
// inspector/package-lock.json): a private daemon connects to tsserver over
// stdio, calls the big tool plainly and as a task (the Inspector polls
// tasks/get, then calls tasks/result), and lists the tasks. A 200 KiB
// result through tasks/result must be the plain call's, byte for byte,
// plus the related task in _meta. Skipped like TestTypeScriptClient
// without node or the registry, unless CI=true.
//
// The Inspector's task client calls tasks/result only once a task is
// terminal, and its daemon runs one call per connection at a time, so it
// cannot answer the elicitation of a task: the TypeScript suite checks that
// path (its elicitation scenario).
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	node, npm := lookNode(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "tsserver")
	inspector := copyNPM(t, dir, "inspector", "package.json", "package-lock.json")
	var buildErr error
	sideBySide(func() { buildErr = goBuild(t, "./internal/tsserver", bin) }, func() { inspector.install(t, npm) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	pkg := inspector.check(t)
	mcpdo := filepath.Join(pkg, "node_modules", "@modelcontextprotocol", "inspector", "clients", "mcpdo", "build", "mcp-bin.js")
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "MCP_CATALOG_PATH=" + filepath.Join(home, "mcp.json"), "MCP_INSPECTOR_SECRET_STORE=file", "NO_COLOR=1"}
	run := func(args ...string) []byte {
		t.Helper()
		stdout, stderr, err := runCommandEnv(t, pkg, env, node, append([]string{mcpdo, "--format", "json"}, args...)...)
		if err != nil {
			t.Fatalf("mcpdo %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}

	// A private daemon: its exports name its directory and token.
	for _, line := range strings.Split(string(run("private")), "\n") {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+strings.Trim(v, `'"`))
		}
	}
	if len(env) != 6 {
		t.Fatalf("mcpdo private gave no daemon: %q", env)
	}
	t.Cleanup(func() {
		// t.Context() has ended by now: the hang guard alone bounds it.
		ctx, cancel := context.WithTimeout(context.Background(), tsHangGuard)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, mcpdo, "daemon", "stop")
		cmd.Dir, cmd.Env = pkg, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mcpdo daemon stop: %v\n%s", err, out)
		}
	})
	run("connect", "--connection", "bg", "--elicit", "off", "--", bin, "-db", filepath.Join(dir, "inspector.db"), "-owner", "inspector")

	plain := run("@bg", "tools/call", "big", "kib:=200")
	viaTask := run("@bg", "tools/call", "--task", "big", "kib:=200")
	var p, tk map[string]json.RawMessage
	decode(t, plain, &p)
	decode(t, viaTask, &tk)
	var meta map[string]struct {
		TaskID string `json:"taskId"`
	}
	decode(t, tk["_meta"], &meta)
	id := meta["io.modelcontextprotocol/related-task"].TaskID
	if len(meta) != 1 || !strings.HasPrefix(id, "task_") {
		t.Errorf("tasks/result _meta %s, want the related task only", tk["_meta"])
	}
	delete(tk, "_meta")
	var text struct {
		Content []struct{ Text string } `json:"content"`
	}
	decode(t, p["content"], &text.Content)
	if len(text.Content) != 1 || len(text.Content[0].Text) < 200<<10 {
		t.Fatalf("plain call: %.200s", plain)
	}
	if len(tk) != len(p) {
		t.Errorf("tasks/result fields %v, the plain call's %v", keys(tk), keys(p))
	}
	for k, v := range p {
		if !bytes.Equal(compactJSON(t, tk[k]), compactJSON(t, v)) {
			t.Errorf("tasks/result %s differs from the plain call's (%d and %d bytes)", k, len(tk[k]), len(v))
		}
	}
	t.Logf("a %d-byte result, whole through tasks/result", len(plain))

	var list struct {
		Tasks []task `json:"tasks"`
	}
	decode(t, run("@bg", "tasks/list"), &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id || list.Tasks[0].Status != "completed" || list.Tasks[0].TTL == nil {
		t.Errorf("tasks/list %+v, want task %s completed with a ttl", list.Tasks, id)
	}
}

// compactJSON is b without insignificant white space (mcpdo pretty-prints).
func compactJSON(t *testing.T, b json.RawMessage) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%.100s: %v", b, err)
	}
	return buf.Bytes()
}
