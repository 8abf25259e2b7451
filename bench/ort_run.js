#!/usr/bin/env node
// ort_run.js: the ONNX Runtime side of the real-model comparison.
//
//   node bench/ort_run.js MODEL.onnx --input NAME=FILE.pb ... [--output-dir DIR]
//        [--threads T] [--concurrency C] [--iterations N] [--node-modules DIR]
//        [--cold] [--all-runs]
//
// Inputs and outputs are ONNX TensorProto files, the same format orrery-run
// reads and writes (outputs land as DIR/<name>.pb, '/' in names -> '_').
// With --iterations N: a warm-up (as orrery-run: max(1, min(N/10, 10)) runs),
// then N timed session.run() calls spread over C concurrent callers (as
// orrery-run --bench N --threads C spreads N runs over C threads; each caller
// is a worker thread with its own session); prints one JSON line with
// p50/p99/min/mean per run and throughput (with --all-runs also runs_ms,
// every timed run in order, so a caller can pool several invocations).
// The session uses intraOpNumThreads=T, interOpNumThreads=1, sequential
// execution and all graph optimizations (ORT's defaults for a served model).
// With --cold: times the session creation and the first run (a cold start,
// issue 7) and prints them as one JSON line (create_ms, first_run_ms,
// total_ms) before anything else.
// onnxruntime-node is loaded from --node-modules, $ORRERY_ORT_NODE_MODULES, or
// the normal require() path (scripts/bench-deps installs it and prints the dir).
'use strict';

const fs = require('fs');
const path = require('path');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

const USAGE =
  'usage: node ort_run.js MODEL.onnx --input NAME=FILE.pb ... [--output-dir DIR]\n' +
  '       [--threads T] [--concurrency C] [--iterations N] [--node-modules DIR] [--cold]\n' +
  '       [--all-runs]\n';

function fail(msg, code) {
  process.stderr.write(`ort_run: ${msg}\n`);
  process.exit(code);
}

function parseArgs(argv) {
  const args = {
    model: '', inputs: [], outputDir: '', threads: 1, concurrency: 1, iterations: 0, nodeModules: '', cold: false,
  };
  const positiveInt = (flag, v) => {
    if (!/^[0-9]+$/.test(v || '') || Number(v) < 1) fail(`${flag} needs a positive integer\n${USAGE}`, 2);
    return Number(v);
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--input') {
      const v = argv[++i] || '';
      const eq = v.indexOf('=');
      if (eq <= 0 || eq + 1 === v.length) fail(`--input needs NAME=FILE.pb\n${USAGE}`, 2);
      args.inputs.push([v.slice(0, eq), v.slice(eq + 1)]);
    } else if (a === '--output-dir') {
      args.outputDir = argv[++i] || fail(`--output-dir needs a directory\n${USAGE}`, 2);
    } else if (a === '--threads') {
      args.threads = positiveInt(a, argv[++i]);
    } else if (a === '--concurrency') {
      args.concurrency = positiveInt(a, argv[++i]);
    } else if (a === '--iterations') {
      args.iterations = positiveInt(a, argv[++i]);
    } else if (a === '--cold') {
      args.cold = true;
    } else if (a === '--all-runs') {
      args.allRuns = true;
    } else if (a === '--node-modules') {
      args.nodeModules = argv[++i] || fail(`--node-modules needs a directory\n${USAGE}`, 2);
    } else if (a.startsWith('-')) {
      fail(`unknown option '${a}'\n${USAGE}`, 2);
    } else if (!args.model) {
      args.model = a;
    } else {
      fail(`unexpected argument '${a}'\n${USAGE}`, 2);
    }
  }
  if (!args.model) fail(`missing MODEL.onnx\n${USAGE}`, 2);
  if (!args.outputDir && !args.iterations && !args.cold) {
    fail(`give --output-dir DIR, --iterations N and/or --cold\n${USAGE}`, 2);
  }
  return args;
}

// --- Minimal TensorProto codec (fields: dims=1, data_type=2, float_data=4,
// int32_data=5, int64_data=7, name=8, raw_data=9, double_data=10). ---

// ONNX TensorProto.DataType -> [ort type name, TypedArray, element bytes]
const DTYPES = {
  1: ['float32', Float32Array, 4],
  2: ['uint8', Uint8Array, 1],
  3: ['int8', Int8Array, 1],
  6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8],
  9: ['bool', Uint8Array, 1],
  11: ['float64', Float64Array, 8],
};
const DTYPE_BY_ORT = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v[0], Number(k)]));

