//! PLACEHOLDER: the work-stealing pools are being written.
pub use super::simple::SimplePool as EigenPool;
pub use super::simple::SimplePool as ChaseLevPool;
