#!/usr/bin/env node
// bench/ort/profile.js MODEL_DIR [--runs N] [--threads N]
//
// ONNX Runtime's own per-node times for one model (the CPU execution provider, the session
// options of bench.js): runs the model's test inputs `runs` times with ORT's profiler on and
// prints, per node of the optimised graph, its op type and the median of its kernel times in
// microseconds, in execution order, then their sum. Beside `kiln plan` and the cpu kernel
// harness it says which of ORT's kernels a kiln kernel is up against.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// The input tensors of test_data_set_0, read by bench.js's reader.
const { readSet } = require('./bench.js');

async function main() {
  const argv = process.argv.slice(2);
  const opt = { runs: 200, threads: 2 };
  let dir = null;
  for (let i = 0; i < argv.length; i++) {
    if ((argv[i] === '--runs' || argv[i] === '--threads') && i + 1 < argv.length) opt[argv[i].slice(2)] = parseInt(argv[++i], 10);
    else dir = argv[i];
  }
  if (!dir) throw new Error('usage: profile.js MODEL_DIR [--runs N] [--threads N]');
  const model = path.join(dir, 'model.onnx');
  const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ort-prof-')), 'p');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: opt.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: prefix,
  });
  const ins = readSet(path.join(dir, 'test_data_set_0'), 'input');
  const feeds = {};
  session.inputNames.forEach((n, i) => { feeds[n] = ins[i].tensor; });
  for (let i = 0; i < opt.runs; i++) await session.run(feeds);
  session.endProfiling();
  await session.release();
  const file = fs.readdirSync(path.dirname(prefix)).map(f => path.join(path.dirname(prefix), f))[0];
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  const nodes = new Map();  // name -> { op, times }, in first-seen order
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes.has(name)) nodes.set(name, { op: e.args && e.args.op_name, times: [] });
    nodes.get(name).times.push(e.dur);
  }
  let sum = 0;
  for (const [name, n] of nodes) {
    const m = median(n.times);
    sum += m;
    console.log(`${m.toFixed(1).padStart(8)} us  ${String(n.op).padEnd(22)} ${name}`);
  }
  console.log(`${sum.toFixed(1).padStart(8)} us  sum of node medians (${opt.runs} runs, ${opt.threads} threads)`);
}

main().catch(e => { console.error(e.message || e); process.exit(1); });
