// The load of scripts/soak.sh: CONCURRENCY streaming clients against a running `vellum serve`
// for DURATION seconds. Each request is drawn at random:
//   - endpoint: /v1/completions on token ids (lengths up to the context limit; a share starts
//     with one of a few long shared prefixes, for the prefix cache), or /v1/chat/completions
//     (structured outputs: a JSON schema, a choice or a regex);
//   - sampling: temperature, top_p, top_k, seed, penalties, stop strings, ignore_eos, n > 1
//     (with sampling only: vLLM refuses it under greedy), logprobs;
//   - a cancellation after a random delay (a share of the requests).
// Prints a JSON report on stdout: requests ok / cancelled / failed (with the first failures),
// RSS of the server over time, and per window (after warm-up) p50 / p99 of time to first token
// and inter-token latency. See soak.sh for the checks.
//   node soak_client.mjs URL SERVER_PID DURATION_S CONCURRENCY WARMUP_S WINDOW_S MAX_MODEL_LEN
// Node >= 18 (global fetch); no npm packages.
import { readFileSync } from 'node:fs';

const [url, pidText, durationText, concurrencyText, warmupText, windowText, maxLenText] =
  process.argv.slice(2);
const serverPid = Number(pidText);
const durationMs = Number(durationText) * 1000;
const concurrency = Number(concurrencyText);
const warmupMs = Number(warmupText) * 1000;
const windowMs = Number(windowText) * 1000;
const maxModelLen = Number(maxLenText);

let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));  // [lo, hi]

// Token ids of ordinary vocabulary entries (SmolLM2 and Gemma 3 have far more; a generated tiny
// model fewer, so they are folded into its vocabulary by the server's answer to /v1/models).
let vocabTop = 1000;
const randomIds = (n) => Array.from({ length: n }, () => randInt(100, vocabTop - 1));
const sharedPrefixes = [];

const words = ('once upon a time there was a little girl named lily she loved to play outside ' +
  'in the park with her dog max one day they found a big red ball under a tree and the sun was ' +
  'shining bright').split(' ');
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 16 },
    age: { type: 'integer' },
    pets: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 },
  },
  required: ['name', 'age', 'pets'],
  additionalProperties: false,
};

function samplingFields() {
  const temperature = pick([0, 0.3, 0.8, 1.2]);
  return {
    temperature, top_p: pick([1, 0.9, 0.5]), top_k: pick([0, -1, 5, 40]),
    seed: rand() < 0.5 ? randInt(0, 999) : undefined,
    n: temperature > 0 && rand() < 0.15 ? 2 : 1,
    presence_penalty: pick([0, 0, 0.5]), frequency_penalty: pick([0, 0, 0.3]),
    ignore_eos: rand() < 0.3,
  };
}

function completionRequest() {
  const maxTokens = randInt(1, 128);
  // Prompt lengths: mostly short, some up to the context limit.
  const room = maxModelLen - maxTokens - 1;
  let length = Math.max(1, Math.floor(rand() * rand() * rand() * room));
  let prompt;
  if (rand() < 0.3) {
    const prefix = pick(sharedPrefixes);
    length = Math.min(room, prefix.length + randInt(1, 64));
    prompt = [...prefix, ...randomIds(length - prefix.length)].slice(0, length);
  } else {
    prompt = randomIds(length);
  }
  const body = {
    prompt, stream: true, max_tokens: maxTokens, ...samplingFields(),
    logprobs: rand() < 0.2 ? randInt(0, 5) : undefined,
    stop: rand() < 0.2 ? [pick(words)] : undefined,
    stream_options: { include_usage: true },
  };
  return { path: '/v1/completions', body, kind: 'completion' };
}

function chatRequest() {
  const constraint = pick([
    { response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } },
    { structured_outputs: { choice: ['yes', 'no', 'maybe'] } },
    { structured_outputs: { regex: '[A-Z][a-z]{2,8} (ran|sat|sang)\\.' } },
    {},
  ]);
  const content = Array.from({ length: randInt(3, 60) }, () => pick(words)).join(' ');
  const body = {
    messages: [{ role: 'user', content }], stream: true, max_tokens: randInt(32, 160),
    ...samplingFields(), ...constraint,
    logprobs: rand() < 0.2 ? true : undefined, top_logprobs: undefined,
    stream_options: { include_usage: true },
  };
  if (body.logprobs) body.top_logprobs = randInt(0, 5);
  return { path: '/v1/chat/completions', body, kind: 'chat' };
}

