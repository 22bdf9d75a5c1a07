//! GEMM peak: this machine's square `f32` GEMM rate through our kernels and intra-op pool.
//!
//! # What is measured
//! `C = A B` with `A`, `B`, `C` square (`size`, default 1024), values uniform in `[-1, 1)`,
//! through [`crate::kernels::gemm()`]: the `gemm` crate single-threaded on fixed blocks of
//! rows, the blocks spread by our cost-model `parallel_for` over a pool of `threads` workers.
//! The call is made *from a worker of that pool*, so exactly `threads` threads compute (a
//! caller outside the pool would help with blocks while it waits, adding a thread). Untimed
//! warm-up calls for at least 250 ms, then `reps` timed calls (default 9); the figure is
//! `2 size^3 / median time`. The first few hundred milliseconds of calls run slow (threads
//! settling on cores); timed, they would make the peak read low under the default scheduler
//! and flatter the step it is compared with, so the warm-up lasts past them (the figures:
//! `bench/README.md`).
//! Sampled elements of `C` are checked against `f64` dot products, so a broken kernel fails
//! the benchmark instead of reporting a fast wrong answer.
//!
//! # Output
//! One JSON line (`--json`) or one line of text:
//!
//! ```text
//! {"bench":"gemm","pool":"eigen","threads":2,"size":1024,"gemm_peak_gflops":181.2,"best_gflops":199.0,"ms":11.85,"reps":9}
//! ```
//!
//! # The cache
//! The headless workload summary compares achieved GFLOP/s with this peak without paying for
//! a measurement on every run: [`cached_gemm_peak`] reads `gemm-peak.json` in
//! [`default_cache_dir`] (`$XDG_CACHE_HOME/enginetop`, else `$HOME/.cache/enginetop`), keyed by
//! enginetop's version, the machine's available cores, the thread count and the size, and
//! measures (then stores) only on a miss. The cache is best-effort: an unreadable file is a
//! miss, and a failed write leaves the measured figure valid.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::bench::stats::median;
use crate::kernels::gemm::{gemm, GemmSpec};
use crate::kernels::{KernelError, Tensor};
use crate::pool::barrier::Barrier;
use crate::pool::{Pool, PoolError, PoolKind, PoolOptions};
use crate::sync::{Arc, Mutex};

/// Matrix side when none is given.
pub(crate) const DEFAULT_SIZE: usize = 1024;
/// Timed reps when none are given.
pub(crate) const DEFAULT_REPS: usize = 9;
/// How long the untimed calls before the timed ones run at least.
const WARM_UP: Duration = Duration::from_millis(250);
/// Elements of `C` checked against a dot product per run.
const CHECKED_ELEMENTS: usize = 16;
/// Allowed error of a checked element, relative to `sqrt(size)` (the sum's typical size).
const CHECK_TOLERANCE: f64 = 1e-4;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GemmBenchConfig {
    /// Workers of the intra-op pool.
    pub(crate) threads: usize,
    /// Side of the square matrices.
    pub(crate) size: usize,
    /// Timed reps (at least 1).
    pub(crate) reps: usize,
    /// The pool kind the blocks run on.
    pub(crate) pool: PoolKind,
}

impl GemmBenchConfig {
    /// `threads` workers of an `eigen` pool, default size and reps.
    pub(crate) fn new(threads: usize) -> Self {
        GemmBenchConfig {
            threads,
            size: DEFAULT_SIZE,
            reps: DEFAULT_REPS,
            pool: PoolKind::Eigen,
        }
    }
}

/// The benchmark's figure: one JSON line.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct GemmPeak {
    /// Always `gemm`.
    pub(crate) bench: String,
    /// The pool kind.
    pub(crate) pool: PoolKind,
    /// Workers of the pool.
    pub(crate) threads: usize,
    /// Side of the square matrices.
    pub(crate) size: usize,
    /// `2 size^3 / median time`, in GFLOP/s.
    pub(crate) gemm_peak_gflops: f64,
    /// The same over the fastest rep.
    pub(crate) best_gflops: f64,
    /// Median time of one GEMM, in milliseconds.
    pub(crate) ms: f64,
    /// Timed reps.
    pub(crate) reps: usize,
}

