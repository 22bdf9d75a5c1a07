// The Eigen 3.4 peer of `enginetop bench pool`: the same five benchmarks, the same
// definitions, on Eigen::ThreadPool (NonBlockingThreadPool), printing the same JSON lines
// with "pool":"eigen-cpp".
//
//   eigen_pool [--threads T] [--reps N] [--quick] [--bench spawn,tree,...]
//
// Built by bench/peers/build-eigen.sh (g++ -O2 -std=c++17 -pthread). Definitions (see
// /work/shared/reference/benchmarks.md and src/bench/pool.rs):
//   spawn         outside thread schedules 1,000,000 no-op tasks, each notifying one barrier
//                 of count 1,000,000, then waits; ns per task.
//   tree          one root scheduled from outside; each task at depth d > 0 schedules two
//                 children from inside; depth 19 = 1,048,575 tasks; ns per task.
//   parallel_for  sum of sqrt over 2^24 floats (i % 1000) * 0.5 via
//                 ThreadPoolDevice::parallelFor with TensorOpCost(4, 0, 10); ms.
//   wake_hot/cold schedule one task that records its start; latency = start - schedule;
//                 hot 2000 back to back, cold 500 each after 1 ms idle; p50 and p99 us.
// Each figure is the median over reps (default 5, 9 for parallel_for). Median and
// percentiles use the definitions of src/bench/stats.rs (nearest rank).
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#include <unsupported/Eigen/CXX11/ThreadPool>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Sizes {
  long spawn_tasks;
  int tree_depth;
  long parallel_for_len;
  int wake_hot_samples;
  int wake_cold_samples;
};

constexpr Sizes kFull{1000000, 19, 1L << 24, 2000, 500};
constexpr Sizes kQuick{100000, 16, 1L << 21, 200, 50};
const char* const kBenches[] = {"spawn", "tree", "parallel_for", "wake_hot", "wake_cold"};

using bench_args::Options;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<double> sorted(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples;
}

double median(const std::vector<double>& samples) {
  std::vector<double> s = sorted(samples);
  size_t mid = s.size() / 2;
  return s.size() % 2 == 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2.0;
}

// Nearest rank: the sample of rank ceil(p / 100 * n), 1-based.
double percentile(const std::vector<double>& samples, double p) {
  std::vector<double> s = sorted(samples);
  long rank = static_cast<long>(std::ceil(p / 100.0 * static_cast<double>(s.size())));
  rank = std::max(1L, std::min(rank, static_cast<long>(s.size())));
  return s[rank - 1];
}

void print_line(const char* bench, int threads, const std::string& metric, int reps) {
  std::printf("{\"bench\":\"%s\",\"pool\":\"eigen-cpp\",\"threads\":%d,%s,\"reps\":%d}\n", bench,
              threads, metric.c_str(), reps);
  std::fflush(stdout);
}

std::string number_field(const char* key, double value) {
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "\"%s\":%.4f", key, value);
  return buffer;
}

// spawn: ns per task.
double spawn_once(Eigen::ThreadPool& pool, long tasks) {
  Eigen::Barrier barrier(static_cast<unsigned>(tasks));
  Clock::time_point start = Clock::now();
  for (long i = 0; i < tasks; ++i) pool.Schedule([&barrier] { barrier.Notify(); });
  barrier.Wait();
  return seconds_since(start) * 1e9 / static_cast<double>(tasks);
}

void tree_node(Eigen::ThreadPool* pool, Eigen::Barrier* barrier, int depth) {
  if (depth > 0) {
    pool->Schedule([=] { tree_node(pool, barrier, depth - 1); });
    pool->Schedule([=] { tree_node(pool, barrier, depth - 1); });
  }
  barrier->Notify();
}

// tree: ns per task.
double tree_once(Eigen::ThreadPool& pool, int depth) {
  long tasks = (1L << (depth + 1)) - 1;
  Eigen::Barrier barrier(static_cast<unsigned>(tasks));
  Eigen::ThreadPool* pool_ptr = &pool;
  Eigen::Barrier* barrier_ptr = &barrier;
  Clock::time_point start = Clock::now();
  pool.Schedule([=] { tree_node(pool_ptr, barrier_ptr, depth); });
  barrier.Wait();
  return seconds_since(start) * 1e9 / static_cast<double>(tasks);
}

double sum_sqrt(const float* values, long first, long last) {
  double sum = 0.0;
  for (long i = first; i < last; ++i) sum += std::sqrt(values[i]);
  return sum;
}

