//! Tests that drive the runtime through a benchmark's workloads.

mod profiler_random_dag;
