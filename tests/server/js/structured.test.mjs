// Black-box tests of structured outputs and tool calls with the official `openai` npm package:
// response_format json_schema (and the client's parse helper with a zod schema), json_object,
// vLLM's structured_outputs / guided_* fields, tools with tool_choice required / named / auto
// (a hermes parser), streamed and not, reasoning_content, and 400s for bad constraints.
// The model (stories260K) knows nothing of JSON: every valid output comes from the constraint.
// Run: VELLUM_BIN=build/ci/src/cli/vellum node tests/server/js/structured.test.mjs
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { chatTemplate, skipReason, startServer } from './server.mjs';

const skip = skipReason();
if (skip) {
  console.log(`SKIP: ${skip}`);
  process.exit(77);
}

const MODEL = 'stories';
let server;
let client;

before(async () => {
  server = await startServer({
    args: ['--served-model-name', MODEL, '--max-model-len', '512', '--chat-template', chatTemplate,
      '--max-num-seqs', '16', '--kv-cache-memory', '64MiB', '--enable-auto-tool-choice',
      '--tool-call-parser', 'hermes', '--reasoning-parser', 'qwen3'],
  });
  client = new OpenAI({ apiKey: 'unused', baseURL: `${server.base}/v1`, maxRetries: 0 });
});

after(async () => {
  if (!server) return;
  const { code, signal } = await server.stop();
  assert.equal(signal, null, `server killed by ${signal}:\n${server.log()}`);
  assert.equal(code, 0, `server exited with ${code}:\n${server.log()}`);
});

