//! PLACEHOLDER: barrier.
