// The MCP TypeScript client suite: drives the bgtask MCP server (the
// tsserver command, mcp/internal/tsserver) with the official TypeScript SDK
// client, over stdio (and streamable HTTP in http_sessions), and checks the
// exact outcome of each scenario itself.
//
//   node suite.mjs <tsserver binary> <work dir>
//
// It prints one line per scenario, "ok <name>" or "FAIL <name>: <detail>"
// (lines starting with "# " are information, such as the MCP revision
// negotiated), and exits 1 if any scenario failed. TestTypeScriptClient
// (mcp/tsclient_test.go) runs it after `npm ci`.
//
// Every server process opens the SQLite file <work dir>/tasks.db with its
// own owner (-owner): "alice" is the main session, "bob" the other session,
// "carol" the one whose server is killed and restarted, "dave" a client that
// declares elicitation. http_sessions runs
// one more server, over HTTP on <work dir>/http.db, one owner per session.
//
// Nothing here measures time: requests carry a timeout of minutes only as a
// hang guard, and every wait is on a condition (a probe call that returns
// when the server-side hold started or stopped, a progress count reached,
// a task status polled at the server's pollInterval).
//
// What the server must do, scenario by scenario (T is a Task object:
// {taskId, status, statusMessage?, createdAt, lastUpdatedAt, ttl, pollInterval?},
// times ISO 8601, ttl a number or null; R is the related-task meta key
// "io.modelcontextprotocol/related-task"):
//
// initialize     protocolVersion "2025-11-25"; serverInfo {name "bgtask-tsserver",
//                version "test"}; capabilities.tasks exactly
//                {list:{}, cancel:{}, requests:{tools:{call:{}}}}; capabilities.tools.
// list_tools     tools/list names exactly the five model-facing tools and the
//                suite's six (ask big cancel_task echo get_task hold list_tasks probe
//                release send_message wait_task); hold has execution {taskSupport "optional"},
//                echo {taskSupport "forbidden"}; echo's inputSchema as declared.
// plain_tool     tools/call echo {text:"hello"} -> content [{type text, text
//                '{"text":"hello"}'}], structuredContent {text "hello"}, no isError;
//                list_tasks {} for a new owner -> {"tasks":[],"total":0}.
// task_poll      tools/call hold {label} with task {ttl} (callToolStream) -> CreateTaskResult
//                {task: T working}; tasks/get -> T working while held; after release,
//                tasks/get reaches completed; tasks/result -> {content [{type text,
//                text '{"label":"poll","steps":0}'}], structuredContent {label, steps 0},
//                _meta {R: {taskId}}}.
// task_result    tasks/result again returns the same result; tasks/result on a held
//                task blocks until the task ends, then returns its result; tasks/list
//                (following nextCursor) holds both tasks, completed.
// list_pages     55 more tasks: tasks/list pages of 50 and 7, every task once, in creation
//                order, completed; a cursor the server did not give -> -32602
//                "Invalid cursor: garbage".
// cancel         tasks/cancel on a running task -> T cancelled, statusMessage
//                "bgtask: task cancelled"; the tool's ctx ended ("context canceled",
//                that cause) and its function returned; tasks/get -> the same;
//                tasks/result -> isError with that text and _meta {R}; a second
//                tasks/cancel -> error -32602 "Cannot cancel task in terminal status:
//                cancelled"; tasks/list shows it cancelled.
// bad_arguments  echo {text:""} -> isError, content [{type text, text
//                "text must not be empty"}]; hold {steps 101} -> isError "steps must be
//                between 0 and 100, got 101"; get_task {} -> isError 'invalid arguments:
//                missing "task_id"'; hold {steps 101} as a task -> tasks/get failed with
//                that text as statusMessage, tasks/result isError with it; echo as a
//                task (taskSupport forbidden) -> error -32601.
// progress       hold {steps 5} as a task with a progress token -> exactly 5
//                notifications/progress, progress 1..5, total 5, message "step i of 5",
//                _meta {R: {taskId}}, in order; the same in the foreground (no task,
//                no _meta): 3 of 3 while the call still runs (its result comes after
//                a release).
// other_session  a second process for owner bob on the same file: tasks/list has
//                none of alice's tasks; tasks/get, tasks/result, tasks/cancel of alice's
//                running task id fail exactly like an unknown id: -32602 "Task not
//                found: <id>"; the model tools get_task (isError "task not found: <id>"),
//                cancel_task ({"status":"failed","root_task_id":<id>,"cancelled_count":0,
//                "error":"task_not_found"}) and send_message ({"status":"failed",
//                "error":"recipient_not_found"})
//                answer the same as for an unknown id; bob's list_tasks is empty;
//                alice's task is still working afterwards, then completes; bob got no
//                notification naming it.
// restart        carol's server is killed (SIGKILL) while her task runs; a new server
//                for carol on the same file: tasks/get -> failed, statusMessage
//                'bgtask: interrupted: the runtime that ran it (instance "inst_…") is
//                gone; it will not be re-run'; tasks/list -> that one task, the same;
//                tasks/result -> isError with that text; tasks/cancel -> -32602
//                "Cannot cancel task in terminal status: failed".
// http_sessions  one server over streamable HTTP (StreamableHTTPClientTransport), each
//                session its own owner (the default): two clients get two sessions;
//                a's task (with progress 1, 2 of 2 over HTTP) is invisible to b exactly
//                like an unknown id; a's tasks/cancel stops its goroutine; a long call
//                is polled to completion with callToolStream; the server exits 0.
// large_result   big {kib 200} plain, then as a task: tasks/result is the plain
//                result byte for byte (text, structuredContent, no isError) plus
//                _meta {R} only, though the record keeps 64 KiB; tasks/get completed,
//                ttl = lastUpdatedAt - createdAt + 24 h (to the millisecond).
// elicitation    dave (capabilities {elicitation: {}}) calls ask {question} as a
//                task and waits in tasks/result: the server sends one
//                elicitation/create {_meta {R}, mode form, message the question,
//                requestedSchema {answer: string}}; meanwhile tasks/get reads
//                input_required with the question as statusMessage and a
//                lastUpdatedAt after createdAt; the answer {action accept, content
//                {answer "main"}} reaches the task: tasks/result {answer "main"}.
// client_errors  the SDK client reported no protocol error (e.g. a progress
//                notification with an unknown token) on any session.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CallToolResultSchema,
    CreateTaskResultSchema,
    ElicitRequestSchema,
    ErrorCode,
    LATEST_PROTOCOL_VERSION,
    McpError,
    RELATED_TASK_META_KEY
} from '@modelcontextprotocol/sdk/types.js';