impl GemmPeak {
    /// The result as one JSON object on one line.
    pub(crate) fn json_line(&self) -> String {
        serde_json::to_string(self).expect("a GemmPeak always serializes")
    }

    /// The result as one line for people.
    pub(crate) fn text_line(&self) -> String {
        format!(
            "gemm {size}x{size}x{size} f32 on {threads} {pool} thread(s): {peak:.1} GFLOP/s \
             (median of {reps}; best {best:.1} GFLOP/s, median {ms:.2} ms per GEMM)",
            size = self.size,
            threads = self.threads,
            pool = self.pool,
            peak = self.gemm_peak_gflops,
            reps = self.reps,
            best = self.best_gflops,
            ms = self.ms,
        )
    }
}

/// Why the GEMM benchmark could not produce a figure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GemmBenchError {
    /// The intra-op pool failed to start.
    #[error("could not start the `{kind}` pool of {threads} threads for the GEMM benchmark")]
    Pool {
        /// The pool kind.
        kind: PoolKind,
        /// Threads asked for.
        threads: usize,
        /// Why.
        #[source]
        source: PoolError,
    },
    /// The GEMM kernel refused its inputs (a bug: the benchmark makes them).
    #[error("the GEMM kernel failed")]
    Kernel(#[from] KernelError),
    /// The product is wrong: the kernel or its blocking is broken.
    #[error(
        "gemm {size}x{size}: C[{row}][{col}] is {got} but the dot product is {want}; \
         the GEMM kernel is wrong, so no peak is reported"
    )]
    WrongProduct {
        /// Matrix side.
        size: usize,
        /// Row of the bad element.
        row: usize,
        /// Column of the bad element.
        col: usize,
        /// What the kernel computed.
        got: f32,
        /// The `f64` dot product.
        want: f64,
    },
    /// The GEMM panicked on the pool's worker (its message is in the pool's stats).
    #[error("the GEMM task panicked on the pool's worker")]
    Panicked,
    /// Zero reps or a zero size.
    #[error("the GEMM benchmark needs a size and reps of at least 1")]
    Empty,
}

/// The operands of one benchmark, shared with the pool task that runs the GEMM.
struct Operands {
    size: usize,
    a: Tensor,
    b: Tensor,
    c: Mutex<Vec<f32>>,
}

/// Runs the benchmark `config` describes.
pub(crate) fn run_gemm_bench(config: &GemmBenchConfig) -> Result<GemmPeak, GemmBenchError> {
    let (size, reps) = (config.size, config.reps);
    if size == 0 || reps == 0 {
        return Err(GemmBenchError::Empty);
    }
    let options = PoolOptions::new(config.pool, config.threads, "gemm-bench");
    let pool = Arc::new(Pool::new(options).map_err(|source| GemmBenchError::Pool {
        kind: config.pool,
        threads: config.threads,
        source,
    })?);
    let operands = Arc::new(Operands {
        size,
        a: Tensor::random(&[size, size], 1),
        b: Tensor::random(&[size, size], 2),
        c: Mutex::new(vec![0.0; size * size]),
    });
    warm_up(&pool, &operands)?;
    let mut seconds = Vec::with_capacity(reps);
    for _ in 0..reps {
        seconds.push(time_on_worker(&pool, &operands)?.as_secs_f64());
    }
    check_product(&operands)?;
    let median_seconds = median(&seconds).ok_or(GemmBenchError::Empty)?;
    let best_seconds = seconds.iter().copied().fold(f64::INFINITY, f64::min);
    let flops = 2.0 * (size as f64).powi(3);
    Ok(GemmPeak {
        bench: "gemm".to_string(),
        pool: config.pool,
        threads: config.threads,
        size,
        gemm_peak_gflops: flops / median_seconds / 1e9,
        best_gflops: flops / best_seconds / 1e9,
        ms: median_seconds * 1e3,
        reps,
    })
}

/// Untimed calls for at least [`WARM_UP`] (at least one): page in `C`, make the pack
/// buffers, wake the workers and let the scheduler settle them on their own cores.
fn warm_up(pool: &Arc<Pool>, operands: &Arc<Operands>) -> Result<(), GemmBenchError> {
    let start = Instant::now();
    loop {
        time_on_worker(pool, operands)?;
        if start.elapsed() >= WARM_UP {
            return Ok(());
        }
    }
}