class Reader {
  constructor(buf) { this.buf = buf; this.pos = 0; }
  done() { return this.pos >= this.buf.length; }
  varint() {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw new Error('truncated varint');
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return result;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  }
  bytes(n) {
    if (this.pos + n > this.buf.length) throw new Error('truncated field');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

function readTensorProto(buf) {
  const r = new Reader(buf);
  const t = { dims: [], dataType: 0, name: '', raw: null, floats: [], int32s: [], int64s: [], doubles: [] };
  // Repeated scalar fields may be packed (wire type 2) or not; accept both.
  const repeated = (wire, scalar, sink) => {
    if (wire !== 2) { sink.push(scalar(r)); return; }
    const sub = new Reader(r.bytes(Number(r.varint())));
    while (!sub.done()) sink.push(scalar(sub));
  };
  const f32 = (rd) => rd.bytes(4).readFloatLE(0);
  const f64 = (rd) => rd.bytes(8).readDoubleLE(0);
  const svar = (rd) => BigInt.asIntN(64, rd.varint());
  while (!r.done()) {
    const key = Number(r.varint());
    const field = key >>> 3;
    const wire = key & 7;
    if (field === 1) repeated(wire, svar, t.dims);
    else if (field === 2 && wire === 0) t.dataType = Number(r.varint());
    else if (field === 4) repeated(wire, f32, t.floats);
    else if (field === 5) repeated(wire, svar, t.int32s);
    else if (field === 7) repeated(wire, svar, t.int64s);
    else if (field === 8 && wire === 2) t.name = r.bytes(Number(r.varint())).toString('utf8');
    else if (field === 9 && wire === 2) t.raw = r.bytes(Number(r.varint()));
    else if (field === 10) repeated(wire, f64, t.doubles);
    else if (wire === 0) r.varint();
    else if (wire === 1) r.bytes(8);
    else if (wire === 2) r.bytes(Number(r.varint()));
    else if (wire === 5) r.bytes(4);
    else throw new Error(`unsupported wire type ${wire}`);
  }
  const dt = DTYPES[t.dataType];
  if (!dt) throw new Error(`unsupported TensorProto data_type ${t.dataType}`);
  const [type, Arr, size] = dt;
  const dims = t.dims.map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw) {
    if (t.raw.length !== count * size) throw new Error(`raw_data has ${t.raw.length} bytes, want ${count * size}`);
    // Copy: the subarray is not necessarily aligned for the typed view.
    data = new Arr(count);
    Buffer.from(data.buffer).set(t.raw);
  } else {
    const src = type === 'float32' ? t.floats : type === 'float64' ? t.doubles
      : type === 'int64' ? t.int64s : t.int32s.map(Number);
    if (src.length !== count) throw new Error(`typed data has ${src.length} values, want ${count}`);
    data = Arr.from(src);
  }
  return { name: t.name, type, dims, data };
}

function varintBytes(v) {
  let x = BigInt.asUintN(64, BigInt(v));
  const out = [];
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x) b |= 0x80;
    out.push(b);
  } while (x);
  return Buffer.from(out);
}

function lengthDelimited(field, bytes) {
  return Buffer.concat([varintBytes((field << 3) | 2), varintBytes(bytes.length), bytes]);
}

function writeTensorProto(name, tensor) {
  const dataType = DTYPE_BY_ORT[tensor.type];
  if (!dataType) throw new Error(`output '${name}': unsupported type ${tensor.type}`);
  const dims = Buffer.concat(tensor.dims.map(varintBytes));
  const d = tensor.data;
  return Buffer.concat([
    lengthDelimited(1, dims),
    varintBytes((2 << 3) | 0), varintBytes(dataType),
    lengthDelimited(8, Buffer.from(name, 'utf8')),
    lengthDelimited(9, Buffer.from(d.buffer, d.byteOffset, d.byteLength)),
  ]);
}

function loadOrt(nodeModules) {
  const dir = nodeModules || process.env.ORRERY_ORT_NODE_MODULES || '';
  try {
    return require(dir ? path.join(path.resolve(dir), 'onnxruntime-node') : 'onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node (${e.message}); run scripts/bench-deps and pass ` +
         '--node-modules DIR or set ORRERY_ORT_NODE_MODULES', 1);
  }
  return null;
}

function percentile(sorted, p) {
  // Nearest rank, as orrery-run.
  const rank = Math.min(Math.max(Math.ceil((p / 100) * sorted.length), 1), sorted.length);
  return sorted[rank - 1];
}

