package main

import (
	"context"
	"flag"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// source is a store's read-only handle, as the commands use it.
type source interface {
	list(ctx context.Context, f filter) iter.Seq2[bgtype.TaskMeta, error]
	get(ctx context.Context, id string) (bgtype.TaskMeta, error)
	children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error]
	// cancel records a cancel request and returns the task's record as
	// read then; a terminal status means nothing was recorded.
	cancel(ctx context.Context, id string, tree bool, reason string) (bgtype.TaskMeta, error)
	close() error
}

// open opens the store that the flags, or else the environment, name.
func (e *env) open(ctx context.Context, fs *flag.FlagSet, sf *storeFlags) (source, error) {
	db, dsn := sf.db, sf.dsn
	if db == "" && dsn == "" {
		db, dsn = e.getenv("BGTASK_DB"), e.getenv("BGTASK_DSN")
	}
	switch {
	case db != "" && dsn != "":
		fmt.Fprintf(e.stderr, "%s: give one of --db and --dsn (or BGTASK_DB and BGTASK_DSN), not both\n", fs.Name())
		fs.Usage()
		return nil, errUsage
	case db != "":
		r, err := sqlitestore.OpenReadOnly(ctx, db)
		if err != nil {
			return nil, err
		}
		return sqliteSource{r}, nil
	case dsn != "":
		r, err := pgstore.OpenReadOnly(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return pgSource{r}, nil
	}
	fmt.Fprintf(e.stderr, "%s: no store: give --db PATH or --dsn DSN (or set BGTASK_DB or BGTASK_DSN)\n", fs.Name())
	fs.Usage()
	return nil, errUsage
}

type sqliteSource struct{ r *sqlitestore.ReadOnly }

func (s sqliteSource) list(ctx context.Context, f filter) iter.Seq2[bgtype.TaskMeta, error] {
	return s.r.List(ctx, sqlitestore.Filter{Owner: f.owner, Statuses: f.statuses, Tag: f.tag, RunID: f.run})
}
func (s sqliteSource) get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	return s.r.Get(ctx, id)
}
func (s sqliteSource) children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return s.r.Children(ctx, id)
}
func (s sqliteSource) cancel(ctx context.Context, id string, tree bool, reason string) (bgtype.TaskMeta, error) {
	return s.r.RequestCancel(ctx, id, tree, reason)
}
func (s sqliteSource) close() error { return s.r.Close() }

type pgSource struct{ r *pgstore.ReadOnly }

func (s pgSource) list(ctx context.Context, f filter) iter.Seq2[bgtype.TaskMeta, error] {
	return s.r.List(ctx, pgstore.Filter{Owner: f.owner, Statuses: f.statuses, Tag: f.tag, RunID: f.run})
}
func (s pgSource) get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	return s.r.Get(ctx, id)
}
func (s pgSource) children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return s.r.Children(ctx, id)
}
func (s pgSource) cancel(ctx context.Context, id string, tree bool, reason string) (bgtype.TaskMeta, error) {
	return s.r.RequestCancel(ctx, id, tree, reason)
}
func (s pgSource) close() error { return s.r.Close() }