/// Runs one GEMM on a worker of `pool` and returns how long the call took there.
fn time_on_worker(pool: &Arc<Pool>, operands: &Arc<Operands>) -> Result<Duration, GemmBenchError> {
    let outcome = Arc::new(Mutex::new(None));
    let done = Arc::new(Barrier::new(1));
    let task_pool = Arc::clone(pool);
    let (task_operands, task_outcome, task_done) =
        (operands.clone(), outcome.clone(), done.clone());
    pool.spawn(move || {
        // Notifies also if the GEMM panics (the pool catches it), so the caller never hangs.
        let _notify = NotifyOnDrop(task_done);
        let Operands { size, a, b, c } = &*task_operands;
        let spec = GemmSpec::new(*size, *size, *size);
        let mut c = c.lock();
        let start = Instant::now();
        let result = gemm(task_pool.as_dyn(), &spec, &a.data, &b.data, &mut c[..]);
        *task_outcome.lock() = Some(result.map(|_| start.elapsed()));
    });
    done.wait();
    let result = outcome.lock().take();
    Ok(result.ok_or(GemmBenchError::Panicked)??)
}

/// Notifies its barrier when dropped, by return or by unwind.
struct NotifyOnDrop(Arc<Barrier>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify();
    }
}

/// Checks [`CHECKED_ELEMENTS`] elements of `C` (spread over rows and columns) against `f64`
/// dot products.
fn check_product(operands: &Operands) -> Result<(), GemmBenchError> {
    let Operands { size, a, b, c } = operands;
    let size = *size;
    let c = c.lock();
    let mut rng = fastrand::Rng::with_seed(3);
    for _ in 0..CHECKED_ELEMENTS {
        let (row, col) = (rng.usize(..size), rng.usize(..size));
        let want: f64 = (0..size)
            .map(|k| f64::from(a.data[row * size + k]) * f64::from(b.data[k * size + col]))
            .sum();
        let got = c[row * size + col];
        if (f64::from(got) - want).abs() > CHECK_TOLERANCE * (size as f64).sqrt() {
            return Err(GemmBenchError::WrongProduct {
                size,
                row,
                col,
                got,
                want,
            });
        }
    }
    Ok(())
}

/// This machine's GEMM peak in GFLOP/s on `threads` workers (default size and reps): a fresh
/// measurement, a few hundred milliseconds.
pub(crate) fn measure_gemm_peak(threads: usize) -> Result<f64, GemmBenchError> {
    run_gemm_bench(&GemmBenchConfig::new(threads)).map(|peak| peak.gemm_peak_gflops)
}

/// [`measure_gemm_peak`], measured once per machine, version and thread count and then read
/// from the cache in [`default_cache_dir`] (no cache when there is no such directory).
pub(crate) fn cached_gemm_peak(threads: usize) -> Result<f64, GemmBenchError> {
    match default_cache_dir() {
        Some(dir) => cached_gemm_peak_in(&dir, &GemmBenchConfig::new(threads)),
        None => measure_gemm_peak(threads),
    }
}

/// [`cached_gemm_peak`] with the cache in `dir` and the benchmark `config`.
pub(crate) fn cached_gemm_peak_in(
    dir: &Path,
    config: &GemmBenchConfig,
) -> Result<f64, GemmBenchError> {
    let key = cache_key(config);
    if let Some(peak) = read_cache(dir).get(&key) {
        return Ok(peak.gemm_peak_gflops);
    }
    let peak = run_gemm_bench(config)?;
    // Best-effort: an unwritable cache only means measuring again next time.
    let _ = store_in_cache(dir, &peak);
    Ok(peak.gemm_peak_gflops)
}

/// Where the cache lives: `$XDG_CACHE_HOME/enginetop`, else `$HOME/.cache/enginetop` (only
/// absolute paths count, as the XDG spec says), else nowhere.
pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|cache| cache.join("enginetop"))
}

/// The cache file in `dir`.
pub(crate) fn cache_file(dir: &Path) -> PathBuf {
    dir.join("gemm-peak.json")
}

