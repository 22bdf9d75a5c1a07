//! PLACEHOLDER: runtime configuration (defaults <- env vars <- CLI flags).
