package main

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runQuick runs the program as `go run . -quick -rounds 1 args...` and
// returns its table.
func runQuick(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), append([]string{"-quick", "-rounds", "1"}, args...), &out, io.Discard); err != nil {
		t.Fatalf("run: %v", err)
	}
	return out.String()
}

// tableRows returns the cells of the table's rows (not its header), by
// row name, in order.
func tableRows(t *testing.T, out string) (names []string, cells map[string][]string) {
	t.Helper()
	cells = map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| shape |") {
			continue
		}
		fields := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(fields) != 1+2*int(nCols)-1 {
			t.Fatalf("row %q has %d cells, want %d", line, len(fields), 2*nCols)
		}
		names = append(names, fields[0])
		cells[fields[0]] = fields[1:]
	}
	return names, cells
}

// checkRow checks that a measured row has a figure for bgtask, and for each
// peer either a figure and a ratio that parses or "-" in both.
func checkRow(t *testing.T, r row, cells []string) {
	t.Helper()
	if cells[colBgtask] == "-" || strings.HasPrefix(cells[colBgtask], "skipped") {
		t.Errorf("%s: bgtask cell %q, want a figure", r.name, cells[colBgtask])
	}
	for c := colRaw; c < nCols; c++ {
		figure, ratio := cells[c], cells[int(nCols)+int(c)-1]
		if !r.ratios || figure == "-" {
			if ratio != "-" {
				t.Errorf("%s: ratio vs %s = %q, want -", r.name, colNames[c], ratio)
			}
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(ratio, "x"), 64)
		if !strings.HasSuffix(ratio, "x") || err != nil || v <= 0 {
			t.Errorf("%s: ratio vs %s = %q, want a positive number and x", r.name, colNames[c], ratio)
		}
	}
}

func TestQuickTable(t *testing.T) {
	t.Setenv(envDSN, "")
	out := runQuick(t)

	for _, want := range []string{"bgtask bench, 20", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH,
		strconv.Itoa(runtime.NumCPU()) + " CPUs", cpuModel(), "medians of 1 interleaved rounds"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q:\n%s", want, out)
		}
	}
	groups := allGroups(quickSizes)
	var workloads []string
	for _, g := range groups {
		workloads = append(workloads, g.name)
	}
	if got, want := strings.Join(workloads, ", "), "spawn+complete, burst, emit/drain, parked memory, retained memory, "+
		"cancel subtree, many owners, SQLite, PostgreSQL, PostgreSQL tasks"; got != want {
		t.Fatalf("workloads %s, want %s", got, want)
	}
	var want []string
	for _, g := range groups {
		for _, r := range g.rows {
			want = append(want, r.name)
		}
	}
	names, cells := tableRows(t, out)
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	for _, g := range groups {
		for _, r := range g.rows {
			if strings.HasPrefix(g.name, "PostgreSQL") {
				if got := strings.Join(cells[r.name], " | "); got != "skipped: no DSN | - | - | - | - | - | - | - | - | - | -" {
					t.Errorf("%s: %q, want skipped: no DSN", r.name, got)
				}
				continue
			}
			checkRow(t, r, cells[r.name])
		}
		if !strings.Contains(out, "- "+g.name+": ") {
			t.Errorf("no legend for %s", g.name)
		}
	}
}

// TestQuickPostgres measures the PostgreSQL rows against a throw-away
// server, selected with -only.
func TestQuickPostgres(t *testing.T) {
	dsn := pgtest.StartDSN(t)

	out := runQuick(t, "-only", "^PostgreSQL commit", "-dsn", dsn)
	names, cells := tableRows(t, out)
	g := postgresGroup(quickSizes)
	if len(names) != len(g.rows) {
		t.Fatalf("rows %q, want the %d PostgreSQL rows", names, len(g.rows))
	}
	for i, r := range g.rows {
		if names[i] != r.name {
			t.Errorf("row %d = %q, want %q", i, names[i], r.name)
		}
		checkRow(t, r, cells[r.name])
		if cells[r.name][colRaw] == "-" {
			t.Errorf("%s: no raw figure", r.name)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds 0: want at least 1"},
		{[]string{"-only", "("}, "-only: error parsing regexp: missing closing ): `(`"},
		{[]string{"-only", "no such row"}, `-only "no such row" matches no row`},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := run(t.Context(), tc.args, io.Discard, io.Discard)
			if err == nil || err.Error() != tc.want {
				t.Errorf("run(%q) = %v, want %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestQuickEino checks that eino's background-task registry is measured,
// with a ratio, on the shapes it serves (and only there).
func TestQuickEino(t *testing.T) {
	out := runQuick(t, "-only", "^(spawn\\+complete|burst|parked memory)$")
	names, cells := tableRows(t, out)
	if len(names) != 3 {
		t.Fatalf("rows %q, want spawn+complete, burst and parked memory", names)
	}
	for _, name := range names {
		c := cells[name]
		if c[colEino] == "-" || c[int(nCols)+int(colEino)-1] == "-" {
			t.Errorf("%s: eino cell %q, ratio %q; want a figure and a ratio", name, c[colEino], c[int(nCols)+int(colEino)-1])
		}
	}
	if !strings.Contains(out, "eino: backgroundtask.Manager.Run in the background") {
		t.Errorf("no eino legend:\n%s", out)
	}
}

// TestQuickRiver measures the PostgreSQL tasks rows, bgtask against raw
// pgx and river, on a throw-away server: every row has their figures and
// ratios.
func TestQuickRiver(t *testing.T) {
	dsn := pgtest.StartDSN(t)

	out := runQuick(t, "-only", "^PostgreSQL tasks", "-dsn", dsn)
	names, cells := tableRows(t, out)
	g := pgTasksGroup(quickSizes)
	if len(names) != len(g.rows) {
		t.Fatalf("rows %q, want the %d PostgreSQL tasks rows", names, len(g.rows))
	}
	for i, r := range g.rows {
		if names[i] != r.name {
			t.Errorf("row %d = %q, want %q", i, names[i], r.name)
		}
		checkRow(t, r, cells[r.name])
		for _, col := range []column{colRaw, colRiver} {
			if c := cells[r.name]; c[col] == "-" || c[int(nCols)+int(col)-1] == "-" {
				t.Errorf("%s: %s cell %q, ratio %q; want a figure and a ratio", r.name, colNames[col], c[col], c[int(nCols)+int(col)-1])
			}
		}
	}
	if !strings.Contains(out, "river (v0.51.2, riverpgxv5 on a pgxpool)") {
		t.Errorf("no river legend:\n%s", out)
	}
}
