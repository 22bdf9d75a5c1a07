//! An error and its causes on one line, as anyhow's `{:#}` prints them, for the library's
//! own messages (a run's op failure, a benchmark's failure) that would otherwise keep only
//! the top message and lose the cause that says what went wrong underneath; and [`Cut`], how
//! an error quotes a user's text that may be arbitrarily long.
//!
//! For [`text`] to name each cause once, an error whose message already quotes its cause does
//! not also return it from `source()` (it returns the cause's own source, or nothing).
#![forbid(unsafe_code)]

use std::error::Error;
use std::fmt;

/// The most characters of a user's text an error message quotes.
pub const CUT_AT_CHARS: usize = 200;

/// A user's text (a name, a value) as an error message quotes it: whole up to
/// [`CUT_AT_CHARS`] characters; a longer one cut there, with an ellipsis and its length, so a
/// 900 KB name does not fill the terminal. `{}` writes it as is, `{:?}` quoted and escaped.
///
/// ```
/// use enginetop::error_chain::Cut;
/// assert_eq!(format!("`{}`", Cut("relu")), "`relu`");
/// let long = "x".repeat(1000);
/// let shown = format!("{:?}", Cut(&long));
/// assert!(shown.ends_with("xx\"… (1000 characters)"));
/// assert_eq!(shown.matches('x').count(), 200);
/// ```
#[derive(Clone, Copy)]
pub struct Cut<'a>(pub &'a str);

impl Cut<'_> {
    /// The text up to the cut, and the whole text's length in characters if it was cut.
    fn parts(&self) -> (&str, Option<usize>) {
        match self.0.char_indices().nth(CUT_AT_CHARS) {
            None => (self.0, None),
            Some((end, _)) => (&self.0[..end], Some(self.0.chars().count())),
        }
    }
}

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (whole, None) => f.write_str(whole),
            (head, Some(chars)) => write!(f, "{head}… ({chars} characters)"),
        }
    }
}

impl fmt::Debug for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (whole, None) => write!(f, "{whole:?}"),
            (head, Some(chars)) => write!(f, "{head:?}… ({chars} characters)"),
        }
    }
}

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
