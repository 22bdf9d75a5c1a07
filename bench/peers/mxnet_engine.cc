// The Apache MXNet 1.9.1 peer of `enginetop bench engine`: the same five engine benchmarks,
// the same definitions, run on MXNet's own dependency engine (ThreadedEnginePerDevice,
// T CPU workers) through its C API, printing the same JSON lines as ours but with
// "engine":"mxnet-1.9.1" (ours prints "engine":"per-device" etc.):
//
//   {"bench":"chain","engine":"mxnet-1.9.1","threads":2,"ns_per_op":1234.5,"correct":true,"reps":5}
//
//   mxnet_engine [--threads T] [--reps N] [--quick] [--bench independent,chain,...]
//                [--profile ops|all]
//
// Built by bench/peers/build-mxnet.sh (pip-installed mxnet==1.9.1 wheel: its libmxnet.so and
// mxnet/include/mxnet/c_api.h; g++ -O2 -std=c++17, -DMXNET_LIBRARY=<path>, rpath to the
// wheel's directory).
//
// What is measured (see /work/shared/reference/benchmarks.md, "Engine benchmarks"):
//   independent  1024 vars; 100,000 ops; op k writes var k % 1024, reads nothing
//   chain        1 var; 100,000 ops, all writing it
//   random_dag   1000 vars; 100,000 ops; write ~ uniform var; 0..3 reads (count uniform in
//                0..=3), distinct from each other and from the write; fixed seed (splitmix64,
//                seed 0x5EED; a drawn var equal to one already taken is drawn again)
//   wavefront    317 x 317 grid, var (i,j) = i * 317 + j; cell (i,j) reads (i-1,j) then
//                (i,j-1) when they exist and writes (i,j); pushed row by row
//   binary_tree  131,071 ops; op k (1-based) reads the var of its parent k/2 (none for the
//                root) and writes its own var (index k - 1); pushed in order of k
// --quick: 10x fewer ops (10,000 for independent/chain/random_dag, 13,107 for binary_tree)
// and a 100 x 100 wavefront. Each figure is the median over --reps reps (default 5) of
// elapsed / ops, in ns, where elapsed runs from just before the first push to the return of
// MXNDArrayWaitAll (Engine::WaitForAll). Reps are interleaved across benchmarks (rep 1 of
// every bench, then rep 2, ...), so a noisy period on the shared machine hits all of them.
//
// How the engine is driven, to mirror our Rust benchmark:
//   - MXNET_ENGINE_TYPE=ThreadedEnginePerDevice and MXNET_CPU_WORKER_NTHREADS=T are set with
//     setenv, and only then is libmxnet.so loaded, with dlopen (its path is baked in by the
//     build script; the binary also carries an rpath to it). This matters: the engine is
//     created lazily by the first C API call, but libmxnet 1.9.1 reads
//     MXNET_CPU_WORKER_NTHREADS in a static initializer (its LibraryInitializer) when the
//     library is loaded and the engine takes the worker count from that cached value. Linked
//     with -lmxnet, the library loads before main, and a setenv in main is silently ignored
//     (measured: 1 CPU worker thread instead of T). The engine's idle CPU-priority pool
//     (MXNET_CPU_PRIORITY_NTHREADS, default 4 threads) is left as is; no op here uses it.
//   - One engine variable per benchmark var: an NDArray of shape (1), CPU, delay_alloc=1
//     (MXNDArrayCreateEx; its storage is never allocated), whose Chunk owns an engine var. All
//     of them are created before timing starts and reused by every rep.
//   - Every op is one MXEnginePushSyncND call from the main thread: reads as const NDArrays,
//     the write as the one mutable NDArray, context cpu(0), FnProperty kNormal (prop NULL),
//     priority 0, a short op name, no param deleter. The C API turns this into
//     Engine::PushSync -> ThreadedEngine::PushAsync with those var dependencies (plus a
//     std::function wrapper and two small std::vectors of var handles per push). Bulk execution is turned
//     off for the pushing thread (MXEngineSetBulkSize(0)), so every op is its own engine op.
//   - Ops do no real work: op k folds its inputs into its output var's value in a plain
//     uint64 array, h = FNV offset basis; h = (h ^ x) * 0x100000001b3 for x = value[write],
//     value[read 1], ..., k (0-based push index); value[write] = h. The fold is non-commutative, so after each rep
//     the array is compared with a sequential evaluation of the same ops in push order:
//     "correct" is true only if every rep matched bit for bit (exit status 1 otherwise).
//   - Before the first rep, one warm-up op is pushed and waited for, so the lazily created
//     CPU worker pool exists before timing starts (our engine's workers exist up front too).
//
// --profile MODE: what MXNet's own profiler adds per op (the peer of `enginetop bench profiler
// --bench random_dag`). Every rep runs each benchmark twice, with MXNet's profiler off and on
// (which goes first alternates from rep to rep), and prints instead
//
//   {"bench":"random_dag","engine":"mxnet-1.9.1","profiler":"ops","threads":2,
//    "ns_per_op":5000.0,"ns_per_op_profiled":6000.0,"added_ns_per_op":1000.0,"ratio":1.2,
//    "records_per_op":2.00,"correct":true,"reps":5}
//
// with ns_per_op and ns_per_op_profiled the medians over reps, added_ns_per_op their
// difference and ratio their quotient. The profiler is configured once through the C API,
// MXSetProfilerConfig, with a file under /tmp (/tmp/mxnet_engine-profile-<pid>.json) and, for
// MODE "ops", only the engine's op records on (profile_imperative=true: each op pushed with a
// name gets a begin and an end record on its worker; profile_symbolic, profile_memory and
// profile_api false), or for MODE "all" profile_all=true. A profiled run is
// MXSetProfilerState(1), the timed run, MXSetProfilerState(0); then, untimed, MXDumpProfile(0)
// writes that run's records to the file (truncating it), the records naming the op are
// counted (records_per_op: per op pushed; "ops" writes four, a begin and an end on the worker
// and an async begin and end in the "operator" domain) and the file is deleted. A run with no record exits
// with status 1 (the profiler would not have measured anything). One profiled warm-up op runs
// before timing too.
#include <dlfcn.h>
#include <unistd.h>
#include <mxnet/c_api.h>  // declarations only: the library is dlopen'ed, see load_mxnet

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"

