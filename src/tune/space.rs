//! What the tuner searches: points (inter-op x intra-op counts), the dimensions a user may
//! name, and the grid of counts per dimension (the settings a run is rebuilt for are in
//! [`setting`](super::setting)).
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::TuneError;

/// One configuration: the engine's CPU workers (inter-op) and the kernels' pool (intra-op).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub(crate) struct Point {
    /// Inter-op threads (the engine's CPU workers).
    pub(crate) inter: usize,
    /// Intra-op threads (the kernels' pool).
    pub(crate) intra: usize,
}

impl Point {
    /// Threads the point starts: what the tie rule counts.
    pub(crate) fn threads(self) -> usize {
        self.inter + self.intra
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "inter {} intra {}", self.inter, self.intra)
    }
}

/// What is better: more iterations per second, or a shorter step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Objective {
    /// Iterations per second (higher is better).
    #[default]
    Throughput,
    /// Step time, seconds per iteration (lower is better).
    Latency,
}

impl Objective {
    /// Whether figure `a` beats figure `b`.
    pub(crate) fn better(self, a: f64, b: f64) -> bool {
        match self {
            Objective::Throughput => a > b,
            Objective::Latency => a < b,
        }
    }

    /// How much faster `best` is than `base`, as a ratio (1.0: as fast).
    pub(crate) fn speedup(self, best: f64, base: f64) -> f64 {
        match self {
            Objective::Throughput => best / base,
            Objective::Latency => base / best,
        }
    }

    /// The figure's unit, for tables.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Objective::Throughput => "iterations/s",
            Objective::Latency => "ms/step",
        }
    }

    /// `value` in [`unit`](Self::unit) (step times are kept in seconds).
    pub(crate) fn shown(self, value: f64) -> f64 {
        match self {
            Objective::Throughput => value,
            Objective::Latency => value * 1e3,
        }
    }

    /// The flag's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Objective::Throughput => "throughput",
            Objective::Latency => "latency",
        }
    }
}

/// A dimension a user may name in `--space`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumString)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = TuneError,
    parse_err_fn = unknown_dimension
)]
pub(super) enum Dimension {
    /// The inter-op count.
    Inter,
    /// The intra-op count.
    Intra,
    /// Whether idle workers spin (fixed when a pool starts: searched by rebuilding the run).
    Spin,
    /// The pool kind (fixed when the run starts: searched by rebuilding the run).
    Pool,
}

/// The error for a `--space` entry that names no dimension.
fn unknown_dimension(text: &str) -> TuneError {
    TuneError::UnknownDimension(text.to_string())
}

/// The dimensions searched: the counts (live), and spinning and the pool kind (by rebuilding
/// the run once per setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Space {
    /// Whether the inter-op count varies.
    pub(crate) inter: bool,
    /// Whether the intra-op count varies.
    pub(crate) intra: bool,
    /// Whether idle workers' spinning varies (on and off).
    pub(crate) spin: bool,
    /// Whether the pool kind varies (every kind the runner builds).
    pub(crate) pool: bool,
}

impl Default for Space {
    /// The counts, live: `inter,intra`.
    fn default() -> Self {
        Space {
            inter: true,
            intra: true,
            spin: false,
            pool: false,
        }
    }
}

impl FromStr for Space {
    type Err = TuneError;

    /// A comma-separated list of dimensions: `inter`, `intra`, `spin`, `pool`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut space = Space {
            inter: false,
            intra: false,
            spin: false,
            pool: false,
        };
        for name in text.split(',').filter(|name| !name.trim().is_empty()) {
            match name.trim().parse::<Dimension>()? {
                Dimension::Inter => space.inter = true,
                Dimension::Intra => space.intra = true,
                Dimension::Spin => space.spin = true,
                Dimension::Pool => space.pool = true,
            }
        }
        if !(space.inter || space.intra || space.spin || space.pool) {
            return Err(TuneError::EmptySpace);
        }
        Ok(space)
    }
}

impl Space {
    /// Whether a dimension fixed when a run starts is searched: the search then rebuilds the
    /// run once per setting.
    pub(crate) fn rebuilds(self) -> bool {
        self.spin || self.pool
    }

