// Drives `rinfer serve` with the official `openai` npm client: chat and
// completions, streaming and not. Run by test_openai_node.cpp with
//   OPENAI_NPM_DIR  where `npm install --prefix` put the package
//   RINFER_URL      the server, e.g. http://127.0.0.1:PORT
//   PROMPT, EXPECTED_IDS  a prompt and what `rinfer run --temperature 0` generates (20 tokens)
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(process.env.OPENAI_NPM_DIR + '/');
const OpenAI = require('openai');
const client = new (OpenAI.default ?? OpenAI)({
  baseURL: process.env.RINFER_URL + '/v1',
  apiKey: 'test-key',
  maxRetries: 0,
  timeout: 60_000,
});
const model = 'stories260K';
const prompt = process.env.PROMPT;
const expected = JSON.parse(process.env.EXPECTED_IDS);

// Completions, not streamed: the same tokens as `rinfer run`.
const c = await client.completions.create({
  model, prompt, max_tokens: expected.length, temperature: 0, return_token_ids: true,
});
assert.deepEqual(c.choices[0].token_ids, expected, 'greedy completion differs from rinfer run');
assert.equal(c.usage.completion_tokens, expected.length);
assert.equal(c.object, 'text_completion');

// Completions, streamed: the same text.
let streamed = '';
let finish = null;
const cs = await client.completions.create({ model, prompt, max_tokens: expected.length, temperature: 0, stream: true });
for await (const chunk of cs) {
  streamed += chunk.choices[0]?.text ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
assert.equal(streamed, c.choices[0].text);
assert.equal(finish, c.choices[0].finish_reason);

// Chat, not streamed and streamed (with usage).
const messages = [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'A story about a cat' }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
assert.equal(chat.object, 'chat.completion');
assert.equal(chat.choices[0].message.role, 'assistant');
assert.ok(chat.choices[0].message.content.length > 0);
let content = '';
let usage = null;
const chs = await client.chat.completions.create({
  model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of chs) {
  content += chunk.choices[0]?.delta?.content ?? '';
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(content, chat.choices[0].message.content);
assert.equal(usage.completion_tokens, chat.usage.completion_tokens);

// Errors arrive as the client's typed errors.
await assert.rejects(
  client.completions.create({ model, prompt, max_tokens: 'many' }),
  (e) => e.status === 400 && /max_tokens/.test(e.message),
);
const models = await client.models.list();
assert.equal(models.data[0].id, model);
console.log('openai npm client: all checks passed');
