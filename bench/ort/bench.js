#!/usr/bin/env node
// bench/ort/bench.js MODEL_DIR... [--runs N] [--warmup N] [--threads N] [--no-spin]
//
// The ONNX Runtime side of bench/run-cpu-vs-ort. For each MODEL_DIR (holding model.onnx
// and test_data_set_0/input_K.pb, output_K.pb) it opens an ORT session on the CPU
// execution provider with intraOpNumThreads N (default 2) and one inter-op thread, feeds
// the test inputs, checks the outputs against output_K.pb, times `runs` calls of
// session.run after `warmup` untimed ones, and prints one JSON line:
//   {"model":..,"ort_version":..,"threads":2,"spin":true,"runs":..,"median_ms":..,"min_ms":..,"max_abs_err":..}
// --no-spin turns off the spin-waiting of ORT's thread pools (session.intra_op.allow_spinning
// and inter_op 0), the counterpart of OMP_WAIT_POLICY=passive on the kiln side.
// The .pb files are TensorProto messages; the reader below decodes just the fields that
// test data uses (dims, data_type, name, raw_data and the typed repeated fields).
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// ---- a minimal protobuf reader (wire types 0, 1, 2, 5) ----

function readVarint(buf, pos) {
  let v = 0n, shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const b = buf[pos++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [v, pos];
    shift += 7n;
  }
}

// Calls fn(field, wire, value) per field; value is a BigInt (varint), a Buffer (length-
// delimited), or a Buffer of 4/8 bytes (fixed32/fixed64).
function eachField(buf, fn) {
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n), wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      fn(field, wire, v);
    } else if (wire === 2) {
      let n;
      [n, pos] = readVarint(buf, pos);
      fn(field, wire, buf.subarray(pos, pos + Number(n)));
      pos += Number(n);
    } else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      fn(field, wire, buf.subarray(pos, pos + n));
      pos += n;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
  }
}

function signed64(v) { return BigInt.asIntN(64, v); }

// ONNX TensorProto.DataType -> [ort type name, typed array constructor, element size]
const DTYPES = {
  1: ['float32', Float32Array, 4], 2: ['uint8', Uint8Array, 1], 3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2], 5: ['int16', Int16Array, 2], 6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8], 9: ['bool', Uint8Array, 1], 11: ['float64', Float64Array, 8],
  12: ['uint32', Uint32Array, 4], 13: ['uint64', BigUint64Array, 8],
};

// TensorProto fields: 1 dims, 2 data_type, 4 float_data, 5 int32_data, 7 int64_data,
// 8 name, 9 raw_data, 10 double_data, 11 uint64_data.
function readTensor(file) {
  const buf = fs.readFileSync(file);
  const dims = [], vals = [];
  let dataType = 0, name = '', raw = null;
  eachField(buf, (f, wire, v) => {
    if (f === 1) {
      if (wire === 0) dims.push(Number(signed64(v)));
      else eachField(wrapPacked(v), (_, __, d) => dims.push(Number(signed64(d))));
    } else if (f === 2) dataType = Number(v);
    else if (f === 8) name = v.toString('utf8');
    else if (f === 9) raw = Buffer.from(v);
    else if (f === 4 || f === 10) {
      const size = f === 4 ? 4 : 8;
      const read = (b, o) => (size === 4 ? b.readFloatLE(o) : b.readDoubleLE(o));
      if (wire === 2) for (let o = 0; o < v.length; o += size) vals.push(read(v, o));
      else vals.push(read(v, 0));
    } else if (f === 5 || f === 7 || f === 11) {
      if (wire === 0) vals.push(v);
      else eachField(wrapPacked(v), (_, __, d) => vals.push(d));
    } else if (f === 13 || f === 14) {
      throw new Error(`${file}: external data is not supported`);
    }
  });
  const dt = DTYPES[dataType];
  if (!dt) throw new Error(`${file}: unsupported data_type ${dataType}`);
  const [type, Ctor, size] = dt;
  const numel = dims.reduce((a, b) => a * b, 1);
  let data;
  if (raw) {
    if (raw.length !== numel * size) throw new Error(`${file}: raw_data is ${raw.length} bytes, want ${numel * size}`);
    const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length);
    data = new Ctor(ab);
  } else {
    if (vals.length !== numel) throw new Error(`${file}: ${vals.length} values, want ${numel}`);
    data = new Ctor(numel);
    for (let i = 0; i < numel; i++) {
      const x = vals[i];
      if (Ctor === BigInt64Array) data[i] = signed64(x);
      else if (Ctor === BigUint64Array) data[i] = BigInt.asUintN(64, x);
      else data[i] = typeof x === 'bigint' ? Number(BigInt.asIntN(32, x)) : x;
    }
  }
  return { name, tensor: new ort.Tensor(type, data, dims) };
}