    /// The grid: every searched count from `counts`, the others fixed at `start`'s.
    pub(crate) fn grid(self, start: Point, cpus: usize, max_threads: usize) -> Vec<Point> {
        let inters = match self.inter {
            true => counts(cpus, max_threads),
            false => vec![start.inter],
        };
        let intras = match self.intra {
            true => counts(cpus, max_threads),
            false => vec![start.intra],
        };
        inters
            .iter()
            .flat_map(|&inter| intras.iter().map(move |&intra| Point { inter, intra }))
            .collect()
    }

    /// The default configuration (one thread per CPU in each searched dimension, at most
    /// `max_threads`; `start`'s count in the others).
    pub(crate) fn default_point(self, start: Point, cpus: usize, max_threads: usize) -> Point {
        let per_cpu = cpus.clamp(1, max_threads.max(1));
        Point {
            inter: if self.inter { per_cpu } else { start.inter },
            intra: if self.intra { per_cpu } else { start.intra },
        }
    }
}

/// The counts searched in one dimension: powers of two up to twice `cpus`, and `cpus`
/// itself, none past `max_threads`, ascending.
pub(crate) fn counts(cpus: usize, max_threads: usize) -> Vec<usize> {
    let cpus = cpus.max(1);
    let top = cpus.saturating_mul(2).min(max_threads.max(1));
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |&n| n.checked_mul(2))
        .take_while(|&n| n <= top)
        .collect();
    if cpus <= top {
        counts.push(cpus);
    }
    counts.sort_unstable();
    counts.dedup();
    counts
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A small use of `from_str`.
    #[test]
    fn from_str_example() {
        use crate::tune::Space;
        let space: Space = "intra".parse().unwrap();
        assert!(space.intra && !space.inter && !space.rebuilds());
        let space: Space = "inter,intra,pool".parse().unwrap();
        assert!(space.pool && !space.spin && space.rebuilds());
    }

    /// A small use of `counts`.
    #[test]
    fn counts_example() {
        use crate::tune::Point;
        use crate::tune::Space;
        let start = Point { inter: 2, intra: 2 };
        let grid = Space::default().grid(start, 2, 128);
        assert_eq!(grid.len(), 9); // {1, 2, 4} x {1, 2, 4}
        assert!(Space::default()
            .grid(start, 6, 8)
            .iter()
            .all(|p| p.inter <= 8 && p.intra <= 8));
    }

    #[test]
    fn counts_are_powers_of_two_and_the_cpus_never_past_max_threads() {
        assert_eq!(counts(2, 128), [1, 2, 4]);
        assert_eq!(counts(6, 128), [1, 2, 4, 6, 8]);
        assert_eq!(counts(6, 5), [1, 2, 4]);
        assert_eq!(counts(2, 1), [1]);
        assert_eq!(counts(1, 128), [1, 2]);
    }

    #[test]
    fn spaces_parse_and_refuse_what_is_not_a_dimension() {
        assert_eq!("inter,intra".parse::<Space>().unwrap(), Space::default());
        let all: Space = "inter,intra,spin,pool".parse().unwrap();
        assert!(all.inter && all.intra && all.spin && all.pool);
        let settings_only: Space = "spin,pool".parse().unwrap();
        assert!(!settings_only.inter && !settings_only.intra && settings_only.rebuilds());
        let only_inter: Space = " inter ".parse().unwrap();
        assert_eq!((only_inter.inter, only_inter.intra), (true, false));
        let start = Point { inter: 3, intra: 5 };
        assert!(only_inter.grid(start, 2, 128).iter().all(|p| p.intra == 5));
        assert_eq!(
            only_inter.default_point(start, 2, 128),
            Point { inter: 2, intra: 5 }
        );
        for (text, message) in [
            ("inter,threads", "unknown dimension `threads`"),
            ("", "names no dimension"),
        ] {
            let error = text.parse::<Space>().unwrap_err().to_string();
            assert!(error.contains(message), "{text}: {error}");
        }
    }
}
