// Black-box tests of `vellum serve` with the official `openai` npm package: completions and chat,
// streamed and not, n = 2, stop strings, logprobs, usage, seeds, errors, and the other endpoints.
// Run: VELLUM_BIN=build/ci/src/cli/vellum node tests/server/js/api.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';

import {
  chatTemplate, generateCli, referenceCase, scrapeMetrics, skipReason, startServer, waitForIdle,
} from './server.mjs';

const skip = skipReason();
if (skip) {
  console.log(`SKIP: ${skip}`);
  process.exit(77);
}

const KEY = 'test-key-123';
const MODEL = 'stories';
const ONCE = 'Once upon a time';
const reference = referenceCase('stories260K.gguf', ONCE);

let server;
let client;

before(async () => {
  server = await startServer({
    args: ['--api-key', KEY, '--served-model-name', MODEL, '--max-model-len', '256',
      '--chat-template', chatTemplate, '--max-num-seqs', '16', '--kv-cache-memory', '64MiB',
      // An f32 KV cache, as the llama.cpp reference used, so logprobs compare within 1e-3.
      '--kv-cache-dtype', 'f32'],
  });
  client = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0 });
});

after(async () => {
  if (!server) return;
  const { code, signal } = await server.stop();
  assert.equal(signal, null, `server killed by ${signal}:\n${server.log()}`);
  assert.equal(code, 0, `server exited with ${code}:\n${server.log()}`);
});

