package main

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// Escape sequences of a watch on a terminal: cursor home, then clear to
// the end of the screen, so each snapshot replaces the last in place.
const redraw = "\x1b[H\x1b[J"

// watch lists the tasks the filters select every interval until ctx ends
// (SIGINT) or --count snapshots are drawn. On a terminal each snapshot is
// redrawn in place; otherwise snapshots follow each other, each under a
// line with its time.
func (e *env) watch(ctx context.Context, args []string) error {
	fs, sf := e.flags("watch", "")
	ff := addFilterFlags(fs)
	interval := fs.Duration("interval", 2*time.Second, "time between snapshots")
	count := fs.Int("count", 0, "stop after this many snapshots (0: until interrupted)")
	if _, err := e.parse(fs, args, 0); err != nil {
		return err
	}
	f, err := ff.filter(e, fs)
	if err != nil {
		return err
	}
	if *interval <= 0 || *count < 0 {
		fmt.Fprintf(e.stderr, "bgtask watch: --interval must be positive and --count not negative\n")
		fs.Usage()
		return errUsage
	}
	src, err := e.open(ctx, fs, sf)
	if err != nil {
		return err
	}
	defer src.close()
	term := e.terminal(e.stdout)
	tick, stop := e.tick(*interval)
	defer stop()
	var buf bytes.Buffer
	for n := 1; ; n++ {
		// Each snapshot is drawn whole into buf first, so a terminal
		// never shows half of one.
		buf.Reset()
		if term {
			buf.WriteString(redraw)
		} else if n > 1 {
			buf.WriteString("\n")
		}
		now := e.now()
		fmt.Fprintf(&buf, "bgtask watch  %s  every %v\n", stamp(now), *interval)
		if err := e.table(ctx, &buf, src, f, now); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := e.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		if *count > 0 && n >= *count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
	}
}
