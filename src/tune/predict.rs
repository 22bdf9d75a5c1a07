//! `enginetop tune --cores N`: beyond this machine, the scaling simulation's predicted best
//! counts for a machine of `N` cores, from the op times and body splits the tuned run
//! measured (every op's time averaged over the whole search, its body split per execution,
//! so the counts the search visited do not skew it). A prediction, never a measurement: it
//! says so wherever it is printed, with the simulation's assumptions.
#![forbid(unsafe_code)]

use std::fmt;

use crate::analysis::ASSUMPTIONS;
use crate::workload::run::{DriverHandle, RunReport};

/// The predicted best counts for a machine of `cores` cores.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct PredictedForCores {
    /// The machine's cores.
    pub(crate) cores: usize,
    /// Inter-op workers.
    pub(crate) inter: usize,
    /// Intra-op threads.
    pub(crate) intra: usize,
    /// The predicted step, in milliseconds.
    pub(crate) step_ms: f64,
}

/// The predicted best for `cores` cores from `run` (the tuned run, driven through `handle`);
/// `None` for no cores.
pub(crate) fn predicted_for_cores(
    handle: &DriverHandle,
    run: &RunReport,
    cores: usize,
) -> Option<PredictedForCores> {
    let best = handle.predicted_for_cores(run, cores)?;
    Some(PredictedForCores {
        cores,
        inter: best.inter,
        intra: best.intra,
        step_ms: best.step_ms,
    })
}

impl fmt::Display for PredictedForCores {
    /// `predicted (not measured) for 16 cores: --inter 4 --intra 4, a 3.10 ms step (...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "predicted (simulated, not measured) for a machine of {} cores: --inter {} --intra {}, \
             a {:.2} ms step ({ASSUMPTIONS})",
            self.cores, self.inter, self.intra, self.step_ms
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::RuntimeConfig;
    use crate::workload::run::{Driver, RunHooks, RunLength};
    use crate::workload::{load_spec, Overrides};

    #[test]
    fn independent_serial_ops_predict_inter_op_workers_only() {
        // 16 independent folds: no op splits, so more intra-op threads never help (ties go
        // to fewer), and no pair within 8 cores beats the best.
        let set = Overrides::from_args(["ops=16", "width=16"]).unwrap();
        let graph = load_spec("embarrassing", &set).unwrap();
        let config = RuntimeConfig {
            inter_op_threads: 2,
            intra_op_threads: 1,
            ..Default::default()
        };
        let mut driver = Driver::new(graph, &config, &RunHooks::default()).unwrap();
        let handle = driver.handle();
        let report = driver.run(RunLength::Iterations(2), &mut |_| {}).unwrap();
        let best = predicted_for_cores(&handle, &report, 8).unwrap();
        assert_eq!((best.cores, best.intra), (8, 1), "{best:?}");
        assert!(best.inter <= 8);
        let one_core = predicted_for_cores(&handle, &report, 1).unwrap();
        assert_eq!((one_core.inter, one_core.intra), (1, 1));
        assert!(best.step_ms <= one_core.step_ms);
        assert!(best.step_ms > 0.0);
        let text = best.to_string();
        let flags = format!("--inter {} --intra 1", best.inter);
        assert!(
            text.contains("not measured") && text.contains(&flags),
            "{text}"
        );
        assert!(predicted_for_cores(&handle, &report, 0).is_none());
    }
}