/// Records `peak` in the cache in `dir` (creating it), replacing the entry of the same key.
pub(crate) fn store_in_cache(dir: &Path, peak: &GemmPeak) -> std::io::Result<()> {
    let config = GemmBenchConfig {
        threads: peak.threads,
        size: peak.size,
        reps: peak.reps,
        pool: peak.pool,
    };
    let mut entries = read_cache(dir);
    entries.insert(cache_key(&config), peak.clone());
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(&entries).map_err(std::io::Error::other)?;
    // Write a temporary file and rename it, so a concurrent reader never sees half a file.
    let temporary = dir.join(format!("gemm-peak.json.{}.tmp", std::process::id()));
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, cache_file(dir))
}

/// The cached entries in `dir`; a missing or unreadable file is an empty cache.
fn read_cache(dir: &Path) -> BTreeMap<String, GemmPeak> {
    std::fs::read_to_string(cache_file(dir))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// What a cached figure depends on: our code, the machine's cores, threads, size and pool.
fn cache_key(config: &GemmBenchConfig) -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    format!(
        "enginetop-{}/cores-{cores}/threads-{}/size-{}/{}/warm-up-{}ms",
        env!("CARGO_PKG_VERSION"),
        config.threads,
        config.size,
        config.pool,
        WARM_UP.as_millis(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(threads: usize) -> GemmBenchConfig {
        GemmBenchConfig {
            threads,
            size: 160,
            reps: 2,
            pool: PoolKind::Eigen,
        }
    }

    #[test]
    fn a_small_run_reports_a_positive_checked_figure() {
        for threads in [1, 2] {
            let peak = run_gemm_bench(&tiny(threads)).unwrap();
            assert_eq!((peak.threads, peak.size, peak.reps), (threads, 160, 2));
            assert!(peak.gemm_peak_gflops > 0.0 && peak.best_gflops >= peak.gemm_peak_gflops);
            let line: serde_json::Value = serde_json::from_str(&peak.json_line()).unwrap();
            assert_eq!(line["bench"], "gemm");
            assert_eq!(line["pool"], "eigen");
            assert!(line["gemm_peak_gflops"].as_f64().unwrap() > 0.0);
        }
    }

    #[test]
    fn zero_reps_is_an_error_not_a_panic() {
        let config = GemmBenchConfig { reps: 0, ..tiny(1) };
        assert!(matches!(
            run_gemm_bench(&config),
            Err(GemmBenchError::Empty)
        ));
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("enginetop-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_cache_measures_once_then_answers_from_the_file() {
        let dir = scratch_dir("gemm-cache");
        let config = tiny(1);
        let first = cached_gemm_peak_in(&dir, &config).unwrap();
        let mut entries = read_cache(&dir);
        assert_eq!(entries.len(), 1);
        // Plant a figure no measurement would give: the next call must return it unmeasured.
        let entry = entries.values_mut().next().unwrap();
        assert_eq!(entry.gemm_peak_gflops, first);
        entry.gemm_peak_gflops = 12345.0;
        store_in_cache(&dir, entry).unwrap();
        assert_eq!(cached_gemm_peak_in(&dir, &config).unwrap(), 12345.0);
        // Another thread count is another key.
        assert_ne!(cached_gemm_peak_in(&dir, &tiny(2)).unwrap(), 12345.0);
        assert_eq!(read_cache(&dir).len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_cache_file_is_a_miss() {
        let dir = scratch_dir("gemm-cache-corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(cache_file(&dir), "{not json").unwrap();
        assert!(cached_gemm_peak_in(&dir, &tiny(1)).unwrap() > 0.0);
        assert_eq!(
            read_cache(&dir).len(),
            1,
            "the measurement replaced the corrupt file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cache_keys_name_what_the_figure_depends_on() {
        let key = cache_key(&GemmBenchConfig::new(3));
        assert!(key.contains("threads-3") && key.contains("size-1024") && key.contains("cores-"));
        assert!(key.contains(env!("CARGO_PKG_VERSION")) && key.contains("/eigen/"));
        // A figure measured with another warm-up (the one-call warm-up before it) is a miss.
        assert!(key.ends_with("/warm-up-250ms"));
    }
}