namespace {

using Clock = std::chrono::steady_clock;

// The layout of mxnet::Context (include/mxnet/base.h in 1.9.1: `DeviceType dev_type;
// int32_t dev_id;`, with kCPU = cpu::kDevMask = 1); the C API reads a ContextHandle as a
// pointer to one. c_api.h itself does not declare the struct.
struct MxContext {
  int32_t dev_type;
  int32_t dev_id;
};
static_assert(sizeof(MxContext) == 8, "mxnet::Context is two 32-bit ints");
constexpr int kCpuDevType = 1;
constexpr int kFloat32 = 0;  // mshadow::kFloat32; the dtype of the (never allocated) arrays
const MxContext kCpu0{kCpuDevType, 0};
const char kOpName[] = "bench_op";  // short: fits std::string's inline buffer

struct Op {
  uint32_t index;  // k, 0-based push order
  uint32_t write;
  uint32_t num_reads;
  uint32_t reads[3];
};

struct Workload {
  std::string name;
  uint32_t num_vars = 0;
  std::vector<Op> ops;
  std::vector<NDArrayHandle> vars;  // one NDArray (engine var) per benchmark var
  std::vector<uint64_t> expected;   // values after a sequential run
  std::vector<double> ns_per_op;    // one per rep
  std::vector<double> ns_per_op_profiled;  // one per rep (--profile)
  uint64_t records = 0;                    // profiler records naming the op (--profile)
  bool correct = true;
};

const char* const kBenches[] = {"independent", "chain", "random_dag", "wavefront",
                                "binary_tree"};
const char* const kProfileModes[] = {"ops", "all"};

using bench_args::Options;

// The C API functions used, resolved with dlsym after the environment is set.
struct MxApi {
  decltype(&::MXGetLastError) MXGetLastError;
  decltype(&::MXNotifyShutdown) MXNotifyShutdown;
  decltype(&::MXEngineSetBulkSize) MXEngineSetBulkSize;
  decltype(&::MXNDArrayCreateEx) MXNDArrayCreateEx;
  decltype(&::MXNDArrayFree) MXNDArrayFree;
  decltype(&::MXNDArrayWaitAll) MXNDArrayWaitAll;
  decltype(&::MXEnginePushSyncND) MXEnginePushSyncND;
  decltype(&::MXSetProfilerConfig) MXSetProfilerConfig;
  decltype(&::MXSetProfilerState) MXSetProfilerState;
  decltype(&::MXDumpProfile) MXDumpProfile;
};
MxApi mx;

#ifndef MXNET_LIBRARY
#define MXNET_LIBRARY "libmxnet.so"  // found through the binary's rpath
#endif

template <typename Fn>
void resolve(void* library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) {
    std::fprintf(stderr, "mxnet_engine: %s not found in %s\n", name, MXNET_LIBRARY);
    std::exit(1);
  }
}