// parallel_for: ms; exits if the sum is wrong.
double parallel_for_once(Eigen::ThreadPoolDevice& device, const std::vector<float>& values,
                         double expected) {
  std::mutex total_lock;
  double total = 0.0;
  Clock::time_point start = Clock::now();
  device.parallelFor(static_cast<Eigen::Index>(values.size()), Eigen::TensorOpCost(4, 0, 10),
                     [&](Eigen::Index first, Eigen::Index last) {
                       double block_sum = sum_sqrt(values.data(), first, last);
                       std::lock_guard<std::mutex> guard(total_lock);
                       total += block_sum;
                     });
  double ms = seconds_since(start) * 1e3;
  if (std::fabs(total - expected) > 1e-9 * std::fabs(expected)) {
    std::fprintf(stderr, "eigen_pool: parallel_for summed %.17g, expected %.17g\n", total,
                 expected);
    std::exit(1);
  }
  return ms;
}

// One schedule-to-start latency in us.
double one_latency_us(Eigen::ThreadPool& pool) {
  std::atomic<int64_t> started_ns{0};
  Eigen::Barrier recorded(1);
  int64_t scheduled_ns = now_ns();
  pool.Schedule([&] {
    started_ns.store(now_ns(), std::memory_order_release);
    recorded.Notify();
  });
  recorded.Wait();
  return static_cast<double>(std::max<int64_t>(0, started_ns.load() - scheduled_ns)) / 1e3;
}

// wake: {p50, p99} us of one rep.
std::pair<double, double> wake_once(Eigen::ThreadPool& pool, int samples, bool cold) {
  std::vector<double> latencies_us;
  latencies_us.reserve(samples);
  for (int i = 0; i < samples; ++i) {
    if (cold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    latencies_us.push_back(one_latency_us(pool));
  }
  return {percentile(latencies_us, 50.0), percentile(latencies_us, 99.0)};
}

// Runs `measure` reps times on a fresh pool and returns the per-rep figures.
template <typename Measure>
std::vector<double> reps_of(int reps, Measure measure) {
  std::vector<double> figures;
  for (int rep = 0; rep < reps; ++rep) figures.push_back(measure());
  return figures;
}

void run_bench(const std::string& bench, const Options& options, const Sizes& sizes) {
  int reps = options.reps > 0 ? options.reps : (bench == "parallel_for" ? 9 : 5);
  Eigen::ThreadPool pool(options.threads);
  const char* name = bench.c_str();
  if (bench == "spawn") {
    auto figures = reps_of(reps, [&] { return spawn_once(pool, sizes.spawn_tasks); });
    print_line(name, options.threads, number_field("ns_per_task", median(figures)), reps);
  } else if (bench == "tree") {
    auto figures = reps_of(reps, [&] { return tree_once(pool, sizes.tree_depth); });
    print_line(name, options.threads, number_field("ns_per_task", median(figures)), reps);
  } else if (bench == "parallel_for") {
    std::vector<float> values(sizes.parallel_for_len);
    for (long i = 0; i < sizes.parallel_for_len; ++i) values[i] = (i % 1000) * 0.5f;
    double expected = sum_sqrt(values.data(), 0, sizes.parallel_for_len);
    Eigen::ThreadPoolDevice device(&pool, options.threads);
    auto figures = reps_of(reps, [&] { return parallel_for_once(device, values, expected); });
    print_line(name, options.threads, number_field("ms", median(figures)), reps);
  } else {
    bool cold = bench == "wake_cold";
    int samples = cold ? sizes.wake_cold_samples : sizes.wake_hot_samples;
    std::vector<double> p50s, p99s;
    for (int rep = 0; rep < reps; ++rep) {
      auto [p50, p99] = wake_once(pool, samples, cold);
      p50s.push_back(p50);
      p99s.push_back(p99);
    }
    std::string metric =
        number_field("us_p50", median(p50s)) + "," + number_field("us_p99", median(p99s));
    print_line(name, options.threads, metric, reps);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options defaults;
  defaults.reps = 0;  // 0: each benchmark's default
  Options options = bench_args::Parser("eigen_pool", kBenches).parse(argc, argv, defaults);
  const Sizes& sizes = options.quick ? kQuick : kFull;
  for (const std::string& bench : options.benches) run_bench(bench, options, sizes);
  return 0;
}