const start = Date.now();
const stats = { ok: 0, cancelled: 0, failed: 0, failures: [], chunks: 0, byKind: {} };
const samples = new Map();  // window index -> { ttft: [ms], itl: [ms] }, after warm-up
const rssSamples = [];      // [ms since start, KiB]

function windowOf(now) {
  if (now - start < warmupMs) return null;
  const w = Math.floor((now - start - warmupMs) / windowMs);
  if (!samples.has(w)) samples.set(w, { ttft: [], itl: [] });
  return samples.get(w);
}

function rssKiB() {
  const status = readFileSync(`/proc/${serverPid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

async function one() {
  const { path, body, kind } = rand() < 0.7 ? completionRequest() : chatRequest();
  const cancelAfterMs = rand() < 0.2 ? randInt(0, 1500) : null;
  const controller = new AbortController();
  let timer = null;
  if (cancelAfterMs !== null) timer = setTimeout(() => controller.abort(), cancelAfterMs);
  const sent = Date.now();
  try {
    const res = await fetch(`${url}${path}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const decoder = new TextDecoder();
    let buffer = '';
    let last = null;
    let done = false;
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: ')) throw new Error(`bad event: ${event}`);
        const data = event.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const json = JSON.parse(data);
        if (json.error) throw new Error(`error event: ${data.slice(0, 200)}`);
        if (!json.choices || json.choices.length === 0) continue;  // the usage chunk
        const now = Date.now();
        stats.chunks += 1;
        const window = windowOf(now);
        if (window) window[last === null ? 'ttft' : 'itl'].push(now - (last ?? sent));
        last = now;
      }
    }
    if (!done) throw new Error('stream ended without [DONE]');
    stats.ok += 1;
    stats.byKind[kind] = (stats.byKind[kind] ?? 0) + 1;
  } catch (e) {
    if (controller.signal.aborted) {
      stats.cancelled += 1;
    } else {
      stats.failed += 1;
      if (stats.failures.length < 20) stats.failures.push(`${kind}: ${String(e).slice(0, 300)}`);
    }
  } finally {
    if (timer) clearTimeout(timer);
  }
}

async function worker() {
  while (Date.now() - start < durationMs) await one();
}

// The vocabulary size bounds the random ids (the server reports the model's max_model_len, not
// its vocabulary: tokenize a long text and take the largest id seen as a safe ceiling).
const tokenized = await (await fetch(`${url}/tokenize`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ prompt: words.join(' ').repeat(4) }),
})).json();
vocabTop = Math.max(200, ...tokenized.tokens) + 1;
for (let i = 0; i < 4; i++) sharedPrefixes.push(randomIds(Math.min(256, Math.floor(maxModelLen / 4))));

const sampler = setInterval(() => rssSamples.push([Date.now() - start, rssKiB()]), 5000);
rssSamples.push([0, rssKiB()]);
await Promise.all(Array.from({ length: concurrency }, worker));
clearInterval(sampler);
rssSamples.push([Date.now() - start, rssKiB()]);

const percentile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : null;
};
const windows = [...samples.keys()].sort((a, b) => a - b).map((w) => {
  const { ttft, itl } = samples.get(w);
  return {
    window: w, from_s: (warmupMs + w * windowMs) / 1000, ttft_samples: ttft.length,
    itl_samples: itl.length, p50_ttft_ms: percentile(ttft, 0.5), p99_ttft_ms: percentile(ttft, 0.99),
    p50_itl_ms: percentile(itl, 0.5), p99_itl_ms: percentile(itl, 0.99),
  };
});
const afterWarmup = rssSamples.filter(([t]) => t >= warmupMs);
const report = {
  duration_s: (Date.now() - start) / 1000, concurrency, max_model_len: maxModelLen,
  requests: { ok: stats.ok, cancelled: stats.cancelled, failed: stats.failed, ok_by_kind: stats.byKind },
  failures: stats.failures, streamed_chunks: stats.chunks,
  rss_kib: {
    at_start: rssSamples[0][1],
    after_warmup: afterWarmup.length ? afterWarmup[0][1] : null,
    peak: Math.max(...rssSamples.map(([, r]) => r)),
    end: rssSamples[rssSamples.length - 1][1],
    // One sample a minute, to tell a plateau (allocator caches filling) from steady growth.
    per_minute_mib: rssSamples.filter(([t], i) => i === 0 || Math.floor(t / 60000) >
      Math.floor(rssSamples[i - 1][0] / 60000)).map(([t, r]) => [Math.round(t / 1000),
      Math.round(r / 102.4) / 10]),
  },
  windows,
};
console.log(JSON.stringify(report, null, 1));