// Loads libmxnet.so (which creates MXNet's engine from the environment as it loads).
void load_mxnet() {
  void* library = dlopen(MXNET_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) {
    std::fprintf(stderr, "mxnet_engine: cannot load %s: %s\n", MXNET_LIBRARY, dlerror());
    std::exit(1);
  }
  resolve(library, "MXGetLastError", mx.MXGetLastError);
  resolve(library, "MXNotifyShutdown", mx.MXNotifyShutdown);
  resolve(library, "MXEngineSetBulkSize", mx.MXEngineSetBulkSize);
  resolve(library, "MXNDArrayCreateEx", mx.MXNDArrayCreateEx);
  resolve(library, "MXNDArrayFree", mx.MXNDArrayFree);
  resolve(library, "MXNDArrayWaitAll", mx.MXNDArrayWaitAll);
  resolve(library, "MXEnginePushSyncND", mx.MXEnginePushSyncND);
  resolve(library, "MXSetProfilerConfig", mx.MXSetProfilerConfig);
  resolve(library, "MXSetProfilerState", mx.MXSetProfilerState);
  resolve(library, "MXDumpProfile", mx.MXDumpProfile);
}

void check(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "mxnet_engine: %s failed: %s\n", what, mx.MXGetLastError());
    std::exit(1);
  }
}

// ---- the op function and its sequential twin ----

uint64_t* g_values = nullptr;  // the values the pushed ops fold into; one per var

inline uint64_t fold(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ULL; }

inline void apply(uint64_t* values, const Op& op) {
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fold(h, values[op.write]);
  for (uint32_t i = 0; i < op.num_reads; ++i) h = fold(h, values[op.reads[i]]);
  h = fold(h, op.index);
  values[op.write] = h;
}

// EngineSyncFunc: (RunContext*, func_param). The engine orders it after every op it depends
// on, so plain loads and stores of g_values are enough.
void run_op(void* /*run_context*/, void* param) { apply(g_values, *static_cast<const Op*>(param)); }

uint64_t initial_value(uint32_t var) { return 0x9e3779b97f4a7c15ULL * (var + 1ULL); }

void reset(std::vector<uint64_t>& values, uint32_t num_vars) {
  values.resize(num_vars);
  for (uint32_t v = 0; v < num_vars; ++v) values[v] = initial_value(v);
}

// ---- workloads ----

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

void add_op(Workload& w, uint32_t write, std::initializer_list<uint32_t> reads) {
  Op op{static_cast<uint32_t>(w.ops.size()), write, 0, {0, 0, 0}};
  for (uint32_t r : reads) op.reads[op.num_reads++] = r;
  w.ops.push_back(op);
}

Workload make_workload(const std::string& name, bool quick) {
  Workload w;
  w.name = name;
  const uint32_t ops = quick ? 10000 : 100000;
  if (name == "independent") {
    w.num_vars = 1024;
    for (uint32_t k = 0; k < ops; ++k) add_op(w, k % 1024, {});
  } else if (name == "chain") {
    w.num_vars = 1;
    for (uint32_t k = 0; k < ops; ++k) add_op(w, 0, {});
  } else if (name == "random_dag") {
    w.num_vars = 1000;
    SplitMix64 rng{0x5EED};
    for (uint32_t k = 0; k < ops; ++k) {
      Op op{k, rng.below(w.num_vars), rng.below(4), {0, 0, 0}};
      for (uint32_t i = 0; i < op.num_reads; ++i) {
        uint32_t r;
        do {
          r = rng.below(w.num_vars);
        } while (r == op.write || std::find(op.reads, op.reads + i, r) != op.reads + i);
        op.reads[i] = r;
      }
      w.ops.push_back(op);
    }
  } else if (name == "wavefront") {
    const uint32_t side = quick ? 100 : 317;
    w.num_vars = side * side;
    for (uint32_t i = 0; i < side; ++i) {
      for (uint32_t j = 0; j < side; ++j) {
        uint32_t cell = i * side + j;
        if (i > 0 && j > 0) add_op(w, cell, {cell - side, cell - 1});
        else if (i > 0) add_op(w, cell, {cell - side});
        else if (j > 0) add_op(w, cell, {cell - 1});
        else add_op(w, cell, {});
      }
    }
  } else {  // binary_tree: op k (1-based) writes var k - 1, reads its parent's var k/2 - 1
    const uint32_t n = quick ? 13107 : 131071;
    w.num_vars = n;
    for (uint32_t k = 1; k <= n; ++k) {
      if (k == 1) add_op(w, 0, {});
      else add_op(w, k - 1, {k / 2 - 1});
    }
  }
  reset(w.expected, w.num_vars);
  for (const Op& op : w.ops) apply(w.expected.data(), op);
  return w;
}