async function post(path, body) {
  const res = await fetch(`${server.base}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const messages = [{ role: 'user', content: 'Tell me about Lily.' }];

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  mood: z.enum(['happy', 'sad']),
  pets: z.array(z.string().max(8)).max(2),
});

const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 10 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weatherParameters, strict: true } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 6 } }, required: ['zone'] } } },
];

// Budgets that the grammar's shape guarantees, so that "stop" does not depend on what the toy
// model prefers (which differs with the CPU's rounding): a Person in compact JSON is at most 241
// bytes (56 fixed, a 12-character name and two 8-character pets at up to 6 bytes a character,
// a 17-byte integer), every token is at least a byte, and EOS follows.
const compact = { disable_any_whitespace: true };
const personBudget = 300;

describe('response_format', () => {
  it('json_schema through the client parse helper (zod) over several seeds', async () => {
    for (let seed = 0; seed < 4; seed++) {
      const res = await client.chat.completions.parse({
        model: MODEL, messages, seed, temperature: 1, max_completion_tokens: personBudget,
        response_format: zodResponseFormat(Person, 'person'), structured_outputs: compact,
      });
      const choice = res.choices[0];
      assert.equal(choice.finish_reason, 'stop');
      assert.ok(choice.message.parsed, choice.message.content);
      Person.parse(choice.message.parsed);
    }
  });

  it('json_schema streamed: the deltas join into valid JSON', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL, messages, seed: 7, temperature: 1, max_completion_tokens: personBudget, stream: true,
      response_format: { type: 'json_schema', json_schema: { name: 'p', strict: true, schema: zodResponseFormat(Person, 'p').json_schema.schema } },
      structured_outputs: compact,
    });
    let text = '';
    let finish;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'stop');
    Person.parse(JSON.parse(text));
  });

  it('json_object and the structured_outputs / guided_* fields', async () => {
    const object = await client.chat.completions.create({
      model: MODEL, messages, seed: 1, temperature: 1, max_completion_tokens: 300,
      response_format: { type: 'json_object' },
    });
    if (object.choices[0].finish_reason === 'stop') {
      const value = JSON.parse(object.choices[0].message.content);
      assert.equal(typeof value, 'object');
      assert.ok(!Array.isArray(value));
    }
    const choice = await client.chat.completions.create({
      model: MODEL, messages, seed: 2, temperature: 1, max_completion_tokens: 20,
      structured_outputs: { choice: ['yes', 'no', 'maybe'] },
    });
    assert.ok(['yes', 'no', 'maybe'].includes(choice.choices[0].message.content));
    const regex = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', seed: 3, temperature: 1, max_tokens: 30,
      guided_regex: '[A-Z][a-z]{2,8} (ran|sat|sang)\\.',
    });
    assert.match(regex.choices[0].text, /^[A-Z][a-z]{2,8} (ran|sat|sang)\.$/);
    const grammar = await client.completions.create({
      model: MODEL, prompt: 'Count:', seed: 4, temperature: 1, max_tokens: 40,
      guided_grammar: 'root ::= num ("+" num){1,3}\nnum ::= [1-9][0-9]?',
    });
    assert.match(grammar.choices[0].text, /^[1-9][0-9]?(\+[1-9][0-9]?){1,3}$/);
  });

  it('bad schemas, regexes and grammars are 400s naming the problem; pathological ones too', async () => {
    const cases = [
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }, /'uniqueItems'/],
      [{ structured_outputs: { regex: '(a' } }, /missing '\)'/],
      [{ structured_outputs: { regex: 'a{1000000}' } }, /too large/],
      [{ structured_outputs: { grammar: 'root ::= root "a" | "b"' } }, /left-recursive/],
      [{ guided_json: { $ref: '#/$defs/nowhere' } }, /does not resolve/],
      [{ response_format: { type: 'json_schema' } }, /json_schema/],
      [{ structured_outputs: { regex: 'a', choice: ['b'] } }, /only use one kind/],
    ];
    for (const [fields, pattern] of cases) {
      const started = Date.now();
      const res = await post('/v1/chat/completions', { model: MODEL, messages, max_tokens: 5, ...fields });
      assert.equal(res.status, 400, JSON.stringify(res.json));
      assert.match(res.json.error.message, pattern);
      assert.ok(Date.now() - started < 5000);
    }
    // The SDK surfaces them as BadRequestError, streaming or not.
    await assert.rejects(client.chat.completions.create({
      model: MODEL, messages, stream: true, structured_outputs: { regex: '(?<=x)a' },
    }), (e) => e.status === 400 && /lookaround/.test(e.message));
  });
});

describe('tools', () => {
  // The random-ish story model prefers continuing the list of calls to closing it; a logit bias
  // on "]" (applied after the grammar mask, so it only acts where "]" is allowed) ends it sooner.
  let closeBias;
  before(async () => {
    const res = await post('/tokenize', { prompt: 'a]', add_special_tokens: false });
    closeBias = { [res.json.tokens.at(-1)]: 15 };
  });

  function checkCall(call) {
    assert.match(call.id, /^chatcmpl-tool-/);
    assert.equal(call.type, 'function');
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') {
      assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
      assert.equal(typeof args.city, 'string');
    } else {
      assert.equal(call.function.name, 'get_time');
      assert.equal(typeof args.zone, 'string');
    }
  }

  // With parallel_tool_calls false the grammar is one call of get_time: at most 14 whitespace
  // runs of up to 21 bytes ("\n" and 20 indents), 6 string characters of up to 6 bytes and 46
  // bytes of fixed text, 376 bytes in all. Every token is at least a byte, so the reply closes
  // within 377 tokens (the last one EOS) whatever the model prefers: "tool_calls" is what the
  // engine guarantees here, on any CPU's rounding.
  const oneCallBudget = 400;

  it('tool_choice "required", parallel_tool_calls false: one call, always closed', async () => {
    for (let seed = 0; seed < 3; seed++) {
      const res = await client.chat.completions.create({
        model: MODEL, messages, tools: [tools[1]], tool_choice: 'required', seed, temperature: 1,
        max_completion_tokens: oneCallBudget, parallel_tool_calls: false,
      });
      const choice = res.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
      assert.equal(choice.message.tool_calls.length, 1);
      checkCall(choice.message.tool_calls[0]);
    }
  });

  it('the same streamed through the client stream helper', async () => {
    for (let seed = 11; seed < 13; seed++) {
      const runner = client.chat.completions.stream({
        model: MODEL, messages, tools: [tools[1]], tool_choice: 'required', seed, temperature: 1,
        max_completion_tokens: oneCallBudget, parallel_tool_calls: false,
      });
      const final = await runner.finalChatCompletion();
      const choice = final.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.tool_calls.length, 1);
      checkCall(choice.message.tool_calls[0]);
    }
  });

  it('tool_choice "required" with parallel calls: a closed list of valid calls, or "length"', async () => {
    // The list has no upper bound, so whether it closes within the budget is the model's choice
    // (the toy model's, which differs between CPUs' rounding): a closed reply is "tool_calls"
    // with valid calls, an open one is "length" with the unparsed list as content.
    for (let seed = 0; seed < 3; seed++) {
      const res = await client.chat.completions.create({
        model: MODEL, messages, tools, tool_choice: 'required', seed, temperature: 1,
        max_completion_tokens: 400, logit_bias: closeBias,
      });
      const choice = res.choices[0];
      if (choice.finish_reason === 'tool_calls') {
        assert.ok(choice.message.tool_calls.length >= 1);
        choice.message.tool_calls.forEach(checkCall);
      } else {
        assert.equal(choice.finish_reason, 'length', JSON.stringify(choice.message));
        assert.deepEqual(choice.message.tool_calls ?? [], []);
        assert.match(choice.message.content, /^\s*\[\s*\{/);
      }
    }
  });

  it('parallel_tool_calls: false with "auto" is refused (501), a non-boolean is a 400', async () => {
    let res = await post('/v1/chat/completions', { model: MODEL, messages, tools, parallel_tool_calls: false });
    assert.equal(res.status, 501);
    assert.match(res.json.error.message, /parallel_tool_calls/);
    res = await post('/v1/chat/completions', { model: MODEL, messages, tools, parallel_tool_calls: 'no' });
    assert.equal(res.status, 400);
    assert.match(res.json.error.message, /true or false/);
  });

  it('a named function: arguments match its parameters (parse helper with a strict tool)', async () => {
    // The arguments are at most 258 bytes (8 whitespace runs of 21, a 10-character city): the
    // budget of 300 tokens always reaches "stop"; get_time's (131 bytes) fits in 200.
    const res = await client.chat.completions.parse({
      model: MODEL, messages, seed: 5, temperature: 1, max_completion_tokens: 300,
      tools: [zodFunction({ name: 'get_weather', parameters: z.object({ city: z.string().max(10), unit: z.enum(['celsius', 'fahrenheit']) }) })],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    assert.ok(['celsius', 'fahrenheit'].includes(choice.message.tool_calls[0].function.parsed_arguments.unit));
    // Streamed: the first delta names the function, the rest carry the arguments.
    const stream = await client.chat.completions.create({
      model: MODEL, messages, tools, seed: 6, temperature: 1, max_completion_tokens: 200, stream: true,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    let name = '';
    let args = '';
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
    }
    assert.equal(name, 'get_time');
    assert.equal(typeof JSON.parse(args).zone, 'string');
  });

  const forced = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>';

  it('tool_choice "auto" parses hermes <tool_call> blocks out of the reply', async () => {
    // The model cannot write a tool call by itself; a choice constraint makes it.
    const res = await client.chat.completions.create({
      model: MODEL, messages, tools, max_completion_tokens: 300, temperature: 0,
      structured_outputs: { choice: [forced] },
    });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(choice.message.tool_calls[0].function.arguments), { city: 'Paris', unit: 'celsius' });
    assert.ok(!choice.message.content);
    const runner = client.chat.completions.stream({
      model: MODEL, messages, tools, max_completion_tokens: 300, temperature: 0,
      structured_outputs: { choice: ['It is sunny. ' + forced] },
    });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(final.choices[0].message.content, 'It is sunny. ');
    assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
    // Raw chunks: the arguments arrive in pieces as they are generated, before the finish.
    const stream = await client.chat.completions.create({
      model: MODEL, messages, tools, max_completion_tokens: 300, temperature: 0, stream: true,
      structured_outputs: { choice: [forced] },
    });
    let pieces = 0;
    let args = '';
    let finishReason = null;
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) {
        if (call.function?.arguments) {
          assert.equal(finishReason, null);
          pieces += 1;
          args += call.function.arguments;
        }
      }
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    }
    assert.ok(pieces > 1, `the arguments came in ${pieces} piece(s)`);
    assert.deepEqual(JSON.parse(args), { city: 'Paris', unit: 'celsius' });
    assert.equal(finishReason, 'tool_calls');
    // No call in the reply: plain content and "stop".
    const plain = await client.chat.completions.create({
      model: MODEL, messages, tools, max_completion_tokens: 20, temperature: 0,
      structured_outputs: { choice: ['no tools needed'] },
    });
    assert.equal(plain.choices[0].finish_reason, 'stop');
    assert.equal(plain.choices[0].message.content, 'no tools needed');
    assert.deepEqual(plain.choices[0].message.tool_calls ?? [], []);
  });

  it('bad tool requests are 400s', async () => {
    let res = await post('/v1/chat/completions', { model: MODEL, messages, tool_choice: 'required' });
    assert.equal(res.status, 400);
    assert.match(res.json.error.message, /`tools` must be set/);
    res = await post('/v1/chat/completions', {
      model: MODEL, messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } },
    });
    assert.equal(res.status, 400);
    assert.match(res.json.error.message, /Tool 'nope' has not been passed/);
  });
});

describe('reasoning', () => {
  it('--reasoning-parser qwen3 splits <think> into reasoning_content, streamed too', async () => {
    const reply = '<think>Lily is a girl.</think>She likes cats.';
    const res = await client.chat.completions.create({
      model: MODEL, messages, max_completion_tokens: 60, temperature: 0,
      structured_outputs: { choice: [reply] },
    });
    assert.equal(res.choices[0].message.reasoning_content, 'Lily is a girl.');
    assert.equal(res.choices[0].message.content, 'She likes cats.');
    const stream = await client.chat.completions.create({
      model: MODEL, messages, max_completion_tokens: 60, temperature: 0, stream: true,
      structured_outputs: { choice: [reply] },
    });
    let reasoning = '';
    let content = '';
    for await (const chunk of stream) {
      reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
      content += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(reasoning, 'Lily is a girl.');
    assert.equal(content, 'She likes cats.');
  });
});
