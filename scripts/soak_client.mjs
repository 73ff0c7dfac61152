// The load of scripts/soak.sh: CONCURRENCY streaming clients against a running `vellum serve`
// for DURATION seconds, with random prompt lengths, random sampling parameters and random
// cancellations. Prints a JSON report on stdout; see soak.sh for the checks.
//   node soak_client.mjs URL SERVER_PID DURATION_S CONCURRENCY WARMUP_S
// Node >= 18 (global fetch); no npm packages.
import { readFileSync } from 'node:fs';

const [url, pidText, durationText, concurrencyText, warmupText] = process.argv.slice(2);
const serverPid = Number(pidText);
const durationMs = Number(durationText) * 1000;
const concurrency = Number(concurrencyText);
const warmupMs = Number(warmupText) * 1000;
const windowMs = Math.max(10_000, Math.floor((durationMs - warmupMs) / 6));

const words = ('once upon a time there was a little girl named lily she loved to play outside ' +
  'in the park with her dog max one day they found a big red ball under a tree and the sun was ' +
  'shining bright').split(' ');
let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

const start = Date.now();
const stats = { ok: 0, cancelled: 0, failed: 0, failures: [], tokens: 0 };
const itlByWindow = new Map();  // window index -> inter-token gaps (ms), after warm-up
const rssSamples = [];          // [ms since start, KiB]

function rssKiB() {
  const status = readFileSync(`/proc/${serverPid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

function randomRequest() {
  const length = 1 + Math.floor(rand() * rand() * 150);  // mostly short, some long prompts
  const prompt = Array.from({ length }, () => pick(words)).join(' ');
  const temperature = pick([0, 0.3, 0.8, 1.2]);
  const body = {
    prompt, stream: true, max_tokens: 1 + Math.floor(rand() * 96),
    temperature, top_p: pick([1, 0.9, 0.5]),
    top_k: pick([0, -1, 5, 40]), seed: rand() < 0.5 ? Math.floor(rand() * 1000) : undefined,
    // vLLM refuses n > 1 with greedy sampling: only valid requests, so every failure counts.
    n: temperature > 0 && rand() < 0.15 ? 2 : 1, presence_penalty: pick([0, 0, 0.5]),
    stop: rand() < 0.2 ? [pick(words)] : undefined, ignore_eos: rand() < 0.3,
    stream_options: { include_usage: true },
  };
  return { body, cancelAfterMs: rand() < 0.2 ? Math.floor(rand() * 400) : null };
}

async function one() {
  const { body, cancelAfterMs } = randomRequest();
  const controller = new AbortController();
  let timer = null;
  if (cancelAfterMs !== null) timer = setTimeout(() => controller.abort(), cancelAfterMs);
  let cancelled = false;
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
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
        if (json.error) throw new Error(`error event: ${data}`);
        if (!json.choices || json.choices.length === 0) continue;  // the usage chunk
        const now = Date.now();
        stats.tokens += 1;
        if (last !== null && now - start >= warmupMs) {
          const w = Math.floor((now - start - warmupMs) / windowMs);
          if (!itlByWindow.has(w)) itlByWindow.set(w, []);
          itlByWindow.get(w).push(now - last);
        }
        last = now;
      }
    }
    if (!done) throw new Error('stream ended without [DONE]');
    stats.ok += 1;
  } catch (e) {
    if (controller.signal.aborted) {
      cancelled = true;
      stats.cancelled += 1;
    } else {
      stats.failed += 1;
      if (stats.failures.length < 20) stats.failures.push(String(e).slice(0, 300));
    }
  } finally {
    if (timer) clearTimeout(timer);
  }
  return cancelled;
}

async function worker() {
  while (Date.now() - start < durationMs) await one();
}

const sampler = setInterval(() => rssSamples.push([Date.now() - start, rssKiB()]), 5000);
rssSamples.push([0, rssKiB()]);
await Promise.all(Array.from({ length: concurrency }, worker));
clearInterval(sampler);
rssSamples.push([Date.now() - start, rssKiB()]);

const p99 = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(0.99 * s.length))] : null;
};
const windows = [...itlByWindow.keys()].sort((a, b) => a - b)
  .map((w) => ({ window: w, from_s: (warmupMs + w * windowMs) / 1000,
                 samples: itlByWindow.get(w).length, p99_itl_ms: p99(itlByWindow.get(w)) }));
const afterWarmup = rssSamples.filter(([t]) => t >= warmupMs);
const report = {
  duration_s: (Date.now() - start) / 1000, concurrency,
  requests: { ok: stats.ok, cancelled: stats.cancelled, failed: stats.failed },
  failures: stats.failures, streamed_chunks: stats.tokens,
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
  itl_windows: windows,
};
console.log(JSON.stringify(report, null, 1));