const [serverBin, workDir] = process.argv.slice(2);
if (!serverBin || !workDir) {
    console.error('usage: node suite.mjs <tsserver binary> <work dir>');
    process.exit(2);
}
const db = join(workDir, 'tasks.db');

// HANG is every request's timeout: a hang guard, never a measure.
const HANG = 5 * 60 * 1000;
const opts = { timeout: HANG };
const TTL = 60 * 60 * 1000;
const WANT_PROTOCOL = '2025-11-25';
// CANCELLED is the text of a task cancelled through tasks/cancel: its
// statusMessage, its ctx's cause and its tasks/result error.
const CANCELLED = 'bgtask: task cancelled';
// INTERRUPTED matches the statusMessage (and tasks/result text) of a task
// whose server process died while it ran.
const INTERRUPTED =
    /^bgtask: interrupted: the runtime that ran it \(instance "inst_[0-9a-f]+"\) is gone; it will not be re-run$/;

// Tap wraps a transport to record the protocol version the client
// negotiated and every message the server sent.
class Tap {
    constructor(inner) {
        this.inner = inner;
        this.received = [];
        this.closed = new Promise(resolve => (this._closed = resolve));
    }
    async start() {
        this.inner.onmessage = (msg, extra) => {
            this.received.push(msg);
            this.onmessage?.(msg, extra);
        };
        this.inner.onerror = err => this.onerror?.(err);
        this.inner.onclose = () => {
            this._closed();
            this.onclose?.();
        };
        return this.inner.start();
    }
    send(msg, options) {
        return this.inner.send(msg, options);
    }
    close() {
        return this.inner.close();
    }
    setProtocolVersion(v) {
        this.protocolVersion = v;
        this.inner.setProtocolVersion?.(v);
    }
    get sessionId() {
        return this.inner.sessionId;
    }
    get pid() {
        return this.inner.pid;
    }
}

const clientErrors = [];

// start runs a server process for owner and connects a client to it,
// declaring capabilities.
async function start(owner, capabilities = {}) {
    return connect(
        owner,
        new StdioClientTransport({ command: serverBin, args: ['-db', db, '-owner', owner], stderr: 'inherit' }),
        capabilities
    );
}

// connect connects a client named after owner through transport.
async function connect(owner, transport, capabilities = {}) {
    const tap = new Tap(transport);
    const client = new Client({ name: 'bgtask-ts-suite', version: '1.0.0' }, { capabilities });
    const session = { owner, client, tap, closing: false };
    client.onerror = err => {
        // Closing aborts the HTTP transport's event streams: not an error.
        if (!session.closing) clientErrors.push(`${owner}: ${err?.message ?? err}`);
    };
    await client.connect(tap, opts);
    return session;
}

// close ends a session: the HTTP transport ends it on the server too.
async function close(s) {
    s.closing = true;
    await s.tap.inner.terminateSession?.();
    await s.client.close();
}

// httpConnect connects a client over streamable HTTP and waits until its
// standalone event stream (the GET the client opens after initialize) is
// open: the server drops what it sends for no request (a task's progress)
// while no such stream is open.
async function httpConnect(owner, url) {
    let opened;
    const sse = new Promise(resolve => (opened = resolve));
    const transport = new StreamableHTTPClientTransport(url, {
        fetch: async (input, init) => {
            const res = await fetch(input, init);
            if (init?.method === 'GET' && res.ok) opened();
            return res;
        }
    });
    const session = await connect(owner, transport);
    await within(sse, () => `${owner}: the standalone event stream did not open`);
    return session;
}