// Raw HTTP for what the SDK cannot send (malformed JSON, missing keys).
async function post(path, body, { key = KEY, raw = false } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${server.base}${path}`, {
    method: 'POST', headers, body: raw ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, json, text, headers: res.headers };
}

const greedy = { temperature: 0, ignore_eos: true };

describe('completions', () => {
  it('greedy output equals the llama.cpp reference and `vellum generate`', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, return_token_ids: true,
    });
    assert.equal(res.object, 'text_completion');
    assert.match(res.id, /^cmpl-/);
    assert.equal(res.model, MODEL);
    assert.equal(res.choices.length, 1);
    const choice = res.choices[0];
    assert.equal(choice.index, 0);
    assert.equal(choice.finish_reason, 'length');
    assert.deepEqual(choice.token_ids, reference.generated_token_ids);
    assert.equal(choice.text, reference.generated_text);
    assert.deepEqual(res.usage.prompt_tokens, reference.prompt_token_ids.length);
    assert.equal(res.usage.completion_tokens, 48);
    assert.equal(res.usage.total_tokens, reference.prompt_token_ids.length + 48);
    const cli = generateCli('stories260K.gguf', ONCE, 48);
    assert.equal(choice.text, cli.text);
    assert.deepEqual(choice.token_ids, cli.generated_token_ids);
  });

  it('accepts token-id prompts and several prompts (index = prompt * n + i)', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: [reference.prompt_token_ids, [1, 291, 376, 400, 428]], max_tokens: 8,
      n: 2, temperature: 0.8, seed: 5, ignore_eos: true,
    });
    assert.equal(res.choices.length, 4);
    assert.deepEqual(res.choices.map((c) => c.index).sort(), [0, 1, 2, 3]);
    // Greedy with n > 1 is refused, as in vLLM.
    await assert.rejects(client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 2, n: 2, temperature: 0,
    }), (e) => e.status === 400 && e.param === 'n');
    const greedyBatch = await client.completions.create({
      model: MODEL, prompt: [reference.prompt_token_ids, [1, 291, 376, 400, 428]], max_tokens: 8,
      ...greedy,
    });
    const byIndex = Object.fromEntries(greedyBatch.choices.map((c) => [c.index, c.text]));
    assert.ok(reference.generated_text.startsWith(byIndex[0]));
    assert.ok(referenceCase('stories260K.gguf', 'The little dog').generated_text.startsWith(byIndex[1]));
    assert.equal(res.usage.prompt_tokens, 10);
    assert.equal(res.usage.completion_tokens, 32);
  });

  it('streams the same text, with finish_reason last and usage at the end', async () => {
    const stream = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const reasons = [];
    let usage = null;
    let chunksAfterUsage = 0;
    for await (const chunk of stream) {
      if (usage) chunksAfterUsage += 1;
      assert.equal(chunk.object, 'text_completion');
      if (chunk.choices.length === 0) {
        usage = chunk.usage;
        continue;
      }
      assert.equal(chunk.usage ?? null, null);
      for (const c of chunk.choices) {
        text += c.text;
        if (c.finish_reason) reasons.push(c.finish_reason);
      }
    }
    assert.equal(text, reference.generated_text);
    assert.deepEqual(reasons, ['length']);
    assert.ok(usage, 'no usage chunk');
    assert.equal(usage.prompt_tokens, 5);
    assert.equal(usage.completion_tokens, 48);
    assert.equal(usage.total_tokens, 53);
    assert.equal(chunksAfterUsage, 0);
  });

  it('continuous_usage_stats puts cumulative usage on every chunk', async () => {
    const stream = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 12, ...greedy, stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    let last = 0;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      assert.ok(chunk.usage, 'chunk without usage');
      assert.equal(chunk.usage.prompt_tokens, 5);
      assert.ok(chunk.usage.completion_tokens >= last);
      last = chunk.usage.completion_tokens;
    }
    assert.ok(chunks > 2);
    assert.equal(last, 12);
  });

  it('stream_options: {} gives no usage anywhere', async () => {
    const stream = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 4, ...greedy, stream: true, stream_options: {},
    });
    for await (const chunk of stream) {
      assert.ok(chunk.choices.length > 0);
      assert.equal(chunk.usage ?? null, null);
    }
  });

  it('stop strings cut the text; include_stop_str_in_output keeps them', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, stop: ['Lily'],
    });
    const cut = reference.generated_text.indexOf('Lily');
    assert.ok(cut > 0);
    assert.equal(res.choices[0].text, reference.generated_text.slice(0, cut));
    assert.equal(res.choices[0].finish_reason, 'stop');
    assert.equal(res.choices[0].stop_reason, 'Lily');

    const kept = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, stop: 'Lily',
      include_stop_str_in_output: true,
    });
    assert.equal(kept.choices[0].text, reference.generated_text.slice(0, cut + 4));

    // Streamed, the held-back tail never leaks the stop string.
    const stream = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, stop: ['Lily'], stream: true,
    });
    let text = '';
    for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
    assert.equal(text, reference.generated_text.slice(0, cut));
  });

  it('stop_token_ids end the request with stop_reason = the id', async () => {
    const stopId = reference.generated_token_ids[5];
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 48, ...greedy, stop_token_ids: [stopId],
      return_token_ids: true,
    });
    const at = reference.generated_token_ids.indexOf(stopId);
    assert.equal(res.choices[0].finish_reason, 'stop');
    assert.equal(res.choices[0].stop_reason, stopId);
    assert.equal(res.usage.completion_tokens, at + 1);
  });

  it('logprobs match the reference top-5 and have the OpenAI shape', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 6, ...greedy, logprobs: 3,
    });
    const lp = res.choices[0].logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.equal(lp.token_logprobs.length, 6);
    assert.equal(lp.top_logprobs.length, 6);
    assert.equal(lp.text_offset.length, 6);
    for (let i = 0; i < 6; i += 1) {
      assert.ok(Math.abs(lp.token_logprobs[i] - reference.top5[i][0][1]) < 1e-3,
        `step ${i}: ${lp.token_logprobs[i]} vs ${reference.top5[i][0][1]}`);
      const top = Object.values(lp.top_logprobs[i]).sort((a, b) => b - a);
      assert.ok(top.length >= 3);
      for (let k = 0; k < 3; k += 1) {
        assert.ok(Math.abs(top[k] - reference.top5[i][k][1]) < 1e-3);
      }
      if (i > 0) {
        assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length);
      }
    }
  });

  it('echo with prompt logprobs starts with a null entry', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 2, ...greedy, echo: true, logprobs: 1,
    });
    const c = res.choices[0];
    assert.ok(c.text.startsWith(ONCE));
    assert.equal(c.logprobs.token_logprobs[0], null);
    assert.equal(c.logprobs.token_logprobs.length, 5 + 2);
    // A token-id prompt is echoed as the tokenizer decodes it, special tokens kept (vLLM's
    // renderer): the BOS the text prompt got from tokenization shows.
    const ids = await client.completions.create({
      model: MODEL, prompt: reference.prompt_token_ids, max_tokens: 2, ...greedy, echo: true,
    });
    assert.ok(ids.choices[0].text.startsWith('<s>'), ids.choices[0].text);
    assert.ok(ids.choices[0].text.endsWith(c.text), ids.choices[0].text);
  });

  it('seeded sampling is reproducible; n = 2 gives two choices', async () => {
    const params = { model: MODEL, prompt: ONCE, max_tokens: 24, temperature: 1.0, seed: 1234, n: 2 };
    const a = await client.completions.create(params);
    const b = await client.completions.create(params);
    assert.equal(a.choices.length, 2);
    assert.deepEqual(a.choices.map((c) => c.index).sort(), [0, 1]);
    const texts = (r) => r.choices.sort((x, y) => x.index - y.index).map((c) => c.text);
    assert.deepEqual(texts(a), texts(b));
    assert.notEqual(texts(a)[0], texts(a)[1]);  // children are seeded seed + i
    const c = await client.completions.create({ ...params, seed: 4321 });
    assert.notDeepEqual(texts(c), texts(a));
  });

  it('reports cached prompt tokens on a repeated long prompt', async () => {
    // Longer than one KV block (128 tokens by default): only full blocks are cached.
    const prompt = Array.from({ length: 140 }, (_, i) => 3 + ((i * 37) % 500));
    const first = await client.completions.create({ model: MODEL, prompt, max_tokens: 2, ...greedy });
    const second = await client.completions.create({ model: MODEL, prompt, max_tokens: 2, ...greedy });
    assert.equal(typeof first.usage.prompt_tokens_details?.cached_tokens, 'number');
    assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 128,
      JSON.stringify(second.usage));
    // cache_salt keeps tenants apart: a new salt misses, the same salt hits.
    const saltA = await client.completions.create({
      model: MODEL, prompt, max_tokens: 2, ...greedy, cache_salt: 'tenant-a',
    });
    assert.equal(saltA.usage.prompt_tokens_details.cached_tokens, 0);
    const saltA2 = await client.completions.create({
      model: MODEL, prompt, max_tokens: 2, ...greedy, cache_salt: 'tenant-a',
    });
    assert.ok(saltA2.usage.prompt_tokens_details.cached_tokens >= 128);
    const saltB = await client.completions.create({
      model: MODEL, prompt, max_tokens: 2, ...greedy, cache_salt: 'tenant-b',
    });
    assert.equal(saltB.usage.prompt_tokens_details.cached_tokens, 0);
  });

  it('accepts the vLLM extras', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 10, temperature: 0.8, top_k: 5, min_p: 0.05,
      repetition_penalty: 1.2, min_tokens: 10, priority: 0, cache_salt: 'tenant-a', seed: 3,
      presence_penalty: 0.5, frequency_penalty: 0.5,
    });
    assert.equal(res.usage.completion_tokens, 10);
  });

  it('max_tokens = 0 with echo returns the prompt only', async () => {
    const res = await client.completions.create({
      model: MODEL, prompt: ONCE, max_tokens: 0, echo: true, ...greedy,
    });
    assert.equal(res.choices[0].text, ONCE);
  });
});

describe('chat completions', () => {
  const messages = [
    { role: 'system', content: 'A story.' },
    { role: 'user', content: 'Tell me about Lily.' },
  ];

  it('answers through the chat template', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages, max_completion_tokens: 16, ...greedy,
    });
    assert.equal(res.object, 'chat.completion');
    assert.match(res.id, /^chatcmpl-/);
    const choice = res.choices[0];
    assert.equal(choice.message.role, 'assistant');
    assert.equal(typeof choice.message.content, 'string');
    assert.ok(choice.message.content.length > 0);
    assert.equal(choice.finish_reason, 'length');
    assert.equal(res.usage.completion_tokens, 16);
    // The same text through the completions endpoint with the rendered prompt's tokens.
    const tok = await post('/tokenize', { model: MODEL, messages });
    assert.equal(tok.status, 200, tok.text);
    const plain = await client.completions.create({
      model: MODEL, prompt: tok.json.tokens, max_tokens: 16, ...greedy,
    });
    assert.equal(plain.choices[0].text, choice.message.content);
  });

  it('max_completion_tokens wins over max_tokens', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 3, max_completion_tokens: 5, ...greedy,
    });
    assert.equal(res.usage.completion_tokens, 5);
  });

  it('streams a role chunk, content deltas, finish_reason and usage', async () => {
    const full = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 20, ...greedy,
    });
    const stream = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 20, ...greedy, stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(chunks[0].object, 'chat.completion.chunk');
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    const content = chunks.flatMap((c) => c.choices).map((c) => c.delta?.content ?? '').join('');
    assert.equal(content, full.choices[0].message.content);
    const finishes = chunks.flatMap((c) => c.choices).filter((c) => c.finish_reason);
    assert.equal(finishes.length, 1);
    assert.equal(finishes[0].finish_reason, 'length');
    const last = chunks[chunks.length - 1];
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 20);
  });

  it('n = 2 with logprobs and top_logprobs', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 5, temperature: 0.9, seed: 11, n: 2, logprobs: true,
      top_logprobs: 2,
    });
    assert.equal(res.choices.length, 2);
    for (const choice of res.choices) {
      const content = choice.logprobs.content;
      assert.equal(content.length, 5);
      for (const entry of content) {
        assert.equal(typeof entry.token, 'string');
        assert.ok(entry.logprob <= 0);
        assert.ok(Array.isArray(entry.bytes));
        // vLLM lists the sampled token first, then the most likely ones.
        assert.equal(entry.top_logprobs.length, 2);
        assert.equal(entry.top_logprobs[0].token, entry.token);
      }
    }
  });

  it('top_logprobs without logprobs is a 400', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages, max_tokens: 2, top_logprobs: 2 }),
      (e) => e.status === 400);
  });
});

describe('errors', () => {
  it('a missing or wrong API key is 401 {"error":"Unauthorized"}', async () => {
    const wrong = new OpenAI({ apiKey: 'nope', baseURL: `${server.base}/v1`, maxRetries: 0 });
    await assert.rejects(wrong.completions.create({ model: MODEL, prompt: 'x', max_tokens: 1 }),
      (e) => e.status === 401);
    const res = await post('/v1/completions', { prompt: 'x' }, { key: null });
    assert.equal(res.status, 401, res.text);
    assert.deepEqual(res.json, { error: 'Unauthorized' });
    const models = await fetch(`${server.base}/v1/models`, { headers: { authorization: 'Bearer bad' } });
    assert.equal(models.status, 401);
    // Not guarded: health, metrics, tokenize, version.
    assert.equal((await fetch(`${server.base}/health`)).status, 200);
    assert.equal((await fetch(`${server.base}/version`)).status, 200);
    assert.equal((await fetch(`${server.base}/metrics`)).status, 200);
    assert.equal((await post('/tokenize', { prompt: 'hi' }, { key: null })).status, 200);
  });

  it('tool_choice "auto" without --enable-auto-tool-choice is vLLM\'s 400', async () => {
    const res = await post('/v1/chat/completions', {
      model: MODEL, messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.message,
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
  });

  it('an unknown model is 404 NotFoundError with param "model"', async () => {
    const res = await post('/v1/completions', { model: 'gpt-17', prompt: 'x', max_tokens: 1 });
    assert.equal(res.status, 404, res.text);
    assert.equal(res.json.error.type, 'NotFoundError');
    assert.equal(res.json.error.param, 'model');
    assert.equal(res.json.error.code, 404);
    assert.equal(res.json.error.message, 'The model `gpt-17` does not exist.');
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-17', messages: [{ role: 'user', content: 'x' }] }),
      (e) => e.status === 404);
  });

  it('invalid parameters are 400 BadRequestError naming the parameter', async () => {
    const cases = [
      [{ temperature: -1 }, 'temperature'],
      [{ top_p: 0 }, 'top_p'],
      [{ n: 0 }, 'n'],
      [{ logprobs: 21 }, 'logprobs'],
      [{ max_tokens: -3 }, 'max_tokens'],
      [{ repetition_penalty: 0 }, 'repetition_penalty'],
    ];
    for (const [fields, param] of cases) {
      const res = await post('/v1/completions', { model: MODEL, prompt: ONCE, max_tokens: 2, ...fields });
      assert.equal(res.status, 400, `${JSON.stringify(fields)}: ${res.text}`);
      assert.equal(res.json.error.type, 'BadRequestError', res.text);
      assert.equal(res.json.error.param, param, res.text);
      assert.equal(res.json.error.code, 400);
      assert.equal(typeof res.json.error.message, 'string');
    }
    // The server keeps working.
    const ok = await client.completions.create({ model: MODEL, prompt: ONCE, max_tokens: 2 });
    assert.equal(ok.choices.length, 1);
  });

  it('stream_options without stream is a 400', async () => {
    const res = await post('/v1/completions', {
      model: MODEL, prompt: ONCE, max_tokens: 2, stream_options: { include_usage: true },
    });
    assert.equal(res.status, 400);
    assert.match(res.json.error.message, /Stream options can only be defined when `stream=True`/);
  });

  it('malformed JSON is a 400 with an OpenAI-shaped body', async () => {
    const res = await post('/v1/completions', '{"model": "stories", "prompt": ', { raw: true });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 400);
    assert.equal(typeof res.json.error.message, 'string');
    const wrongType = await post('/v1/completions', { model: MODEL, prompt: ONCE, max_tokens: 'ten' });
    assert.equal(wrongType.status, 400);
    const noPrompt = await post('/v1/completions', { model: MODEL });
    assert.equal(noPrompt.status, 400);
    const noMessages = await post('/v1/chat/completions', { model: MODEL });
    assert.equal(noMessages.status, 400);
  });

  it('a prompt longer than the context is a 400', async () => {
    const prompt = Array.from({ length: 300 }, (_, i) => 3 + (i % 400));
    await assert.rejects(client.completions.create({ model: MODEL, prompt, max_tokens: 4 }),
      (e) => e.status === 400 && /maximum/.test(e.message));
    const res = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 4, stream: true });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.type, 'BadRequestError');
  });

  it('an oversized body is a 413', async () => {
    const huge = JSON.stringify({ model: MODEL, prompt: 'a'.repeat(48 << 20) });
    const res = await post('/v1/completions', huge, { raw: true });
    assert.equal(res.status, 413);
  });

  it('unknown paths are 404', async () => {
    const res = await fetch(`${server.base}/v1/nothing-here`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 404);
  });
});

describe('other endpoints', () => {
  it('GET /v1/models lists the served model', async () => {
    const list = await client.models.list();
    const models = [];
    for await (const m of list) models.push(m);
    assert.equal(models.length, 1);
    assert.equal(models[0].id, MODEL);
    assert.equal(models[0].object, 'model');
    assert.ok(['vllm', 'vellum'].includes(models[0].owned_by), models[0].owned_by);
    assert.equal(models[0].max_model_len, 256);
  });

  it('tokenize and detokenize round-trip', async () => {
    const tok = await post('/tokenize', { prompt: ONCE, return_token_strs: true });
    assert.equal(tok.status, 200);
    assert.deepEqual(tok.json.tokens, reference.prompt_token_ids);
    assert.equal(tok.json.count, 5);
    assert.equal(tok.json.max_model_len, 256);
    assert.equal(tok.json.token_strs.length, 5);
    const noBos = await post('/tokenize', { prompt: ONCE, add_special_tokens: false });
    assert.deepEqual(noBos.json.tokens, reference.prompt_token_ids.slice(1));
    const detok = await post('/detokenize', { tokens: reference.generated_token_ids });
    assert.equal(detok.status, 200);
    assert.equal(detok.json.prompt, reference.generated_text);
    const bad = await post('/detokenize', { tokens: [-1] });
    assert.equal(bad.status, 400);
  });

  it('version, health and metrics', async () => {
    const version = await (await fetch(`${server.base}/version`)).json();
    assert.equal(typeof version.version, 'string');
    const health = await fetch(`${server.base}/health`);
    assert.equal(health.status, 200);
    assert.equal(await health.text(), '');
    const m = await waitForIdle(server.base);
    assert.match(m.contentType, /^text\/plain; version=0\.0\.4/);
    assert.match(m.text, /# TYPE vellum:e2e_request_latency_seconds histogram/);
    assert.match(m.text, /vellum:request_success_total\{[^}]*finished_reason="length"[^}]*\} [1-9]/);
    assert.match(m.text, /vellum:generation_tokens_total\{[^}]*\} [1-9]/);
  });
});
