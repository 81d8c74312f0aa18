// Many concurrent greedy requests to `rinfer serve` through the official
// `openai` npm client, streamed and not: each must generate exactly what
// `rinfer run --temperature 0` does. Run by test_server_parallel.cpp with
//   OPENAI_NPM_DIR  where `npm install --prefix` put the package
//   RINFER_URL      the server, e.g. http://127.0.0.1:PORT
//   CASES           JSON [{prompt, ids}]: the ids `rinfer run` generates for each prompt
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

const require = createRequire(process.env.OPENAI_NPM_DIR + '/');
const OpenAI = require('openai');
const client = new (OpenAI.default ?? OpenAI)({
  baseURL: process.env.RINFER_URL + '/v1',
  apiKey: 'test-key',
  maxRetries: 0,
  timeout: 120_000,
});
const model = 'm';
const cases = JSON.parse(process.env.CASES);

// All at once, not streamed: the token ids.
const plain = await Promise.all(cases.map((c) => client.completions.create({
  model, prompt: c.prompt, max_tokens: c.ids.length, temperature: 0, return_token_ids: true,
})));
plain.forEach((r, i) => assert.deepEqual(r.choices[0].token_ids, cases[i].ids, `request ${i}: "${cases[i].prompt}"`));

// All at once, streamed: the same text as each one not streamed.
const streamed = await Promise.all(cases.map(async (c) => {
  let text = '';
  const s = await client.completions.create({ model, prompt: c.prompt, max_tokens: c.ids.length, temperature: 0, stream: true });
  for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
  return text;
}));
streamed.forEach((t, i) => assert.equal(t, plain[i].choices[0].text, `streamed request ${i}: "${cases[i].prompt}"`));
console.log(`all checks passed (${cases.length} requests twice)`);