// startHTTP runs a server process serving streamable HTTP, one owner per
// session, and returns it with the URL it printed. Closing its stdin ends it.
async function startHTTP() {
    const proc = spawn(serverBin, ['-db', join(workDir, 'http.db'), '-http', '127.0.0.1:0'], {
        stdio: ['pipe', 'pipe', 'inherit']
    });
    const exited = once(proc, 'exit');
    const lines = createInterface({ input: proc.stdout });
    const [first] = await within(
        Promise.race([once(lines, 'line'), exited.then(([code]) => assert.fail(`tsserver -http exited: ${code}`))]),
        () => 'tsserver -http printed no URL'
    );
    const m = /^listening (http:\/\/\S+)$/.exec(first);
    assert.ok(m, `tsserver -http said ${JSON.stringify(first)}`);
    return { url: new URL(m[1]), proc, exited };
}

// ---- checks

function rawMessage(err) {
    return String(err?.message ?? err).replace(/^MCP error -?\d+: /, '');
}

// expectError awaits p, which must fail with an McpError of code; it
// returns the error's message without the SDK's "MCP error N: " prefix.
async function expectError(p, code, what) {
    let res;
    try {
        res = await p;
    } catch (err) {
        assert.ok(err instanceof McpError, `${what}: want an McpError, got ${err}`);
        assert.equal(err.code, code, `${what}: error code (message ${rawMessage(err)})`);
        return rawMessage(err);
    }
    assert.fail(`${what}: want error ${code}, got result ${JSON.stringify(res)}`);
}

function checkTime(s, what) {
    assert.equal(typeof s, 'string', what);
    assert.match(s, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/, what);
    assert.ok(!Number.isNaN(Date.parse(s)), `${what}: ${s} does not parse`);
}

// checkTask checks a Task object's shape and its id and status.
function checkTask(t, taskId, status, what) {
    assert.equal(t.taskId, taskId, `${what}: taskId`);
    assert.equal(t.status, status, `${what}: status (statusMessage ${JSON.stringify(t.statusMessage)})`);
    checkTime(t.createdAt, `${what}: createdAt`);
    checkTime(t.lastUpdatedAt, `${what}: lastUpdatedAt`);
    assert.ok(t.ttl === null || (typeof t.ttl === 'number' && t.ttl > 0), `${what}: ttl ${t.ttl}`);
    if (t.pollInterval !== undefined) {
        assert.ok(typeof t.pollInterval === 'number' && t.pollInterval > 0, `${what}: pollInterval ${t.pollInterval}`);
    }
}

// toolText returns the one text content of a tool result.
function toolText(res, what) {
    assert.equal(res.content?.length, 1, `${what}: content ${JSON.stringify(res.content)}`);
    assert.equal(res.content[0].type, 'text', `${what}: content type`);
    return res.content[0].text;
}

function checkToolResult(res, structured, what) {
    assert.ok(!res.isError, `${what}: isError (${JSON.stringify(res.content)})`);
    assert.equal(toolText(res, what), JSON.stringify(structured), `${what}: text`);
    assert.deepEqual(res.structuredContent, structured, `${what}: structuredContent`);
}

function checkToolError(res, text, what) {
    assert.equal(res.isError, true, `${what}: isError (${JSON.stringify(res)})`);
    assert.equal(toolText(res, what), text, `${what}: error text`);
}

function checkRelated(res, taskId, what) {
    assert.deepEqual(res._meta?.[RELATED_TASK_META_KEY], { taskId }, `${what}: _meta related-task`);
}

// ---- calls

const call = (s, name, args, extra = {}) =>
    s.client.callTool({ name, arguments: args }, CallToolResultSchema, { ...opts, ...extra });

// createTask calls a tool as a task and returns the CreateTaskResult's task.
async function createTask(s, name, args, extra = {}) {
    const res = await s.client.request(
        { method: 'tools/call', params: { name, arguments: args } },
        CreateTaskResultSchema,
        { ...opts, task: { ttl: TTL }, ...extra }
    );
    checkTask(res.task, res.task.taskId, 'working', `${name} task created`);
    assert.ok(res.task.taskId.length > 0, 'taskId not empty');
    return res.task;
}

const tasks = s => s.client.experimental.tasks;
const getTask = (s, id) => tasks(s).getTask(id, opts);
const taskResult = (s, id) => tasks(s).getTaskResult(id, CallToolResultSchema, opts);
const cancelTask = (s, id) => tasks(s).cancelTask(id, opts);

// listAll follows tasks/list's cursor to the end.
async function listAll(s) {
    const all = [];
    let cursor;
    for (let page = 0; ; page++) {
        assert.ok(page < 1000, 'tasks/list: too many pages');
        const res = await tasks(s).listTasks(cursor, opts);
        all.push(...res.tasks);
        if (!res.nextCursor) return all;
        cursor = res.nextCursor;
    }
}

