// Disconnects: 50 streaming requests whose clients drop at random points — while queued, during
// prefill and during decode. Afterwards the engine holds no requests and no KV blocks, and the
// server still answers.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, it } from 'node:test';

import {
  metric, randomIds, scrapeMetrics, seededRng, skipReason, startServer, waitForIdle,
} from './server.mjs';

const skip = skipReason();
if (skip) {
  console.log(`SKIP: ${skip}`);
  process.exit(77);
}

let server;

before(async () => {
  // Few sequences and a small token budget: requests queue, and long prompts take several
  // (chunked) prefill steps, so drops land in every phase.
  server = await startServer({
    args: ['--max-model-len', '512', '--max-num-seqs', '8', '--max-num-batched-tokens', '64',
      '--kv-cache-memory', '64MiB'],
  });
});

after(async () => {
  if (!server) return;
  const { code } = await server.stop();
  assert.equal(code, 0, `server exited with ${code}:\n${server.log()}`);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Streams one request and closes its connection after `dropAfterChunks` pieces of the body
// (0: right after the response headers arrive) or after `dropAfterMs` milliseconds, whichever
// comes first. node:http on a connection of its own (agent: false), destroyed on the drop: an
// aborted fetch() may leave its socket open in some Node builds (Debian's 18), and the server
// then never sees a disconnect.
function droppedStream(body, { dropAfterChunks, dropAfterMs }) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const url = new URL(`${server.base}/v1/completions`);
    const req = http.request({
      hostname: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
    });
    let chunks = 0;
    let settled = false;
    const finish = (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      if (error) reject(error); else resolve(chunks);
    };
    const timer = setTimeout(() => finish(), dropAfterMs);
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        finish(new Error(`status ${res.statusCode}`));
        return;
      }
      if (dropAfterChunks === 0) finish();
      res.on('data', () => {
        chunks += 1;
        if (chunks >= dropAfterChunks) finish();
      });
      res.on('end', () => finish());
      res.on('error', () => finish());
    });
    req.on('error', () => finish());  // after a destroy, or a refused connection
    req.end(data);
  });
}

it('50 dropped streams leave no requests and no blocks behind', async () => {
  const rng = seededRng(7);
  const jobs = [];
  for (let i = 0; i < 50; i += 1) {
    const promptLen = 8 + Math.floor(rng() * 400);  // up to ~7 prefill steps of 64 tokens
    const body = {
      prompt: randomIds(rng, promptLen),
      max_tokens: 100,
      ignore_eos: true,
      temperature: 0,
      stream: true,
    };
    const phase = i % 3;
    const drop = phase === 0
      ? { dropAfterChunks: Infinity, dropAfterMs: Math.floor(rng() * 30) }   // queued or prefill
      : { dropAfterChunks: 1 + Math.floor(rng() * 20), dropAfterMs: 30_000 }; // decoding
    jobs.push(droppedStream(body, drop));
  }
  await Promise.all(jobs);
  const m = await waitForIdle(server.base);
  assert.equal(metric(m.values, 'vellum:num_requests_running'), 0);
  assert.equal(metric(m.values, 'vellum:num_requests_waiting'), 0);
  assert.equal(metric(m.values, 'vellum:kv_cache_usage_perc'), 0);
  // The drops were seen as aborts.
  const aborted = Object.entries(m.values)
    .filter(([k]) => k.startsWith('vellum:request_success_total{') && k.includes('"abort"'))
    .reduce((sum, [, v]) => sum + v, 0);
  assert.ok(aborted >= 30, `only ${aborted} aborts counted`);

  // Still serving.
  const res = await fetch(`${server.base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 }),
  });
  assert.equal(res.status, 200);
  const json = await res.json();
  assert.equal(json.usage.completion_tokens, 8);
  await sleep(10);
  const again = await scrapeMetrics(server.base);
  assert.equal(metric(again.values, 'vellum:kv_cache_usage_perc'), 0);
});

it('a non-streaming client that goes away is aborted too', async () => {
  // On this tiny model a request of 8 x 500 tokens runs for a fraction of a second, and a scrape
  // may miss it: until one is seen running (then dropped), send another.
  for (let attempt = 0; ; attempt += 1) {
    assert.ok(attempt < 20, 'no request was ever seen running');
    const controller = new AbortController();
    let settled = false;
    const pending = fetch(`${server.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 500, n: 8, ignore_eos: true }),
      signal: controller.signal,
    }).catch((e) => e).finally(() => { settled = true; });
    let running = false;
    while (!settled && !running) {
      const m = await scrapeMetrics(server.base);
      running = metric(m.values, 'vellum:num_requests_running') > 0;
      if (!running) await sleep(1);
    }
    if (!running) {
      await pending;
      continue;
    }
    controller.abort();
    await pending;
    break;
  }
  await waitForIdle(server.base, 'vellum', 10_000);
});

it('SIGTERM lets in-flight streams finish within the grace period and exits 0', async () => {
  const own = await startServer({
    args: ['--max-model-len', '512', '--kv-cache-memory', '64MiB', '--metrics-prefix', 'vllm',
      '--shutdown-grace-period', '20'],
  });
  try {
    const m = await scrapeMetrics(own.base);
    assert.equal(metric(m.values, 'vllm:num_requests_running'), 0);
    assert.equal(metric(m.values, 'vellum:num_requests_running'), undefined);
    const res = await fetch(`${own.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 200, ignore_eos: true,
        temperature: 0, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const first = await reader.read();  // the request is running
    text += decoder.decode(first.value, { stream: true });
    own.child.kill('SIGTERM');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /"completion_tokens":200/);  // finished within the grace period
    assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    const { code, signal } = await own.stop();
    assert.equal(signal, null);
    assert.equal(code, 0, own.log());
    // No longer listening.
    await assert.rejects(fetch(`${own.base}/health`));
  } finally {
    await own.stop();
  }
});
