// The command line the C++ peers share (eigen_pool.cc, mxnet_engine.cc):
//   <program> [--threads T] [--reps N] [--quick] [--bench a,b,...] [--profile MODE] [--help]
// --threads and --reps take an integer in 1..100000; --bench a comma-separated subset of the
// program's benchmarks (all of them when absent); --profile one of the program's profiler
// modes (only for a program that names some). A bad argument prints the problem and the
// usage line to stderr and exits with status 2; --help prints the usage line and exits 0.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace bench_args {

struct Options {
  int threads = 2;
  int reps = 0;
  bool quick = false;
  std::vector<std::string> benches;
  std::string profile;  // empty: no --profile
};

class Parser {
 public:
  template <size_t N>
  Parser(const char* program, const char* const (&benches)[N])
      : program_(program), benches_(std::begin(benches), std::end(benches)) {}

  // Accepts --profile with one of `modes`.
  template <size_t N>
  Parser& profile_modes(const char* const (&modes)[N]) {
    profile_modes_.assign(std::begin(modes), std::end(modes));
    return *this;
  }

  // Parses argv; `defaults` gives what an absent flag means (an empty bench list: all).
  Options parse(int argc, char** argv, Options defaults) const {
    Options options = std::move(defaults);
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      bool has_value = i + 1 < argc;
      if (flag == "--help") {
        std::printf("%s\n", usage_line().c_str());
        std::exit(0);
      } else if (flag == "--quick") {
        options.quick = true;
      } else if (flag == "--threads" && has_value) {
        options.threads = positive_int("--threads", argv[++i]);
      } else if (flag == "--reps" && has_value) {
        options.reps = positive_int("--reps", argv[++i]);
      } else if (flag == "--bench" && has_value) {
        options.benches = bench_list(argv[++i]);
      } else if (flag == "--profile" && has_value && !profile_modes_.empty()) {
        options.profile = one_of("--profile", argv[++i], profile_modes_);
      } else {
        usage("unexpected argument '" + flag + "'");
      }
    }
    if (options.benches.empty()) options.benches = benches_;
    return options;
  }

 private:
  std::string usage_line() const {
    std::string line = "usage: " + program_ + " [--threads T] [--reps N] [--quick] [--bench " +
                       joined(benches_, ",") + "]";
    if (!profile_modes_.empty()) line += " [--profile " + joined(profile_modes_, "|") + "]";
    return line;
  }

  [[noreturn]] void usage(const std::string& problem) const {
    std::fprintf(stderr, "%s: %s\n%s\n", program_.c_str(), problem.c_str(),
                 usage_line().c_str());
    std::exit(2);
  }

  int positive_int(const char* flag, const char* text) const {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 100000)
      usage(std::string("invalid value '") + text + "' for " + flag);
    return static_cast<int>(value);
  }

  static std::string joined(const std::vector<std::string>& words, const char* separator) {
    std::string text;
    for (const std::string& word : words) text += (text.empty() ? "" : separator) + word;
    return text;
  }

  std::string one_of(const char* flag, const char* text,
                     const std::vector<std::string>& choices) const {
    if (std::find(choices.begin(), choices.end(), text) == choices.end())
      usage(std::string("invalid value '") + text + "' for " + flag + " (one of " +
            joined(choices, ", ") + ")");
    return text;
  }

  std::vector<std::string> bench_list(const char* text) const {
    std::vector<std::string> chosen;
    std::stringstream stream(text);
    std::string name;
    while (std::getline(stream, name, ',')) {
      if (std::find(benches_.begin(), benches_.end(), name) == benches_.end())
        usage("unknown benchmark '" + name + "'");
      chosen.push_back(name);
    }
    return chosen;
  }

  std::string program_;
  std::vector<std::string> benches_;
  std::vector<std::string> profile_modes_;
};

}  // namespace bench_args
