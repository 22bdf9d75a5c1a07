//! [`Setting`]: what a run fixes when it builds its pools (the pool kind, whether idle
//! workers spin), and the settings a [`Space`] visits, one rebuilt run each.
#![forbid(unsafe_code)]

use std::fmt;

use super::space::Space;
use crate::config::{PoolKind, RuntimeConfig};

/// How a run's pools are built: fixed until the run is rebuilt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Setting {
    /// The pool kind of the engine's workers and of the intra-op pool.
    pub(crate) pool: PoolKind,
    /// Whether one idle worker spins before parking.
    pub(crate) spin: bool,
}

impl Setting {
    /// `config`'s setting.
    pub(crate) fn of(config: &RuntimeConfig) -> Setting {
        Setting {
            pool: config.pool_kind,
            spin: config.allow_spinning,
        }
    }

    /// `config` with this setting.
    pub(crate) fn apply(self, config: &RuntimeConfig) -> RuntimeConfig {
        RuntimeConfig {
            pool_kind: self.pool,
            allow_spinning: self.spin,
            ..config.clone()
        }
    }

    /// `--spin`'s value.
    pub(crate) fn spin_flag(self) -> &'static str {
        match self.spin {
            true => "on",
            false => "off",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pool {} spin {}", self.pool, self.spin_flag())
    }
}

impl Space {
    /// The settings searched, `start` first (the run's own: the default's), then every pool
    /// kind and spin value the space varies, pool kinds in [`PoolKind::ALL`]'s order.
    pub(crate) fn settings(self, start: Setting) -> Vec<Setting> {
        let pools = match self.pool {
            true => PoolKind::ALL.to_vec(),
            false => vec![start.pool],
        };
        let spins = match self.spin {
            true => vec![start.spin, !start.spin],
            false => vec![start.spin],
        };
        let mut settings = vec![start];
        for &pool in &pools {
            for &spin in &spins {
                let setting = Setting { pool, spin };
                if setting != start {
                    settings.push(setting);
                }
            }
        }
        settings
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    /// A small use of `settings`.
    #[test]
    fn settings_example() {
        use crate::pool::PoolKind;
        use crate::tune::{Setting, Space};
        let start = Setting {
            pool: PoolKind::Eigen,
            spin: true,
        };
        assert_eq!(Space::default().settings(start), [start]);
        let all = "spin,pool".parse::<Space>().unwrap().settings(start);
        assert_eq!((all.len(), all[0]), (6, start));
    }
}
