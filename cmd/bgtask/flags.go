package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
)

// errHelp is -h: the command's usage was printed; exit status 0.
var errHelp = errors.New("help")

// storeFlags are the flags that select the store, which every command has.
type storeFlags struct{ db, dsn string }

// flags makes the flag set of command name; args describes its positional
// arguments in the usage line.
func (e *env) flags(name, args string) (*flag.FlagSet, *storeFlags) {
	fs := flag.NewFlagSet("bgtask "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: bgtask %s [flags]%s\n", name, args)
		fs.PrintDefaults()
	}
	var sf storeFlags
	fs.StringVar(&sf.db, "db", "", "SQLite database `path` (default $BGTASK_DB)")
	fs.StringVar(&sf.dsn, "dsn", "", "PostgreSQL `DSN` (default $BGTASK_DSN)")
	return fs, &sf
}

// parse parses args with flags before, between and after the positional
// arguments, and checks that there are exactly want of those.
func (e *env) parse(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err) // the flag package printed it and the usage
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != want {
		if want == 0 {
			fmt.Fprintf(e.stderr, "%s: unexpected argument %q\n", fs.Name(), pos[0])
		} else {
			fmt.Fprintf(e.stderr, "%s: want one task id, got %d arguments\n", fs.Name(), len(pos))
		}
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// filterFlags are the filters of ls and watch.
type filterFlags struct{ owner, status, tag, run string }

func addFilterFlags(fs *flag.FlagSet) *filterFlags {
	var f filterFlags
	fs.StringVar(&f.owner, "owner", "", "only this `owner`'s tasks")
	fs.StringVar(&f.status, "status", "", "only tasks in these `statuses`, comma-separated")
	fs.StringVar(&f.tag, "tag", "", "only tasks with this `tag`")
	fs.StringVar(&f.run, "run", "", "only tasks spawned in this `run` id")
	return &f
}

// filter is a selection of tasks, as both stores take it.
type filter struct {
	owner, tag, run string
	statuses        []bgtype.Status
}

// filter checks the flags; an unknown status is a usage error.
func (f *filterFlags) filter(e *env, fs *flag.FlagSet) (filter, error) {
	out := filter{owner: f.owner, tag: f.tag, run: f.run}
	if f.status == "" {
		return out, nil
	}
	for s := range strings.SplitSeq(f.status, ",") {
		st := bgtype.Status(strings.TrimSpace(s))
		if !st.Valid() {
			fmt.Fprintf(e.stderr, "%s: unknown status %q (want queued, running, awaiting_input, completed, failed, cancelled, interrupted)\n", fs.Name(), st)
			fs.Usage()
			return filter{}, errUsage
		}
		out.statuses = append(out.statuses, st)
	}
	return out, nil
}
