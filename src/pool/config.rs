//! PLACEHOLDER: pool configuration.