// A packed repeated varint field is a run of varints without keys: give each a fake key
// (field 1, wire 0) so eachField can walk it.
function wrapPacked(v) {
  const out = [];
  let pos = 0;
  while (pos < v.length) {
    const start = pos;
    [, pos] = readVarint(v, pos);
    out.push(Buffer.from([0x08]), v.subarray(start, pos));
  }
  return Buffer.concat(out);
}

function readSet(dir, prefix) {
  const out = [];
  for (let k = 0; ; k++) {
    const f = path.join(dir, `${prefix}_${k}.pb`);
    if (!fs.existsSync(f)) return out;
    out.push(readTensor(f));
  }
}

function maxAbsErr(got, want) {
  if (got.data.length !== want.data.length) return Infinity;
  let m = 0;
  for (let i = 0; i < got.data.length; i++) {
    const d = Math.abs(Number(got.data[i]) - Number(want.data[i]));
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

async function benchModel(dir, opt) {
  const model = fs.statSync(dir).isDirectory() ? path.join(dir, 'model.onnx') : dir;
  const dataDir = path.join(path.dirname(model), 'test_data_set_0');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opt.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    ...(opt.spin ? {} : { extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } } }),
  });
  const ins = readSet(dataDir, 'input'), refs = readSet(dataDir, 'output');
  if (ins.length !== session.inputNames.length)
    throw new Error(`${model}: ${ins.length} input files, the model has ${session.inputNames.length} inputs`);
  const feeds = {};  // test data is positional
  session.inputNames.forEach((n, i) => { feeds[n] = ins[i].tensor; });
  let err = 0;
  const first = await session.run(feeds);
  session.outputNames.forEach((n, i) => { if (i < refs.length) err = Math.max(err, maxAbsErr(first[n], refs[i].tensor)); });
  for (let i = 0; i < opt.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < opt.runs; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  await session.release();
  return {
    model: path.basename(path.dirname(model)), ort_version: ort.env.versions.node, threads: opt.threads,
    spin: opt.spin, runs: opt.runs, median_ms: +median(times).toFixed(4), min_ms: +Math.min(...times).toFixed(4),
    max_abs_err: err,
  };
}

async function main() {
  const opt = { runs: 50, warmup: 5, threads: 2, spin: true }, dirs = [];
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if ((a === '--runs' || a === '--warmup' || a === '--threads') && i + 1 < argv.length) {
      const v = parseInt(argv[++i], 10);
      if (!(v >= (a === '--warmup' ? 0 : 1))) throw new Error(`bad value for ${a}`);
      opt[a.slice(2)] = v;
    } else if (a === '--no-spin') {
      opt.spin = false;
    } else if (a.startsWith('-')) {
      throw new Error(`usage: bench.js MODEL_DIR... [--runs N] [--warmup N] [--threads N] [--no-spin]`);
    } else dirs.push(a);
  }
  if (!dirs.length) throw new Error('usage: bench.js MODEL_DIR... [--runs N] [--warmup N] [--threads N] [--no-spin]');
  for (const d of dirs) console.log(JSON.stringify(await benchModel(d, opt)));
}

module.exports = { readSet };  // profile.js reads test data the same way

if (require.main === module) main().catch((e) => { console.error(`bench.js: ${e.message}`); process.exit(1); });
