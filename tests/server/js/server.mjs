// Starts `vellum serve` on 127.0.0.1 for black-box tests and stops it again.
//
// Environment: VELLUM_BIN (the vellum executable), VELLUM_TEST_MODELS (the shared models folder;
// default ../shared/models next to the checkout).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');

export const vellumBin = process.env.VELLUM_BIN ?? path.join(repoRoot, 'build/ci/src/cli/vellum');
export const modelsDir =
  process.env.VELLUM_TEST_MODELS ?? path.resolve(repoRoot, '../shared/models');
export const chatTemplate = path.join(here, 'chat-template.jinja');

export function modelPath(name) {
  return path.join(modelsDir, name);
}

// The reference greedy continuations (llama.cpp), by model file and prompt.
export function referenceCase(model, prompt) {
  const file = path.join(modelsDir, 'reference', 'greedy.json');
  const cases = JSON.parse(readFileSync(file, 'utf8')).cases;
  return cases.find((c) => c.model === model && c.prompt === prompt);
}

// Why these tests cannot run here, or null. Under VELLUM_REQUIRE_MODELS=1 (CI) a missing model
// is an error, not a reason to skip: throws.
export function skipReason(model = 'stories260K.gguf') {
  if (!existsSync(vellumBin)) return `vellum binary not found at ${vellumBin} (set VELLUM_BIN)`;
  if (!existsSync(modelPath(model))) {
    const why = `${model} not found in ${modelsDir} (set VELLUM_TEST_MODELS)`;
    if (process.env.VELLUM_REQUIRE_MODELS === '1') throw new Error(`VELLUM_REQUIRE_MODELS=1: ${why}`);
    return why;
  }
  return null;
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Starts a server; resolves once GET /health answers 200. `args` are extra `vellum serve` options.
export async function startServer({ model = 'stories260K.gguf', args = [], env = {} } = {}) {
  const port = await freePort();
  const argv = ['serve', modelPath(model), '--host', '127.0.0.1', '--port', String(port), ...args];
  const child = spawn(vellumBin, argv, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`vellum serve exited with ${child.exitCode} before it was ready:\n${log}`);
    }
    try {
      const res = await fetch(`${base}/health`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`vellum serve did not become healthy within 120 s:\n${log}`);
    }
    await sleep(100);
  }
  return {
    port,
    base,
    child,
    log: () => log,
    // SIGTERM, then the exit status (SIGKILL after `timeoutMs`).
    async stop(timeoutMs = 30_000) {
      if (child.exitCode !== null) return { code: child.exitCode, signal: null };
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

// Parses Prometheus text into {name{labels}: value} with the labels as written.
export async function scrapeMetrics(base) {
  const res = await fetch(`${base}/metrics`);
  const text = await res.text();
  const values = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    const key = line.slice(0, at);
    values[key] = Number(line.slice(at + 1));
  }
  return { text, values, contentType: res.headers.get('content-type') };
}

// The value of a metric by name (labels ignored; the first sample with that name).
export function metric(values, name) {
  for (const [key, value] of Object.entries(values)) {
    if (key === name || key.startsWith(`${name}{`)) return value;
  }
  return undefined;
}

// Waits until the engine holds no requests and no KV blocks; returns the last scrape.
export async function waitForIdle(base, prefix = 'vellum', timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await scrapeMetrics(base);
    const running = metric(m.values, `${prefix}:num_requests_running`);
    const waiting = metric(m.values, `${prefix}:num_requests_waiting`);
    const usage = metric(m.values, `${prefix}:kv_cache_usage_perc`);
    if (running === 0 && waiting === 0 && usage === 0) return m;
    if (Date.now() > deadline) {
      throw new Error(`engine not idle after ${timeoutMs} ms: running=${running} ` +
                      `waiting=${waiting} kv_cache_usage_perc=${usage}`);
    }
    await sleep(100);
  }
}

// `vellum generate` greedy output for comparison with the server.
export function generateCli(model, prompt, maxTokens) {
  const out = execFileSync(vellumBin, ['generate', '--model', modelPath(model), '--prompt', prompt,
    '--max-tokens', String(maxTokens), '--temperature', '0', '--ignore-eos', '--json'],
  { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop());
}

// Random token ids that avoid the special ids 0..2 of the Llama SentencePiece vocabularies.
export function randomIds(rng, n, vocab = 512) {
  return Array.from({ length: n }, () => 3 + Math.floor(rng() * (vocab - 3)));
}

// A small seeded generator (mulberry32) so runs are repeatable.
export function seededRng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
