//! The mail port: plain-text e-mail to one address, for notification channels of kind
//! `email`. SMTP on `serve` (`store_embedded::SmtpMailer`), Amazon SES on AWS
//! (`store_aws::SesMailer`). A deployment without mail configured has none
//! (`Backend::mailer` is `None`), and e-mail channels are refused with the reason.

use async_trait::async_trait;
use domain::{Error, Result};

/// One message. The sender is the mailer's own (its configured address).
#[derive(Clone, PartialEq, Eq)]
pub struct Mail {
    pub to: String,
    /// One line, at most [`MAX_SUBJECT`] characters.
    pub subject: String,
    /// Plain text (UTF-8), lines separated by `\n`.
    pub text: String,
}

impl std::fmt::Debug for Mail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address is personal data: never in a log line.
        f.debug_struct("Mail").field("to", &"[address]").field("subject", &self.subject).finish_non_exhaustive()
    }
}

/// The longest subject sent.
pub const MAX_SUBJECT: usize = 200;
/// The longest text sent.
pub const MAX_TEXT: usize = 20_000;

/// Checks an address the way every mailer needs it: `local@domain`, no spaces, no
/// control characters, no display name, at most 254 characters.
///
/// # Errors
/// `INVALID_REQUEST` naming `field`.
pub fn check_address(field: &str, address: &str) -> Result<()> {
    let bad = || Error::invalid_field(field, "an e-mail address (name@example.com)");
    let (local, domain) = address.rsplit_once('@').ok_or_else(bad)?;
    let ok = !local.is_empty()
        && local.len() <= 64
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && address.len() <= 254
        && !address.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';' | '"' | '(' | ')'))
        && address.matches('@').count() == 1;
    if ok { Ok(()) } else { Err(bad()) }
}

impl Mail {
    /// A message to `to` with the subject on one line and both cut to their limits.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad address.
    pub fn new(to: &str, subject: &str, text: &str) -> Result<Self> {
        check_address("to", to)?;
        let one_line: String = subject.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_SUBJECT).collect();
        let text: String = text.chars().filter(|c| *c == '\n' || !c.is_control()).take(MAX_TEXT).collect();
        Ok(Self { to: to.to_owned(), subject: one_line.trim().to_owned(), text })
    }
}

#[async_trait]
pub trait Mailer: Send + Sync {
    /// Sends `mail`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the mail server or service cannot take it now (try again);
    /// `INVALID_REQUEST` when it refuses this message for good (a rejected address, an
    /// unverified sender).
    async fn send(&self, mail: &Mail) -> Result<()>;

    /// What sends (`smtp`, `ses`), for start-up messages.
    fn name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_messages_are_checked() {
        for good in ["ops@example.com", "a.b+c@mail.example.co.uk"] {
            check_address("to", good).unwrap();
        }
        for bad in [
            "",
            "ops",
            "@example.com",
            "ops@",
            "ops@example",
            "Ops <ops@example.com>",
            "a b@example.com",
            "a@b@c.com",
            "ops@example.com\r\nBcc: x@y.z",
        ] {
            assert!(check_address("to", bad).is_err(), "{bad:?}");
        }
        let m = Mail::new("ops@example.com", "Waiting\r\nBcc: x@evil.example", "line 1\nline 2\u{7}").unwrap();
        assert_eq!(m.subject, "Waiting  Bcc: x@evil.example", "no header injection through the subject");
        assert_eq!(m.text, "line 1\nline 2");
        assert!(!format!("{m:?}").contains("ops@"), "the address never prints");
    }
}