// pollUntilTerminal polls tasks/get at the server's pollInterval until the
// task is terminal, and returns it.
async function pollUntilTerminal(s, id) {
    for (;;) {
        const t = await getTask(s, id);
        if (['completed', 'failed', 'cancelled'].includes(t.status)) return t;
        assert.ok(['working', 'input_required'].includes(t.status), `tasks/get: status ${t.status}`);
        await new Promise(r => setTimeout(r, t.pollInterval ?? 50));
    }
}

// probe waits (server side) until the hold of label started or stopped.
async function probe(s, label, until) {
    const res = await call(s, 'probe', { label, until });
    assert.ok(!res.isError, `probe ${label} ${until}: ${JSON.stringify(res.content)}`);
    return res.structuredContent;
}

// within waits for p under the hang guard, failing with what's state.
function within(p, what) {
    let timer;
    const guard = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`hang guard: ${what()}`)), HANG);
    });
    return Promise.race([p, guard]).finally(() => clearTimeout(timer));
}

// mainSession returns alice's session, which the first scenario opened.
function mainSession() {
    assert.ok(aliceSession, 'needs initialize');
    return aliceSession;
}

async function release(s, label) {
    checkToolResult(await call(s, 'release', { label }), { released: label }, `release ${label}`);
}

// ---- scenarios

const scenarios = [];
const scenario = (name, fn) => scenarios.push({ name, fn });
let aliceSession;

scenario('initialize', async () => {
    const alice = (aliceSession = await start('alice'));
    console.log(`# protocol ${alice.tap.protocolVersion} (client's latest ${LATEST_PROTOCOL_VERSION})`);
    assert.equal(alice.tap.protocolVersion, WANT_PROTOCOL, 'negotiated protocol version');
    const info = alice.client.getServerVersion();
    assert.equal(info?.name, 'bgtask-tsserver', 'serverInfo.name');
    assert.equal(info?.version, 'test', 'serverInfo.version');
    const caps = alice.client.getServerCapabilities();
    console.log(`# server capabilities ${JSON.stringify(caps)}`);
    assert.deepEqual(caps?.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } }, 'capabilities.tasks');
    assert.ok(caps?.tools, 'capabilities.tools');
});

