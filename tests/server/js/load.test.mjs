// Load: 64 concurrent streaming clients send 500 requests of mixed lengths. Every response must
// be complete (the requested number of tokens, finish_reason, usage, [DONE]) with no errors, and
// afterwards no request and no KV block may be left. Bounded to loopback and the tiny model.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import OpenAI from 'openai';

import {
  chatTemplate, metric, randomIds, scrapeMetrics, seededRng, skipReason, startServer, waitForIdle,
} from './server.mjs';

const skip = skipReason();
if (skip) {
  console.log(`SKIP: ${skip}`);
  process.exit(77);
}

const CLIENTS = 64;
const REQUESTS = 500;

let server;

before(async () => {
  server = await startServer({
    args: ['--max-model-len', '512', '--max-num-seqs', '64', '--kv-cache-memory', '64MiB',
      '--served-model-name', 'tiny', '--chat-template', chatTemplate],
  });
});

after(async () => {
  if (!server) return;
  const { code } = await server.stop();
  assert.equal(code, 0, `server exited with ${code}:\n${server.log()}`);
});

it(`${CLIENTS} concurrent streaming clients, ${REQUESTS} requests`, { timeout: 240_000 }, async () => {
  const client = new OpenAI({ apiKey: 'unused', baseURL: `${server.base}/v1`, maxRetries: 0 });
  const rng = seededRng(2024);
  const jobs = Array.from({ length: REQUESTS }, (_, i) => ({
    i,
    prompt: randomIds(rng, 1 + Math.floor(rng() * 200)),
    maxTokens: 1 + Math.floor(rng() * 64),
    chat: i % 5 === 4,
  }));
  const failures = [];
  let next = 0;
  let done = 0;
  let outputTokens = 0;
  let peak = 0;
  let inFlight = 0;

  async function runOne(job) {
    const common = {
      model: 'tiny', max_tokens: job.maxTokens, temperature: 0, ignore_eos: true, stream: true,
      stream_options: { include_usage: true },
    };
    const stream = job.chat
      ? await client.chat.completions.create({
        ...common, messages: [{ role: 'user', content: `Tell me story number ${job.i}.` }],
      })
      : await client.completions.create({ ...common, prompt: job.prompt });
    let usage = null;
    let finish = null;
    let contentChunks = 0;
    for await (const chunk of stream) {
      if (chunk.usage && chunk.choices.length === 0) usage = chunk.usage;
      for (const c of chunk.choices) {
        contentChunks += 1;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    if (finish !== 'length') throw new Error(`request ${job.i}: finish_reason ${finish}`);
    if (!usage || usage.completion_tokens !== job.maxTokens) {
      throw new Error(`request ${job.i}: usage ${JSON.stringify(usage)}, wanted ${job.maxTokens}`);
    }
    if (!job.chat && usage.prompt_tokens !== job.prompt.length) {
      throw new Error(`request ${job.i}: prompt_tokens ${usage.prompt_tokens} != ${job.prompt.length}`);
    }
    if (contentChunks === 0) throw new Error(`request ${job.i}: no content chunk`);
    outputTokens += usage.completion_tokens;
  }

  async function worker() {
    while (next < jobs.length) {
      const job = jobs[next];
      next += 1;
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      try {
        await runOne(job);
        done += 1;
      } catch (e) {
        failures.push(String(e?.message ?? e));
      } finally {
        inFlight -= 1;
      }
    }
  }

  // The server's own view of the concurrency, sampled while the clients run.
  let maxRunning = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const m = await scrapeMetrics(server.base);
      maxRunning = Math.max(maxRunning, metric(m.values, 'vellum:num_requests_running') ?? 0);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const start = Date.now();
  await Promise.all(Array.from({ length: CLIENTS }, worker));
  const seconds = (Date.now() - start) / 1000;
  sampling = false;
  await sampler;
  console.log(`load: ${done}/${REQUESTS} requests, ${outputTokens} output tokens in ` +
              `${seconds.toFixed(1)} s, peak ${peak} in flight, at most ${maxRunning} running`);
  assert.deepEqual(failures.slice(0, 5), []);
  assert.equal(done, REQUESTS);
  assert.equal(peak, CLIENTS);
  // Requests really ran side by side in the engine (continuous batching), not one by one.
  assert.ok(maxRunning >= 16, `at most ${maxRunning} requests were running at once`);

  const m = await waitForIdle(server.base);
  assert.equal(metric(m.values, 'vellum:kv_cache_usage_perc'), 0);
  const succeeded = Object.entries(m.values)
    .filter(([k]) => k.startsWith('vellum:request_success_total{') && k.includes('"length"'))
    .reduce((sum, [, v]) => sum + v, 0);
  assert.equal(succeeded, REQUESTS);
  const generated = metric(m.values, 'vellum:generation_tokens_total');
  assert.equal(generated, outputTokens);
});
