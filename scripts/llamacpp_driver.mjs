// llama.cpp, driven through node-llama-cpp's prebuilt libllama (CPU), for
// same-machine comparisons with rinfer (scripts/bench_llamacpp.sh installs
// node-llama-cpp from the npm registry and runs this).
//   node llamacpp_driver.mjs greedy MODEL.gguf IDS STEPS
//       greedy continuation of the comma-separated prompt ids, one token per
//       decode call; prints {"ids": [...]}
//   node llamacpp_driver.mjs bench MODEL.gguf THREADS PROMPT_LEN GEN_LEN SAMPLES WARMUP MMAP
//       like rinfer bench: prompt of PROMPT_LEN fixed token ids, then GEN_LEN
//       greedy tokens; prints {"ttft_ms", "prefill_tok_s", "decode_tok_s"}
//       as means over SAMPLES runs after WARMUP unmeasured ones.
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

function nodeLlamaCppVersion() {
  const index = new URL(import.meta.resolve("node-llama-cpp"));  // .../node-llama-cpp/dist/index.js
  return JSON.parse(readFileSync(new URL("../package.json", index), "utf8")).version;
}

const [mode, modelPath, ...rest] = process.argv.slice(2);
const threads = mode === "bench" ? Number(rest[0]) : 1;
// maxThreads: node-llama-cpp's default is max(cores, 4), more than this machine has.
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: threads});
const useMmap = mode === "bench" ? rest[5] === "1" : false;
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap});

if (mode === "greedy") {
  const ids = rest[0].split(",").map(Number);
  const steps = Number(rest[1]);
  const ctx = await model.createContext({contextSize: Math.max(512, ids.length + steps + 8), threads: {ideal: 1, min: 1}});
  const seq = ctx.getSequence();
  const out = [];
  // One token at a time, as the reference's own driver did.
  await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, -1));
  let next = ids[ids.length - 1];
  for (let i = 0; i < steps; ++i) {
    const it = seq.evaluate([next], {temperature: 0});
    next = (await it.next()).value;
    await it.return();
    out.push(next);
    if (next === 1) break;  // BOS ends a story (the reference stops there too)
  }
  console.log(JSON.stringify({ids: out}));
} else if (mode === "bench") {
  const [, promptLen, genLen, samples, warmup] = rest.map(Number);
  const ctx = await model.createContext({contextSize: promptLen + genLen + 16, batchSize: Math.min(512, promptLen),
                                         threads: {ideal: threads, min: threads}, sequences: 1});
  const seq = ctx.getSequence();
  const prompt = Array.from({length: promptLen}, (_, i) => 100 + (i * 37) % 1000);
  const res = [];
  for (let s = 0; s < warmup + samples; ++s) {
    await seq.clearHistory();
    const t0 = performance.now();
    let t1 = 0, n = 0;
    for await (const tok of seq.evaluate(prompt, {temperature: 0})) {
      if (++n === 1) t1 = performance.now();
      if (n === genLen) break;
    }
    const t2 = performance.now();
    if (s >= warmup) res.push({ttft: t1 - t0, decode: (genLen - 1) / ((t2 - t1) / 1000)});
  }
  const mean = (f) => res.reduce((a, r) => a + f(r), 0) / res.length;
  const ttft = mean((r) => r.ttft);
  console.log(JSON.stringify({ttft_ms: ttft, prefill_tok_s: promptLen / (ttft / 1000), decode_tok_s: mean((r) => r.decode),
                              threads, mmap: useMmap, samples: res.length, llama_cpp_release: llama.llamaCppRelease.release,
                              node_llama_cpp: nodeLlamaCppVersion()}));
}
await model.dispose();
await llama.dispose();