scenario('list_tools', async () => {
    const alice = mainSession();
    const { tools } = await alice.client.listTools({}, opts);
    const names = tools.map(t => t.name);
    console.log(`# tools ${names.join(' ')}`);
    assert.deepEqual(
        [...names].sort(),
        ['ask', 'big', 'cancel_task', 'echo', 'get_task', 'hold', 'list_tasks', 'probe', 'release', 'send_message', 'wait_task'],
        'tool names'
    );
    const byName = Object.fromEntries(tools.map(t => [t.name, t]));
    assert.deepEqual(byName.hold.execution, { taskSupport: 'optional' }, 'hold execution');
    assert.deepEqual(byName.echo.execution, { taskSupport: 'forbidden' }, 'echo execution');
    assert.deepEqual(
        byName.echo.inputSchema,
        { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
        'echo inputSchema'
    );
    for (const n of ['list_tasks', 'get_task', 'cancel_task', 'send_message', 'wait_task']) {
        assert.equal(byName[n].inputSchema?.type, 'object', `${n} inputSchema.type`);
        assert.ok(byName[n].description, `${n} description`);
    }
    // The SDK read the execution field: it would augment hold, not echo.
    assert.equal(alice.client.isToolTask('hold'), true, 'client.isToolTask(hold)');
    assert.equal(alice.client.isToolTask('echo'), false, 'client.isToolTask(echo)');
});

scenario('plain_tool', async () => {
    const alice = mainSession();
    checkToolResult(await call(alice, 'echo', { text: 'hello' }), { text: 'hello' }, 'echo');
    const res = await call(alice, 'list_tasks', {});
    assert.ok(!res.isError, `list_tasks: ${JSON.stringify(res.content)}`);
    assert.deepEqual(JSON.parse(toolText(res, 'list_tasks')), { tasks: [], total: 0 }, 'list_tasks of a new owner');
});

let pollTask, pollResult;

scenario('task_poll', async () => {
    const alice = mainSession();
    const seen = [];
    let released = false;
    const stream = tasks(alice).callToolStream({ name: 'hold', arguments: { label: 'poll' } }, CallToolResultSchema, {
        ...opts,
        task: { ttl: TTL }
    });
    for await (const msg of stream) {
        switch (msg.type) {
            case 'taskCreated':
                checkTask(msg.task, msg.task.taskId, 'working', 'taskCreated');
                pollTask = msg.task.taskId;
                seen.push('created');
                break;
            case 'taskStatus':
                checkTask(msg.task, pollTask, msg.task.status, 'taskStatus');
                seen.push(msg.task.status);
                if (!released) {
                    // Still held: it must be working.
                    assert.equal(msg.task.status, 'working', 'status while held');
                    released = true;
                    await release(alice, 'poll');
                }
                break;
            case 'result':
                pollResult = msg.result;
                seen.push('result');
                break;
            case 'error':
                assert.fail(`stream error: ${msg.error?.message}`);
        }
    }
    console.log(`# task_poll stream: ${seen.join(' ')}`);
    assert.match(seen.join(' '), /^created (working )+completed result$/, 'stream messages');
    checkToolResult(pollResult, { label: 'poll', steps: 0 }, 'tasks/result');
    checkRelated(pollResult, pollTask, 'tasks/result');
    checkTask(await getTask(alice, pollTask), pollTask, 'completed', 'tasks/get after');
});

scenario('task_result', async () => {
    const alice = mainSession();
    assert.ok(pollTask, 'needs task_poll');
    assert.deepEqual(await taskResult(alice, pollTask), pollResult, 'tasks/result again');

    const t = await createTask(alice, 'hold', { label: 'result' });
    const pending = taskResult(alice, t.taskId); // sent while the task is held
    let settled = false;
    pending.then(
        () => (settled = true),
        () => (settled = true)
    );
    await probe(alice, 'result', 'started');
    checkTask(await getTask(alice, t.taskId), t.taskId, 'working', 'tasks/get while held');
    assert.equal(settled, false, 'tasks/result returned before the task ended');
    await release(alice, 'result');
    const res = await pending;
    checkToolResult(res, { label: 'result', steps: 0 }, 'blocking tasks/result');
    checkRelated(res, t.taskId, 'blocking tasks/result');
    checkTask(await getTask(alice, t.taskId), t.taskId, 'completed', 'tasks/get after');

    const listed = await listAll(alice);
    const byId = Object.fromEntries(listed.map(x => [x.taskId, x]));
    checkTask(byId[pollTask] ?? {}, pollTask, 'completed', 'tasks/list poll task');
    checkTask(byId[t.taskId] ?? {}, t.taskId, 'completed', 'tasks/list result task');
    assert.equal(listed.length, 2, `tasks/list: ${JSON.stringify(listed.map(x => x.taskId))}`);
});

scenario('list_pages', async () => {
    const alice = mainSession();
    const before = (await listAll(alice)).map(x => x.taskId);
    assert.equal(before.length, 2, 'tasks before');
    const n = 55;
    const ids = [];
    for (let i = 0; i < n; i++) {
        await release(alice, `page-${i}`); // before the hold: it returns at once
        ids.push((await createTask(alice, 'hold', { label: `page-${i}` })).taskId);
    }
    for (const [i, id] of ids.entries()) {
        checkToolResult(await taskResult(alice, id), { label: `page-${i}`, steps: 0 }, `tasks/result ${i}`);
    }
    const pages = [];
    let cursor;
    do {
        const res = await tasks(alice).listTasks(cursor, opts);
        pages.push(res.tasks);
        cursor = res.nextCursor;
        assert.ok(pages.length <= 10, 'too many pages');
    } while (cursor);
    assert.deepEqual(
        pages.map(p => p.length),
        [50, before.length + n - 50],
        'page sizes'
    );
    const listed = pages.flat();
    assert.deepEqual(
        listed.map(x => x.taskId),
        [...before, ...ids],
        'tasks/list: every task once, in creation order'
    );
    for (const t of listed) checkTask(t, t.taskId, 'completed', 'tasks/list entry');
    assert.equal(
        await expectError(tasks(alice).listTasks('garbage', opts), ErrorCode.InvalidParams, 'tasks/list of a bad cursor'),
        'Invalid cursor: garbage',
        'tasks/list of a bad cursor: message'
    );
});

scenario('cancel', async () => {
    const alice = mainSession();
    const t = await createTask(alice, 'hold', { label: 'cancel' });
    assert.deepEqual(
        await probe(alice, 'cancel', 'started'),
        { label: 'cancel', started: true, stopped: false, ctx_err: '', cause: '' },
        'probe started'
    );
    const cancelled = await cancelTask(alice, t.taskId);
    checkTask(cancelled, t.taskId, 'cancelled', 'tasks/cancel');
    assert.equal(cancelled.statusMessage, CANCELLED, 'tasks/cancel statusMessage');
    assert.deepEqual(
        await probe(alice, 'cancel', 'stopped'),
        { label: 'cancel', started: true, stopped: true, ctx_err: 'context canceled', cause: CANCELLED },
        'probe stopped: the goroutine returned after its ctx ended'
    );
    const got = await getTask(alice, t.taskId);
    checkTask(got, t.taskId, 'cancelled', 'tasks/get');
    assert.equal(got.statusMessage, CANCELLED, 'tasks/get statusMessage');
    const res = await taskResult(alice, t.taskId);
    checkToolError(res, CANCELLED, 'tasks/result');
    checkRelated(res, t.taskId, 'tasks/result');
    assert.equal(
        await expectError(cancelTask(alice, t.taskId), ErrorCode.InvalidParams, 'second tasks/cancel'),
        'Cannot cancel task in terminal status: cancelled',
        'second tasks/cancel message'
    );
    const listed = (await listAll(alice)).find(x => x.taskId === t.taskId);
    checkTask(listed ?? {}, t.taskId, 'cancelled', 'tasks/list');
    checkTask(await getTask(alice, t.taskId), t.taskId, 'cancelled', 'tasks/get after a refused cancel');
});

scenario('bad_arguments', async () => {
    const alice = mainSession();
    checkToolError(await call(alice, 'echo', { text: '' }), 'text must not be empty', 'echo ""');
    const want = 'steps must be between 0 and 100, got 101';
    checkToolError(await call(alice, 'hold', { label: 'bad-fg', steps: 101 }), want, 'hold foreground');
    checkToolError(await call(alice, 'get_task', {}), 'invalid arguments: missing "task_id"', 'get_task {}');
    const t = await createTask(alice, 'hold', { label: 'bad', steps: 101 });
    const end = await pollUntilTerminal(alice, t.taskId);
    checkTask(end, t.taskId, 'failed', 'tasks/get');
    assert.equal(end.statusMessage, want, 'tasks/get statusMessage');
    const res = await taskResult(alice, t.taskId);
    checkToolError(res, want, 'tasks/result');
    checkRelated(res, t.taskId, 'tasks/result');
    // A task request for a tool that forbids it: -32601, as the spec says.
    const refused = await expectError(
        createTask(alice, 'echo', { text: 'x' }),
        ErrorCode.MethodNotFound,
        'echo (taskSupport forbidden) as a task'
    );
    console.log(`# bad_arguments: a task request for echo says ${JSON.stringify(refused)}`);
});

scenario('progress', async () => {
    const alice = mainSession();
    const got = [];
    let reached;
    const five = new Promise(r => (reached = r));
    const t = await createTask(
        alice,
        'hold',
        { label: 'progress', steps: 5 },
        {
            onprogress: p => {
                got.push(p);
                if (got.length === 5) reached();
            }
        }
    );
    await within(five, () => `${got.length} of 5 progress notifications: ${JSON.stringify(got)}`);
    // A task's notifications name it in _meta; a foreground call's do not.
    const want = (n, taskId) =>
        Array.from({ length: n }, (_, i) => ({
            progress: i + 1,
            total: n,
            message: `step ${i + 1} of ${n}`,
            ...(taskId ? { _meta: { [RELATED_TASK_META_KEY]: { taskId } } } : {})
        }));
    assert.deepEqual(got, want(5, t.taskId), 'task progress');
    await release(alice, 'progress');
    checkTask(await pollUntilTerminal(alice, t.taskId), t.taskId, 'completed', 'tasks/get');
    assert.deepEqual(got, want(5, t.taskId), 'task progress after the end');

    // In the foreground, the call is held until its 3 notifications came:
    // the SDK drops a progress notification read together with its
    // response (typescript-sdk issue 2580), so the release waits for them.
    const fg = [];
    let reachedFg;
    const three = new Promise(r => (reachedFg = r));
    let returned = false;
    const pending = call(
        alice,
        'hold',
        { label: 'progress-fg', steps: 3 },
        {
            onprogress: p => {
                fg.push(p);
                if (fg.length === 3) reachedFg();
            }
        }
    ).finally(() => (returned = true));
    await within(three, () => `${fg.length} of 3 foreground progress notifications: ${JSON.stringify(fg)}`);
    assert.deepEqual(fg, want(3), 'foreground progress');
    assert.equal(returned, false, 'the foreground call returned before its release');
    await release(alice, 'progress-fg');
    checkToolResult(await pending, { label: 'progress-fg', steps: 3 }, 'foreground hold');
    assert.deepEqual(fg, want(3), 'foreground progress after the result');
});

scenario('other_session', async () => {
    const alice = mainSession();
    const t = await createTask(alice, 'hold', { label: 'private' });
    await probe(alice, 'private', 'started');
    const bob = await start('bob');
    try {
        assert.deepEqual(await listAll(bob), [], "bob's tasks/list");
        const unknown = 'no-such-task';
        // Each answer for alice's task is exactly the answer for an unknown id.
        const same = async (what, f) => {
            for (const id of [t.taskId, unknown]) {
                assert.equal(
                    await expectError(f(id), ErrorCode.InvalidParams, `${what} of ${id}`),
                    `Task not found: ${id}`,
                    `${what} of ${id}: message`
                );
            }
        };
        await same('tasks/get', id => getTask(bob, id));
        await same('tasks/result', id => taskResult(bob, id));
        await same('tasks/cancel', id => cancelTask(bob, id));
        const tool = async (name, args, want) => {
            for (const id of [t.taskId, unknown]) {
                const res = await call(bob, name, args(id));
                assert.equal(!!res.isError, want.isError, `${name} of ${id}: isError`);
                assert.equal(toolText(res, name), want.text(id), `${name} of ${id}: text`);
            }
        };
        await tool('get_task', id => ({ task_id: id }), { isError: true, text: id => `task not found: ${id}` });
        await tool('cancel_task', id => ({ target: { relation: 'child', name: id } }), {
            isError: false,
            text: id => JSON.stringify({ status: 'failed', root_task_id: id, cancelled_count: 0, error: 'task_not_found' })
        });
        await tool('send_message', id => ({ to: { relation: 'child', name: id }, message: 'hi' }), {
            isError: false,
            text: () => '{"status":"failed","error":"recipient_not_found"}'
        });
        const lt = await call(bob, 'list_tasks', {});
        assert.deepEqual(JSON.parse(toolText(lt, 'list_tasks')), { tasks: [], total: 0 }, "bob's list_tasks");

        checkTask(await getTask(alice, t.taskId), t.taskId, 'working', "alice's task after bob's calls");
        await release(alice, 'private');
        checkTask(await pollUntilTerminal(alice, t.taskId), t.taskId, 'completed', "alice's task");
        const leaked = bob.tap.received.filter(m => m.method && JSON.stringify(m).includes(t.taskId));
        assert.deepEqual(leaked, [], "bob's notifications about alice's task");
    } finally {
        await close(bob);
    }
});

scenario('restart', async () => {
    const first = await start('carol');
    const t = await createTask(first, 'hold', { label: 'doomed' });
    await probe(first, 'doomed', 'started');
    process.kill(first.tap.pid, 'SIGKILL');
    await first.tap.closed;
    const second = await start('carol');
    try {
        const got = await getTask(second, t.taskId);
        console.log(`# restart: tasks/get after the restart: ${got.status} ${JSON.stringify(got.statusMessage)}`);
        checkTask(got, t.taskId, 'failed', 'tasks/get');
        assert.match(got.statusMessage ?? '', INTERRUPTED, 'tasks/get statusMessage');
        const listed = await listAll(second);
        assert.equal(listed.length, 1, `tasks/list: ${JSON.stringify(listed)}`);
        assert.deepEqual(listed[0], got, 'tasks/list entry');
        const res = await taskResult(second, t.taskId);
        checkToolError(res, got.statusMessage, 'tasks/result');
        checkRelated(res, t.taskId, 'tasks/result');
        assert.equal(
            await expectError(cancelTask(second, t.taskId), ErrorCode.InvalidParams, 'tasks/cancel'),
            'Cannot cancel task in terminal status: failed',
            'tasks/cancel message'
        );
    } finally {
        await close(second);
    }
});

scenario('http_sessions', async () => {
    const server = await startHTTP();
    const sessions = [];
    try {
        const a = await httpConnect('http-a', server.url);
        sessions.push(a);
        const b = await httpConnect('http-b', server.url);
        sessions.push(b);
        assert.equal(a.tap.protocolVersion, WANT_PROTOCOL, 'negotiated protocol version');
        assert.ok(a.tap.sessionId && b.tap.sessionId && a.tap.sessionId !== b.tap.sessionId, 'two sessions');
        assert.deepEqual(
            a.client.getServerCapabilities()?.tasks,
            { list: {}, cancel: {}, requests: { tools: { call: {} } } },
            'capabilities.tasks'
        );

        // A task of a's, with progress, seen by a only.
        const got = [];
        let reached;
        const two = new Promise(r => (reached = r));
        const t = await createTask(
            a,
            'hold',
            { label: 'http-cancel', steps: 2 },
            {
                onprogress: p => {
                    got.push(p);
                    if (got.length === 2) reached();
                }
            }
        );
        await probe(a, 'http-cancel', 'started');
        await within(two, () => `${got.length} of 2 progress notifications over HTTP: ${JSON.stringify(got)}`);
        assert.deepEqual(
            got,
            [1, 2].map(i => ({ progress: i, total: 2, message: `step ${i} of 2`, _meta: { [RELATED_TASK_META_KEY]: { taskId: t.taskId } } })),
            'task progress over HTTP'
        );
        checkTask(await getTask(a, t.taskId), t.taskId, 'working', "a's tasks/get");
        assert.deepEqual(
            (await listAll(a)).map(x => x.taskId),
            [t.taskId],
            "a's tasks/list"
        );
        assert.deepEqual(await listAll(b), [], "b's tasks/list");
        for (const [what, f] of [
            ['tasks/get', id => getTask(b, id)],
            ['tasks/result', id => taskResult(b, id)],
            ['tasks/cancel', id => cancelTask(b, id)]
        ]) {
            assert.equal(
                await expectError(f(t.taskId), ErrorCode.InvalidParams, `b's ${what}`),
                `Task not found: ${t.taskId}`,
                `b's ${what}: message`
            );
        }
        checkToolError(await call(b, 'get_task', { task_id: t.taskId }), `task not found: ${t.taskId}`, "b's get_task");

        // a cancels it: the goroutine stops.
        checkTask(await cancelTask(a, t.taskId), t.taskId, 'cancelled', "a's tasks/cancel");
        assert.deepEqual(
            await probe(a, 'http-cancel', 'stopped'),
            { label: 'http-cancel', started: true, stopped: true, ctx_err: 'context canceled', cause: CANCELLED },
            'probe stopped'
        );

        // A long call polled to completion through callToolStream.
        const seen = [];
        let released = false;
        for await (const msg of tasks(a).callToolStream({ name: 'hold', arguments: { label: 'http-poll' } }, CallToolResultSchema, {
            ...opts,
            task: { ttl: TTL }
        })) {
            seen.push(msg.type === 'taskStatus' ? msg.task.status : msg.type);
            if (msg.type === 'error') assert.fail(`stream error: ${msg.error?.message}`);
            if (msg.type === 'taskStatus' && !released) {
                assert.equal(msg.task.status, 'working', 'status while held');
                released = true;
                await release(a, 'http-poll');
            }
            if (msg.type === 'result') checkToolResult(msg.result, { label: 'http-poll', steps: 0 }, 'tasks/result');
        }
        assert.match(seen.join(' '), /^taskCreated (working )+completed result$/, 'stream messages');
    } finally {
        for (const s of sessions) await close(s);
        server.proc.stdin.end();
        const [code, signal] = await server.exited;
        assert.equal(code, 0, `tsserver -http exit (signal ${signal})`);
    }
});

scenario('large_result', async () => {
    const alice = mainSession();
    const args = { kib: 200 };
    const plain = await call(alice, 'big', args);
    const text = toolText(plain, 'plain big');
    assert.ok(text.length >= 200 << 10, `plain big: ${text.length} characters`);
    const t = await createTask(alice, 'big', args);
    const res = await taskResult(alice, t.taskId);
    checkRelated(res, t.taskId, 'tasks/result');
    // Byte for byte the plain call's result, plus the related task in _meta.
    assert.equal(toolText(res, 'tasks/result'), text, "tasks/result text: the plain call's");
    assert.equal(JSON.stringify(res.structuredContent), JSON.stringify(plain.structuredContent), 'structuredContent');
    assert.equal(!!res.isError, false, 'tasks/result isError');
    assert.deepEqual(Object.keys(res._meta), [RELATED_TASK_META_KEY], 'tasks/result _meta keys');
    const { _meta, ...rest } = res;
    assert.equal(JSON.stringify(rest), JSON.stringify(plain), 'tasks/result without _meta: the plain result');
    const end = await getTask(alice, t.taskId);
    checkTask(end, t.taskId, 'completed', 'tasks/get');
    // ttl: from creation to the end, plus the store's 24 h (to the millisecond).
    const ttl = Date.parse(end.lastUpdatedAt) - Date.parse(end.createdAt) + 24 * 3600 * 1000;
    assert.ok(Math.abs(end.ttl - ttl) <= 1, `tasks/get ttl ${end.ttl}, want ${ttl}`);
    console.log(`# large_result: ${JSON.stringify(plain).length} bytes whole through tasks/result, ttl ${end.ttl}`);
});

scenario('elicitation', async () => {
    const dave = await start('dave', { elicitation: {} });
    try {
        const asked = [];
        let taskId;
        dave.client.setRequestHandler(ElicitRequestSchema, async req => {
            asked.push(req.params);
            // While the client is asked, the task reads input_required with the question.
            asked.push(await getTask(dave, taskId));
            return { action: 'accept', content: { answer: 'main' } };
        });
        const t = await createTask(dave, 'ask', { question: 'which branch?' });
        taskId = t.taskId;
        const res = await taskResult(dave, t.taskId); // the spec's way: it is asked meanwhile
        checkToolResult(res, { answer: 'main' }, 'tasks/result');
        checkRelated(res, t.taskId, 'tasks/result');
        assert.equal(asked.length, 2, `elicitations: ${JSON.stringify(asked)}`);
        const [params, during] = asked;
        assert.deepEqual(
            params,
            {
                _meta: { [RELATED_TASK_META_KEY]: { taskId: t.taskId } },
                mode: 'form',
                message: 'which branch?',
                requestedSchema: {
                    type: 'object',
                    properties: { answer: { type: 'string', title: 'Answer', description: "Your answer to the task's question." } },
                    required: ['answer']
                }
            },
            'elicitation/create params'
        );
        checkTask(during, t.taskId, 'input_required', 'tasks/get while asked');
        assert.equal(during.statusMessage, 'which branch?', 'statusMessage while asked');
        assert.ok(
            Date.parse(during.lastUpdatedAt) > Date.parse(t.createdAt),
            `lastUpdatedAt ${during.lastUpdatedAt} after createdAt ${t.createdAt}`
        );
        const end = await getTask(dave, t.taskId);
        checkTask(end, t.taskId, 'completed', 'tasks/get after');
        assert.ok(Date.parse(end.lastUpdatedAt) >= Date.parse(during.lastUpdatedAt), 'lastUpdatedAt at the end');
    } finally {
        await close(dave);
    }
});

scenario('client_errors', async () => {
    assert.deepEqual(clientErrors, [], 'errors the SDK client reported');
});

let failed = 0;
for (const { name, fn } of scenarios) {
    try {
        await fn();
        console.log(`ok ${name}`);
    } catch (err) {
        failed++;
        const detail = String(err?.message ?? err).replace(/\s*\n\s*/g, ' ');
        console.log(`FAIL ${name}: ${detail}`);
    }
}
if (aliceSession) await close(aliceSession);
process.exit(failed ? 1 : 0);
