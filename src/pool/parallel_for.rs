//! PLACEHOLDER: parallel_for.
