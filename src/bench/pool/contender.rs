//! The pools a benchmark measures: each of our pool kinds, and rayon as a reference.
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use super::BenchError;
use crate::pool::{Pool, PoolKind, PoolOptions};
use crate::sync::Arc;

/// A pool the benchmarks can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Contender {
    /// One of our pools.
    Pool(PoolKind),
    /// `rayon::ThreadPool`, the in-process reference.
    Rayon,
}

impl Contender {
    /// Every pool kind, then rayon.
    pub(crate) fn all() -> Vec<Contender> {
        PoolKind::ALL
            .into_iter()
            .map(Contender::Pool)
            .chain([Contender::Rayon])
            .collect()
    }

    /// The name users type and reports print.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Pool(kind) => kind.as_str(),
            Contender::Rayon => "rayon",
        }
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Contender {
    type Err = BenchError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        if name.trim().eq_ignore_ascii_case("rayon") {
            return Ok(Contender::Rayon);
        }
        name.parse()
            .map(Contender::Pool)
            .map_err(|_| BenchError::UnknownContender(name.to_string()))
    }
}

/// A started contender.
pub(crate) struct Runner {
    /// Which contender this is.
    pub(crate) contender: Contender,
    /// Its running pool.
    pub(crate) backend: Backend,
}

/// A running pool of either family.
pub(crate) enum Backend {
    /// Ours, shared so tree tasks can schedule their children on it.
    Ours(Arc<Pool>),
    /// rayon's.
    Rayon(rayon::ThreadPool),
}

impl Runner {
    /// Starts `contender` with `threads` workers.
    pub(crate) fn start(contender: Contender, threads: usize) -> Result<Runner, BenchError> {
        let backend = match contender {
            Contender::Pool(kind) => {
                let options = PoolOptions::new(kind, threads, format!("bench-{kind}"));
                let pool =
                    Pool::new(options).map_err(|source| BenchError::Pool { kind, source })?;
                Backend::Ours(Arc::new(pool))
            }
            Contender::Rayon => rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|index| format!("bench-rayon-w{index}"))
                .build()
                .map(Backend::Rayon)
                .map_err(|source| BenchError::Rayon { threads, source })?,
        };
        Ok(Runner { contender, backend })
    }

    /// Schedules `task` from outside the pool.
    pub(crate) fn spawn(&self, task: impl FnOnce() + Send + 'static) {
        match &self.backend {
            Backend::Ours(pool) => pool.spawn(task),
            Backend::Rayon(pool) => pool.spawn(task),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_the_same_contender() {
        for contender in Contender::all() {
            assert_eq!(contender.name().parse::<Contender>().unwrap(), contender);
        }
    }

    #[test]
    fn all_lists_every_pool_kind_then_rayon() {
        let names: Vec<&str> = Contender::all().into_iter().map(Contender::name).collect();
        assert_eq!(names, ["simple", "eigen", "chase-lev", "rayon"]);
    }

    #[test]
    fn unknown_names_are_refused() {
        assert!(matches!(
            "nosuch".parse::<Contender>(),
            Err(BenchError::UnknownContender(name)) if name == "nosuch"
        ));
    }
}