async function openSession(ort, args) {
  const session = await ort.InferenceSession.create(args.model, {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const [name, file] of args.inputs) {
    let t;
    try {
      t = readTensorProto(fs.readFileSync(file));
    } catch (e) {
      throw new Error(`input '${name}' (${file}): ${e.message}`);
    }
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  return { session, feeds };
}

async function timedRuns(session, feeds, count) {
  const ms = [];
  for (let i = 0; i < count; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return ms;
}

// One concurrent caller: onnxruntime-node's session.run() blocks the JS thread
// it is called on, so concurrent callers need threads of their own. Each
// worker opens its own session (ORT sessions cannot cross threads), warms up,
// reports ready, and starts its timed runs on 'go' so the callers overlap.
async function workerMain() {
  const { args, count, warmup } = workerData;
  const ort = loadOrt(args.nodeModules);
  const { session, feeds } = await openSession(ort, args);
  await timedRuns(session, feeds, warmup);
  await new Promise((resolve) => {
    parentPort.once('message', resolve);
    parentPort.postMessage({ ready: true });
  });
  parentPort.postMessage({ ms: await timedRuns(session, feeds, count) });
}

async function concurrentRuns(args, n, callers, warmup) {
  const workers = Array.from({ length: callers }, (_, c) => new Worker(__filename, {
    workerData: { args, warmup, count: Math.floor(n / callers) + (c < n % callers ? 1 : 0) },
  }));
  const next = (w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await Promise.all(workers.map(next));
  const start = process.hrtime.bigint();
  const results = workers.map(next);
  for (const w of workers) w.postMessage('go');
  const done = await Promise.all(results);
  const wallS = Number(process.hrtime.bigint() - start) / 1e9;
  await Promise.all(workers.map((w) => w.terminate()));
  return { ms: done.flatMap((d) => d.ms), wallS };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt(args.nodeModules);
  let opened;
  const t0 = process.hrtime.bigint();
  try {
    opened = await openSession(ort, args);
  } catch (e) {
    fail(e.message, 1);
  }
  const { session, feeds } = opened;
  if (args.cold) {
    const t1 = process.hrtime.bigint();
    await session.run(feeds);
    const t2 = process.hrtime.bigint();
    const ms = (a, b) => Number((Number(b - a) / 1e6).toFixed(3));
    process.stdout.write(JSON.stringify({
      model: args.model, threads: args.threads, create_ms: ms(t0, t1), first_run_ms: ms(t1, t2), total_ms: ms(t0, t2),
    }) + '\n');
  }

  if (args.outputDir) {
    const outs = await session.run(feeds);
    fs.mkdirSync(args.outputDir, { recursive: true });
    for (const name of session.outputNames) {
      const file = path.join(args.outputDir, name.replace(/\//g, '_') + '.pb');
      fs.writeFileSync(file, writeTensorProto(name, outs[name]));
      process.stdout.write(`${name}: ${outs[name].type} [${outs[name].dims.join(',')}] -> ${file}\n`);
    }
  }

  if (args.iterations) {
    const n = args.iterations;
    const warmup = Math.max(1, Math.min(Math.floor(n / 10), 10));
    const callers = Math.min(args.concurrency, n);
    let ms;
    let wallS;
    if (callers === 1) {
      await timedRuns(session, feeds, warmup);
      const start = process.hrtime.bigint();
      ms = await timedRuns(session, feeds, n);
      wallS = Number(process.hrtime.bigint() - start) / 1e9;
    } else {
      ({ ms, wallS } = await concurrentRuns(args, n, callers, warmup));
    }
    const sorted = [...ms].sort((a, b) => a - b);
    const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
    const r4 = (v) => Number(v.toFixed(4));
    process.stdout.write(JSON.stringify({
      model: args.model, iterations: n, threads: args.threads, concurrency: callers,
      ort_version: ort.env.versions?.common || '',
      p50_ms: r4(percentile(sorted, 50)), p99_ms: r4(percentile(sorted, 99)),
      min_ms: r4(sorted[0]), mean_ms: r4(mean), throughput_per_s: Number((n / wallS).toFixed(2)),
      ...(args.allRuns ? { runs_ms: ms.map(r4) } : {}),
    }) + '\n');
  }
}

if (isMainThread) {
  main().catch((e) => fail(e && e.stack ? e.stack : String(e), 1));
} else {
  workerMain().catch((e) => {
    throw e;
  });
}
