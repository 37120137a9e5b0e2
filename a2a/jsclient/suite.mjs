// The JavaScript client suite of the bgtask A2A server: the official A2A
// JavaScript SDK's client (@a2a-js/sdk 1.3.x, which speaks A2A 1.0 and talks
// to this 0.3 server through its v0.3 compatibility layer) drives a running
// server over HTTP on the loopback address.
//
//   node suite.mjs <server URL>
//
// The server is a2a/internal/jsserver; the owner of each request is its
// X-Owner header. One line per scenario, "ok <name>" or "FAIL <name>: <detail>";
// the exit status is non-zero if any failed.

import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const base = process.argv[2];
if (!base) {
  console.error('usage: node suite.mjs <server URL>');
  process.exit(2);
}

// fetchAs sends every request with the owner header: the server's stand-in
// for authentication.
const fetchAs = (owner) => (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set('X-Owner', owner);
  return fetch(input, { ...init, headers });
};

// clientFor builds a client that reads the agent card and, seeing protocol
// version 0.3, uses the SDK's v0.3 JSON-RPC transport.
async function clientFor(owner) {
  const fetchImpl = fetchAs(owner);
  const legacyCompat = { enabled: true };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat }),
    }),
  );
  return factory.createFromUrl(base);
}

let n = 0;
const message = (text, taskId = '') => ({
  messageId: `js-${process.pid}-${++n}`,
  contextId: '',
  taskId,
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const send = (text, taskId, configuration) => ({ tenant: '', message: message(text, taskId), configuration, metadata: undefined });
const textOf = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : JSON.stringify(p.content?.value))).join('');
const stateName = (s) => TaskState[s] ?? String(s);

// bigText is the text the test server's "big <n>" command completes with:
// n bytes with characters JSON escapes and non-ASCII ones.
function bigText(n) {
  const unit = 'abc<&>"é\n'; // 10 bytes in UTF-8
  const whole = Math.floor(n / 10);
  return unit.repeat(whole) + 'x'.repeat(n - whole * 10);
}
const utf8 = new TextEncoder();
// expectSameBytes checks that got is want byte for byte, as UTF-8.
function expectSameBytes(got, want, what) {
  const g = utf8.encode(got ?? '');
  const w = utf8.encode(want);
  if (g.length !== w.length || g.some((b, i) => b !== w[i])) {
    throw new Error(`${what}: got ${g.length} bytes, want the result's ${w.length} bytes, equal byte for byte`);
  }
}

function expect(cond, detail) {
  if (!cond) throw new Error(detail);
}
function expectEqual(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}

// eventName names a stream event for comparison.
function eventName(ev) {
  const p = ev.payload ?? ev;
  switch (p.$case) {
    case 'task':
      return `task:${stateName(p.value.status?.state)}`;
    case 'statusUpdate':
      return `status:${stateName(p.value.status?.state)}`;
    case 'artifactUpdate':
      return `artifact:${p.value.artifact?.artifactId}`;
    case 'message':
      return 'message';
  }
  return `unknown:${JSON.stringify(ev)}`;
}

// streamUntilAgentMessage streams req and returns the task id and the text
// of the first message the agent sends; it stops reading there.
async function streamUntilAgentMessage(client, req) {
  let id = '';
  for await (const ev of client.sendMessageStream(req)) {
    const p = ev.payload;
    if (p?.$case === 'task') id = p.value.id;
    if (p?.$case === 'statusUpdate') {
      id ||= p.value.taskId;
      const m = p.value.status?.message;
      if (m && m.role === Role.ROLE_AGENT) return { id, text: textOf(m.parts) };
    }
  }
  throw new Error('the stream ended without a message from the agent');
}

const alice = await clientFor('alice');
const bob = await clientFor('bob');
let taskOfAlice = '';

