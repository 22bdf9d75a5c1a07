//! An error and its causes on one line, as anyhow's `{:#}` prints them, for the library's
//! own messages (a run's op failure, a benchmark's failure) that would otherwise keep only
//! the top message and lose the cause that says what went wrong underneath.
#![forbid(unsafe_code)]

use std::error::Error;

/// `error`'s message, then each cause's, `: `-separated.
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
/// assert_eq!(enginetop::error_chain::text(&io), "no such file");
/// ```
pub fn text(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("reading the weights")]
    struct Reading(#[source] std::io::Error);

    #[test]
    fn every_cause_follows_its_error() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        assert_eq!(
            super::text(&Reading(io)),
            "reading the weights: no such file"
        );
    }
}
