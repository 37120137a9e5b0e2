// Drives the bgtask MCP host on revision 2026-07-28 with the official
// TypeScript SDK v2 client (@modelcontextprotocol/client) and the official
// tasks extension client (@modelcontextprotocol/ext-tasks), run by
// TestConformance. Usage: node suite2026.mjs URL. One line per scenario:
// "ok NAME" or "FAIL NAME: detail".
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, resultFromTaskOutcome, TaskCancelledError } from '@modelcontextprotocol/ext-tasks/client';

const url = process.argv[2];
const TASKS = 'io.modelcontextprotocol/tasks';
const VERSION = '2026-07-28';
const clientInfo = { name: 'bgtask-suite2026', version: '0' };
const clientCapabilities = { extensions: { [TASKS]: {} } };

// rawDispatch posts one JSON-RPC request as the 2026-07-28 streamable HTTP
// transport does (the SDK's codecs do not take the extension's results)
// and returns its result or error, as ext-tasks wants them.
let nextId = 1;
async function rawDispatch(request) {
  // ext-tasks hands over the method and params: the host's coordinator
  // gives the id.
  const msg = await post({ jsonrpc: '2.0', id: nextId++, ...request });
  return msg.error ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result };
}

// post posts one JSON-RPC request and returns the response, from a JSON or
// an event-stream body.
async function post(request) {
  const params = request.params ?? {};
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Mcp-Protocol-Version': VERSION,
    'Mcp-Method': request.method,
  };
  const name = request.method === 'tools/call' ? params.name : params.taskId;
  if (typeof name === 'string') headers['Mcp-Name'] = name;
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(request) });
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    for (const line of text.split('\n')) {
      if (!line.startsWith('data: ')) continue;
      const msg = JSON.parse(line.slice(6));
      if (msg.id === request.id) return msg;
    }
    throw new Error(`no response in ${text}`);
  }
  return JSON.parse(text);
}

async function connect(tasks) {
  const client = new Client(clientInfo, {
    capabilities: tasks ? clientCapabilities : {},
    versionNegotiation: { mode: 'auto' },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function session(onInputRequest) {
  const client = await connect(true);
  const s = createTaskSessionFromClient(client, {
    endpointId: 'bgtask-conformance-host',
    rawDispatch,
    v2RequestFraming: { protocolVersion: VERSION, clientInfo, clientCapabilities },
    onInputRequest,
  });
  return { client, s, async close() { await s.close(); await client.close(); } };
}

function check(cond, detail) {
  if (!cond) throw new Error(detail);
}

const scenarios = {
  async negotiate() {
    const c = await connect(true);
    const v = c.getNegotiatedProtocolVersion();
    check(v === VERSION, `negotiated ${v}`);
    check(c.getServerCapabilities()?.extensions?.[TASKS] !== undefined, `capabilities ${JSON.stringify(c.getServerCapabilities())}`);
    await c.close();
  },
  async plain_tool() {
    const c = await connect(false);
    const r = await c.callTool({ name: 'greet', arguments: { name: 'TS' } });
    check(r.content?.[0]?.text === 'Hello, TS!', JSON.stringify(r));
    await c.close();
  },
  async task_result() {
    const t = await session();
    try {
      const exec = await t.s.callTool('slow_compute', { seconds: 0.2, label: 'ts' });
      const { outcome } = await exec.settle();
      const r = resultFromTaskOutcome(outcome);
      check(r.content?.[0]?.text === 'computed ts', JSON.stringify(r));
    } finally {
      await t.close();
    }
  },
  async input() {
    const asked = [];
    const t = await session(async (request, ctx) => {
      asked.push({ kind: request.kind, message: request.params.message, scope: ctx.scope, delivery: ctx.delivery });
      return { action: 'accept', content: { answer: 'yes' } };
    });
    try {
      const exec = await t.s.callTool('confirm_delete', { filename: 'a.txt' });
      const r = resultFromTaskOutcome((await exec.settle()).outcome);
      check(r.content?.[0]?.text === 'deleted a.txt (yes)', JSON.stringify(r));
      check(asked.length === 1 && asked[0].kind === 'elicitation' && asked[0].message === 'Delete a.txt?' && asked[0].delivery === 'task-update', JSON.stringify(asked));
    } finally {
      await t.close();
    }
  },
  async cancel() {
    const t = await session();
    try {
      const exec = await t.s.callTool('slow_compute', { seconds: 600, label: 'long' });
      await exec.cancel();
      const { outcome } = await exec.settle();
      let err;
      try {
        resultFromTaskOutcome(outcome);
      } catch (e) {
        err = e;
      }
      check(err instanceof TaskCancelledError, `outcome ${JSON.stringify(outcome)} (${err})`);
    } finally {
      await t.close();
    }
  },
  async tool_error() {
    const t = await session();
    try {
      const exec = await t.s.callTool('failing_job', {});
      const r = resultFromTaskOutcome((await exec.settle()).outcome);
      check(r.isError === true && r.content[0].text === 'the job failed', JSON.stringify(r));
    } finally {
      await t.close();
    }
  },
  async protocol_error() {
    const t = await session();
    try {
      const exec = await t.s.callTool('protocol_error_job', {});
      const { outcome } = await exec.settle();
      let err;
      try {
        resultFromTaskOutcome(outcome);
      } catch (e) {
        err = e;
      }
      check(err?.code === -32603 && err.message.includes("the job's backend failed"), `outcome ${JSON.stringify(outcome)} (${err})`);
    } finally {
      await t.close();
    }
  },
  async required_without_extension() {
    const c = await connect(false);
    try {
      await c.callTool({ name: 'failing_job', arguments: {} });
      throw new Error('failing_job answered without the extension');
    } catch (e) {
      check(e.code === -32021, `error ${e.code}: ${e.message}`);
    } finally {
      await c.close();
    }
  },
  async unknown_task() {
    const res = await post({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 'task_nope', _meta: {
      'io.modelcontextprotocol/protocolVersion': VERSION, 'io.modelcontextprotocol/clientInfo': clientInfo, 'io.modelcontextprotocol/clientCapabilities': clientCapabilities } } });
    check(res.error?.code === -32602 && res.error.message === 'Task not found: task_nope', JSON.stringify(res));
  },
};

let failed = 0;
for (const [name, run] of Object.entries(scenarios)) {
  try {
    await run();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    const cause = e?.cause ? ` (cause: ${e.cause}${e.cause.details ? ' ' + JSON.stringify(e.cause.details) : ''})` : '';
    console.log(`FAIL ${name}: ${e}${cause}`.replaceAll('\n', ' '));
  }
}
process.exit(failed ? 1 : 0);
