package pgstore

import "fmt"

// Where a reaper's notice goes. A notice names the record it is about
// (task_id), the record's own owner (task_owner), and the owner it is
// addressed to (owner), the one whose TakeNotices claims it. The address
// is the nearest live owner up the record's lineage: starting at the
// record's owner, an owner that is the id of a task whose record is
// terminal, or not terminal but on an instance that is not alive (it is
// being reaped, in this pass or a later one), will never take a notice,
// so the walk goes on to that task's owner. It stops at an owner that is
// no task's id (a thread, a top-level agent) or whose task is live on a
// live instance (a sub-agent that runs and can take it). to_task is true
// when the address is a task's id: such a notice is walked again by every
// reaper pass (readdressNotices) and moves up once that task is no longer
// live, so a sub-agent that ends without taking it, or dies, does not
// strand it.
//
// maxNoticeHops bounds each walk, so that a corrupt lineage (an owner
// cycle written by hand) cannot make a statement loop. A lineage deeper
// than that leaves the notice addressed to the task reached at the bound,
// with to_task set: the next reaper pass walks it on from there.
const maxNoticeHops = 64

// routeCTE is the body of a WITH RECURSIVE clause that, for each (key,
// owner) row of the relation named src (which the statement defines
// first), yields in dest the row (key, addr, hops, to_task): the address of
// that owner's notice and how many owners the walk passed.
//
// Each step reads the owner's row by primary key in a LATERAL subquery
// with a LIMIT, which the planner cannot turn into a join: whatever its
// guess of the walk's size, it looks each owner up in the index rather
// than scanning the table.
var routeCTE = fmt.Sprintf(`walk (key, addr, hops) AS (
		SELECT key, owner, 0 FROM src
		UNION ALL
		SELECT w.key, t.owner, w.hops + 1
		FROM walk w CROSS JOIN LATERAL (
			SELECT owner, status, instance FROM bgtask_tasks WHERE id = w.addr LIMIT 1) AS t
		WHERE w.hops < %d AND NOT (t.status IN %s AND EXISTS (
			SELECT 1 FROM bgtask_instances i WHERE i.id = t.instance AND i.state = 'alive'))
	),
	dest AS (
		SELECT DISTINCT ON (key) key, addr, hops,
			(SELECT true FROM bgtask_tasks t WHERE t.id = walk.addr LIMIT 1) IS NOT NULL AS to_task
		FROM walk ORDER BY key, hops DESC
	)`, maxNoticeHops, liveSQL)

// insertNoticesSQL records the reaper's notices: $1 the records' ids, $2
// their owners, $3 the events as JSON, in the order to record them; each is
// addressed by routeCTE.
var insertNoticesSQL = `WITH RECURSIVE
	n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS n(task_id, owner, event, key)),
	src AS (SELECT key, owner FROM n),
	` + routeCTE + `
	INSERT INTO bgtask_notices (owner, event, task_id, task_owner, to_task)
	SELECT d.addr, n.event::jsonb, n.task_id, n.owner, d.to_task
	FROM n JOIN dest d ON d.key = n.key ORDER BY n.key
	RETURNING owner`

// readdressReapedSQL walks again, in the reaper's transaction, the
// undelivered notices addressed to the tasks it just interrupted ($1, their
// ids): a sub-agent that was live when its child's notice was addressed to
// it dies with this pass, and the notice moves up in the same commit, so
// no one sees the sub-agent interrupted while its child's notice still
// waits for it. Notices another transaction holds are left to the next
// pass's readdressNoticesSQL.
var readdressReapedSQL = `WITH RECURSIVE
	src AS (SELECT id AS key, owner FROM bgtask_notices
		WHERE delivered_at IS NULL AND owner = ANY($1::text[]) AND to_task
		FOR UPDATE SKIP LOCKED),
	` + routeCTE + `
	UPDATE bgtask_notices n SET owner = d.addr, to_task = d.to_task
	FROM dest d WHERE n.id = d.key AND d.hops > 0 AND n.delivered_at IS NULL AND n.to_task
	RETURNING n.owner`

// readdressBatch bounds the notices one readdressing statement walks.
const readdressBatch = 500

// readdressNoticesSQL walks again a batch of the undelivered notices
// addressed to a task, of ids above $1, and moves those whose walk went
// further up. Notices another transaction holds (a TakeNotices claiming
// them) are skipped. It returns how many notices it walked and the
// highest id among them.
var readdressNoticesSQL = `WITH RECURSIVE
	src AS (SELECT id AS key, owner FROM bgtask_notices
		WHERE delivered_at IS NULL AND to_task AND id > $1
		ORDER BY id LIMIT ` + fmt.Sprint(readdressBatch) + ` FOR UPDATE SKIP LOCKED),
	` + routeCTE + `,
	moved AS (
		UPDATE bgtask_notices n SET owner = d.addr, to_task = d.to_task
		FROM dest d WHERE n.id = d.key AND d.hops > 0 AND n.delivered_at IS NULL AND n.to_task
		RETURNING n.id)
	SELECT count(*), coalesce(max(key), 0) FROM src`
