package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// column is a contender: bgtask and its peers (eino's background-task
// registry is the closest Go peer, eino.go; river the closest durable
// queue on PostgreSQL, river.go).
type column int

const (
	colBgtask column = iota
	colRaw
	colErrgroup
	colConc
	colEino
	colRiver
	nCols
)

var colNames = [nCols]string{"bgtask", "raw", "errgroup", "conc", "eino", "river"}

// unit says how a row's figures read.
type unit int

const (
	perTask  unit = iota // ns, B and allocs per task
	perRow               // ns, B and allocs per row written, and rows/s
	bytesPer             // bytes per task or record, after GC
	megabyte             // megabytes of heap after GC
	latency              // a duration in nanoseconds, shown in milliseconds
)

// row is one line of the table.
type row struct {
	name   string
	unit   unit
	ratios bool // false: the peers' figures are shown without a ratio
}

// runFunc measures one contender once; it returns a sample per row of its
// group.
type runFunc func(ctx context.Context, cfg config) ([]sample, error)

// group is a workload measured for each contender in one run, giving one or
// more rows.
type group struct {
	name   string
	rows   []row
	runs   [nCols]runFunc // nil: no such contender for this workload
	legend string         // what the contenders do, under the table
	skip   func(config) string
}

// allGroups lists every workload in table order, its rows named after the
// sizes sz.
func allGroups(sz sizes) []*group {
	return []*group{
		spawnGroup(sz), burstGroup(sz), emitGroup(sz), parkedGroup(sz), retainedGroup(sz),
		cancelGroup(sz), millionGroup(sz), sqliteGroup(sz), postgresGroup(sz), pgTasksGroup(sz),
	}
}

// selectGroups keeps the groups whose name or a row's name matches only
// (every group when only is nil).
func selectGroups(all []*group, only *regexp.Regexp) []*group {
	if only == nil {
		return all
	}
	var out []*group
	for _, g := range all {
		match := only.MatchString(g.name)
		for _, r := range g.rows {
			match = match || only.MatchString(r.name)
		}
		if match {
			out = append(out, g)
		}
	}
	return out
}

func writeHeader(w io.Writer, cfg config) {
	fmt.Fprintf(w, "bgtask bench, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "%s %s/%s, %d CPUs (GOMAXPROCS %d), %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel())
	mode := ""
	if cfg.quick {
		mode = ", -quick (sizes too small to mean anything)"
	}
	fmt.Fprintf(w, "medians of %d interleaved rounds%s; ratio = bgtask / peer, lower is better\n\n", cfg.rounds, mode)
}

// cpuModel returns the CPU's model name from /proc/cpuinfo, or "CPU model
// unknown" where there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "CPU model unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU model unknown"
}

func writeTable(w io.Writer, groups []*group, res results) {
	fmt.Fprintln(w, "| shape | bgtask | raw | errgroup | conc | eino | river | vs raw | vs errgroup | vs conc | vs eino | vs river |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	var notes []string
	for _, g := range groups {
		for i, r := range g.rows {
			cells := make([]string, 0, 2*nCols)
			if why, skip := res.skipped[g]; skip {
				cells = append(cells, "skipped: "+why)
				for range 2*nCols - 2 {
					cells = append(cells, "-")
				}
				fmt.Fprintf(w, "| %s | %s |\n", r.name, strings.Join(cells, " | "))
				continue
			}
			var med [nCols]sample
			var have [nCols]bool
			for c := range nCols {
				med[c], have[c] = median(res.samples[g][i][c])
				if !have[c] {
					cells = append(cells, "-")
					continue
				}
				cells = append(cells, formatCell(r.unit, med[c]))
				if c == colBgtask && med[c].note != "" {
					notes = append(notes, fmt.Sprintf("%s, %s: %s", r.name, colNames[c], med[c].note))
				}
			}
			for c := colRaw; c < nCols; c++ {
				if !r.ratios || !have[colBgtask] || !have[c] || med[c].v <= 0 {
					cells = append(cells, "-")
					continue
				}
				cells = append(cells, fmt.Sprintf("%.2fx", med[colBgtask].v/med[c].v))
			}
			fmt.Fprintf(w, "| %s | %s |\n", r.name, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(w)
	for _, g := range groups {
		fmt.Fprintf(w, "- %s: %s\n", g.name, g.legend)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

func formatCell(u unit, s sample) string {
	switch u {
	case perTask:
		return fmt.Sprintf("%s ns, %s B, %s allocs", commas(s.v), commas(s.bytes), commas(s.allocs))
	case perRow:
		rate := 0.0
		if s.v > 0 {
			rate = 1e9 / s.v
		}
		return fmt.Sprintf("%s ns (%s rows/s), %s B, %s allocs", commas(s.v), commas(rate), commas(s.bytes), commas(s.allocs))
	case bytesPer:
		return commas(s.v) + " B"
	case latency:
		return strconv.FormatFloat(s.v/1e6, 'f', 2, 64) + " ms"
	default:
		mb := math.Round(s.v*10) / 10
		if mb == 0 {
			mb = 0 // not -0
		}
		return strconv.FormatFloat(mb, 'f', 1, 64) + " MB"
	}
}

// commas formats v rounded to an integer with thousands separators.
func commas(v float64) string {
	s := strconv.FormatInt(int64(v+0.5*sign(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}
