//! The benchmarks behind `enginetop bench`.