NDArrayHandle new_var() {
  const uint32_t shape[1] = {1};
  NDArrayHandle handle = nullptr;
  check(mx.MXNDArrayCreateEx(shape, 1, kCpuDevType, 0, /*delay_alloc=*/1, kFloat32, &handle),
        "MXNDArrayCreateEx");
  return handle;
}

inline void push(const Workload& w, const Op& op) {
  NDArrayHandle reads[3];
  for (uint32_t i = 0; i < op.num_reads; ++i) reads[i] = w.vars[op.reads[i]];
  NDArrayHandle write = w.vars[op.write];
  check(mx.MXEnginePushSyncND(run_op, const_cast<Op*>(&op), nullptr, &kCpu0, reads,
                           static_cast<int>(op.num_reads), &write, 1, nullptr, 0, kOpName),
        "MXEnginePushSyncND");
}

// One rep: ns per op; records whether the final values match the sequential run.
double run_once(Workload& w, std::vector<uint64_t>& values) {
  reset(values, w.num_vars);
  g_values = values.data();
  Clock::time_point start = Clock::now();
  for (const Op& op : w.ops) push(w, op);
  check(mx.MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  if (values != w.expected) {
    w.correct = false;
    std::fprintf(stderr, "mxnet_engine: %s: final values differ from the sequential run\n",
                 w.name.c_str());
  }
  return ns / static_cast<double>(w.ops.size());
}

// ---- MXNet's profiler (--profile) ----

// Configures MXNet's profiler to record into `file`: the engine's op records only ("ops"), or
// everything it can record ("all"). It stays stopped until a profiled run starts it.
void configure_profiler(const std::string& mode, const std::string& file) {
  std::vector<const char*> keys, values;
  if (mode == "all") {
    keys = {"profile_all"};
    values = {"true"};
  } else {
    keys = {"profile_symbolic", "profile_imperative", "profile_memory", "profile_api"};
    values = {"false", "true", "false", "false"};
  }
  keys.push_back("filename");
  values.push_back(file.c_str());
  check(mx.MXSetProfilerConfig(static_cast<int>(keys.size()), keys.data(), values.data()),
        "MXSetProfilerConfig");
}

// Points MXNet's profiler at no file: at exit its destructor dumps once more (an empty trace
// tail), which would otherwise leave a file behind.
void unconfigure_profiler() {
  const char* keys[] = {"filename"};
  const char* values[] = {""};
  check(mx.MXSetProfilerConfig(1, keys, values), "MXSetProfilerConfig");
}

// How many times `needle` occurs in the file at `path` (0 when it cannot be read).
uint64_t count_in_file(const std::string& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// One run with MXNet's profiler on; untimed afterwards, its records are dumped to `file`,
// those naming the op counted into w.records, and the file deleted.
double run_profiled(Workload& w, std::vector<uint64_t>& values, const std::string& file) {
  check(mx.MXSetProfilerState(1), "MXSetProfilerState(1)");
  double ns = run_once(w, values);
  check(mx.MXSetProfilerState(0), "MXSetProfilerState(0)");
  check(mx.MXDumpProfile(0), "MXDumpProfile");
  w.records += count_in_file(file, std::string("\"") + kOpName + "\"");
  std::remove(file.c_str());
  return ns;
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  size_t mid = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2.0;
}

// ---- command line ----

}  // namespace

int main(int argc, char** argv) {
  Options defaults;
  defaults.reps = 5;
  Options options = bench_args::Parser("mxnet_engine", kBenches)
                        .profile_modes(kProfileModes)
                        .parse(argc, argv, defaults);
  const bool profile = !options.profile.empty();
  const std::string profile_file =
      "/tmp/mxnet_engine-profile-" + std::to_string(getpid()) + ".json";

  // Before libmxnet.so is loaded: it creates the engine from these while it loads.
  setenv("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice", 1);
  setenv("MXNET_CPU_WORKER_NTHREADS", std::to_string(options.threads).c_str(), 1);
  load_mxnet();

  int previous_bulk = 0;
  check(mx.MXEngineSetBulkSize(0, &previous_bulk), "MXEngineSetBulkSize");

  if (profile) configure_profiler(options.profile, profile_file);

  // Warm-up: creates the CPU worker pool of device cpu(0) (and with --profile, runs one op
  // profiled).
  {
    Workload warm;
    warm.name = "warm-up";
    warm.num_vars = 1;
    add_op(warm, 0, {});
    warm.vars.push_back(new_var());
    std::vector<uint64_t> values;
    reset(warm.expected, 1);
    apply(warm.expected.data(), warm.ops[0]);
    run_once(warm, values);
    if (profile) run_profiled(warm, values, profile_file);
    check(mx.MXNDArrayFree(warm.vars[0]), "MXNDArrayFree");
  }

  std::vector<Workload> workloads;
  for (const std::string& name : options.benches) {
    workloads.push_back(make_workload(name, options.quick));
    Workload& w = workloads.back();
    w.vars.reserve(w.num_vars);
    for (uint32_t v = 0; v < w.num_vars; ++v) w.vars.push_back(new_var());
  }
  check(mx.MXNDArrayWaitAll(), "MXNDArrayWaitAll");

  std::vector<uint64_t> values;
  for (int rep = 0; rep < options.reps; ++rep) {
    for (Workload& w : workloads) {
      const bool profiled_first = profile && rep % 2 == 1;
      if (profiled_first) w.ns_per_op_profiled.push_back(run_profiled(w, values, profile_file));
      w.ns_per_op.push_back(run_once(w, values));
      if (profile && !profiled_first)
        w.ns_per_op_profiled.push_back(run_profiled(w, values, profile_file));
    }
  }

  bool all_correct = true;
  bool all_recorded = true;
  for (Workload& w : workloads) {
    if (profile) {
      const double off = median(w.ns_per_op), on = median(w.ns_per_op_profiled);
      const double records_per_op =
          static_cast<double>(w.records) / static_cast<double>(w.ops.size() * options.reps);
      std::printf(
          "{\"bench\":\"%s\",\"engine\":\"mxnet-1.9.1\",\"profiler\":\"%s\",\"threads\":%d,"
          "\"ns_per_op\":%.1f,\"ns_per_op_profiled\":%.1f,\"added_ns_per_op\":%.1f,"
          "\"ratio\":%.4f,\"records_per_op\":%.2f,\"correct\":%s,\"reps\":%d}\n",
          w.name.c_str(), options.profile.c_str(), options.threads, off, on, on - off, on / off,
          records_per_op, w.correct ? "true" : "false", options.reps);
      std::fflush(stdout);
      all_correct = all_correct && w.correct;
      if (w.records == 0) {
        std::fprintf(stderr, "mxnet_engine: %s: MXNet's profiler recorded no op\n",
                     w.name.c_str());
        all_recorded = false;
      }
      continue;
    }
    std::printf(
        "{\"bench\":\"%s\",\"engine\":\"mxnet-1.9.1\",\"threads\":%d,\"ns_per_op\":%.1f,"
        "\"correct\":%s,\"reps\":%d}\n",
        w.name.c_str(), options.threads, median(w.ns_per_op), w.correct ? "true" : "false",
        options.reps);
    std::fflush(stdout);
    all_correct = all_correct && w.correct;
  }

  for (Workload& w : workloads)
    for (NDArrayHandle var : w.vars) check(mx.MXNDArrayFree(var), "MXNDArrayFree");
  check(mx.MXNDArrayWaitAll(), "MXNDArrayWaitAll");
  if (profile) unconfigure_profiler();
  check(mx.MXNotifyShutdown(), "MXNotifyShutdown");
  return all_correct && all_recorded ? 0 : 1;
}