const scenarios = [
  ['card', async () => {
    const raw = await (await fetch(new URL('/.well-known/agent-card.json', base))).json();
    expectEqual([raw.name, raw.protocolVersion, raw.capabilities?.streaming, raw.preferredTransport],
      ['bgtask test agent', '0.3.0', true, 'JSONRPC'], 'raw card');
    expectEqual(raw.skills.map((s) => s.id), ['demo'], 'skills');
    expectEqual([raw.securitySchemes, raw.security],
      [{ owner: { type: 'apiKey', description: 'the owner of the request (a stand-in for a real credential)', in: 'header', name: 'X-Owner' } },
        [{ owner: [] }]], 'security');
    const card = await alice.getAgentCard();
    expectEqual(card.name, 'bgtask test agent', 'card name via the client');
  }],
  ['no-credential', async () => {
    // Without the credential the card declares, every JSON-RPC call is refused.
    const res = await fetch(base, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 'task_1' } }),
    });
    expectEqual(res.status, 401, 'HTTP status without X-Owner');
  }],
  ['send', async () => {
    const res = await alice.sendMessage(send('echo hello'));
    const task = res;
    expectEqual(stateName(task.status?.state), 'TASK_STATE_COMPLETED', 'state');
    expectEqual(task.artifacts.map((a) => [a.artifactId, textOf(a.parts)]), [['result', 'echo: hello']], 'artifacts');
    taskOfAlice = task.id;
  }],
  ['stream', async () => {
    const names = [];
    let result = '';
    for await (const ev of alice.sendMessageStream(send('echo streamed'))) {
      names.push(eventName(ev));
      if (ev.payload?.$case === 'artifactUpdate') result = textOf(ev.payload.value.artifact?.parts);
    }
    expectEqual(names, ['task:TASK_STATE_WORKING', 'status:TASK_STATE_WORKING', 'artifact:result', 'status:TASK_STATE_COMPLETED'], 'events');
    expectEqual(result, 'echo: streamed', 'artifact text');
  }],
  ['continue', async () => {
    const first = await streamUntilAgentMessage(alice, send('chat'));
    expectEqual(first.text, 'got: chat', 'first answer');
    const second = await streamUntilAgentMessage(alice, send('more', first.id));
    expectEqual([second.id, second.text], [first.id, 'got: more'], 'second answer');
    const done = await alice.sendMessage(send('bye', first.id));
    expectEqual(stateName(done.status?.state), 'TASK_STATE_COMPLETED', 'state after bye');
    expectEqual(done.artifacts[0].parts[0].content, { $case: 'data', value: { messages: 3 } }, 'result artifact');
    // The task has ended: a further message is refused.
    const refused = await alice.sendMessage(send('again', first.id)).then(() => null, (e) => e);
    expect(refused, 'a message to an ended task was accepted');
    expectEqual([refused.constructor.name, refused.data?.error],
      ['JsonRpcUnsupportedOperationError', `task ${first.id} is in a terminal state "completed" and takes no more messages: this operation is not supported`],
      'message to an ended task');
  }],
  ['input-required', async () => {
    const asked = await alice.sendMessage(send('ask'));
    expectEqual([stateName(asked.status?.state), textOf(asked.status?.message?.parts)],
      ['TASK_STATE_INPUT_REQUIRED', 'What is your name?'], 'input request');
    const answered = await alice.sendMessage(send('Ada', asked.id));
    expectEqual([stateName(answered.status?.state), textOf(answered.artifacts[0]?.parts)],
      ['TASK_STATE_COMPLETED', 'hello Ada'], 'after the answer');
  }],
  ['cancel', async () => {
    const config = { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true };
    const started = await alice.sendMessage(send('wait', '', config));
    expectEqual(stateName(started.status?.state), 'TASK_STATE_WORKING', 'state of a non-blocking send');
    const cancelled = await alice.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    expectEqual([cancelled.id, stateName(cancelled.status?.state)], [started.id, 'TASK_STATE_CANCELED'], 'after cancel');
    const got = await alice.getTask({ tenant: '', id: started.id, historyLength: undefined });
    expectEqual(stateName(got.status?.state), 'TASK_STATE_CANCELED', 'state read back');
  }],
  ['cancel-cascade', async () => {
    // The sub-agent starts a child task of its own and says its id.
    const { id, text } = await streamUntilAgentMessage(alice, send('wait'));
    expect(text.startsWith('child task_'), `agent message ${JSON.stringify(text)}, want "child <id>"`);
    const cancelled = await alice.cancelTask({ tenant: '', id, metadata: undefined });
    expectEqual(stateName(cancelled.status?.state), 'TASK_STATE_CANCELED', 'after cancel');
    const child = await (await fetch(new URL(`/debug/wait/${text.slice('child '.length)}`, base))).json();
    expectEqual([child.status, child.parent?.task_id], ['cancelled', id], "the sub-agent's child");
  }],
  ['get', async () => {
    const task = await alice.getTask({ tenant: '', id: taskOfAlice, historyLength: undefined });
    expectEqual([task.id, stateName(task.status?.state), textOf(task.history[0]?.parts)],
      [taskOfAlice, 'TASK_STATE_COMPLETED', 'echo hello'], 'task');
  }],
  ['big-result', async () => {
    // 200 KiB, over the record's cap of 64 KiB: whole, byte for byte, in
    // the blocking reply, tasks/get, the stream and a resubscription.
    const want = bigText(200 * 1024);
    const sent = await alice.sendMessage(send('big 204800'));
    expectEqual(stateName(sent.status?.state), 'TASK_STATE_COMPLETED', 'state');
    expectSameBytes(textOf(sent.artifacts[0]?.parts), want, 'message/send');
    expectEqual(sent.artifacts[0]?.metadata, undefined, 'metadata of a whole result');
    const got = await alice.getTask({ tenant: '', id: sent.id, historyLength: undefined });
    expectSameBytes(textOf(got.artifacts[0]?.parts), want, 'tasks/get');
    let streamed = null;
    for await (const ev of alice.sendMessageStream(send('big 204800'))) {
      if (ev.payload?.$case === 'artifactUpdate') streamed = textOf(ev.payload.value.artifact?.parts);
    }
    expectSameBytes(streamed, want, 'message/stream');
    let resubscribed = null;
    for await (const ev of alice.resubscribeTask({ tenant: '', id: sent.id })) {
      const p = ev.payload;
      if (p?.$case === 'task') resubscribed = textOf(p.value.artifacts?.[0]?.parts);
      if (p?.$case === 'artifactUpdate') resubscribed = textOf(p.value.artifact?.parts);
    }
    expectSameBytes(resubscribed, want, 'tasks/resubscribe');
  }],
  ['message-id', async () => {
    // The client's messageId is the id of its message in the task's history.
    const req = send('echo mine');
    const done = await alice.sendMessage(req);
    const got = await alice.getTask({ tenant: '', id: done.id, historyLength: 1 });
    expectEqual(got.history.map((m) => [m.messageId, textOf(m.parts)]), [[req.message.messageId, 'echo mine']], 'history');
  }],
  ['cross-owner', async () => {
    for (const [what, call] of [
      ['get', (id) => bob.getTask({ tenant: '', id, historyLength: undefined })],
      ['cancel', (id) => bob.cancelTask({ tenant: '', id, metadata: undefined })],
      ['send', (id) => bob.sendMessage(send('let me in', id))],
    ]) {
      const errOf = async (id) => {
        try {
          await call(id);
          return null;
        } catch (e) {
          return e;
        }
      };
      const other = await errOf(taskOfAlice);
      const unknown = await errOf('task_00000000000000000000000000000000');
      expect(other, `${what}: bob reached alice's task`);
      expect(/not found/i.test(other.message), `${what}: got ${other.constructor.name} "${other.message}", want task not found`);
      const shape = (e, id) => [e.constructor.name, e.message, JSON.stringify(e.data ?? null)].map((s) => s.replaceAll(id, 'ID'));
      expectEqual(shape(other, taskOfAlice), shape(unknown, 'task_00000000000000000000000000000000'), `${what}: error`);
    }
  }],
];

let failed = 0;
for (const [name, run] of scenarios) {
  try {
    await run();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.message ?? e}${e?.cause ? ` (${e.cause.message ?? e.cause})` : ""}`.replaceAll('\n', ' '));
  }
}
process.exit(failed ? 1 : 0);
