//! [`SmtpMailer`]: the mail port over SMTP (lettre), for `continuity serve`.
//!
//! Configured by the environment:
//! - `CONTINUITY_SMTP_URL`: `smtp://[user:password@]host[:port]` — STARTTLS required
//!   (port 587 by default); `smtps://…` — TLS from the first byte (465 by default);
//!   `smtp://…?tls=none` — plain text, only to a loopback host (a development relay).
//! - `CONTINUITY_MAIL_FROM`: the sender address (required with the URL).
//! - `CONTINUITY_SMTP_CA_FILE`: a PEM certificate to trust beside the system's roots
//!   (a relay with a private CA).
//!
//! The password never reaches a log line (`Debug` shows the host alone).

use std::time::Duration;

use async_trait::async_trait;
use domain::{Error, Result};
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use ports::mail::{Mail, Mailer, check_address};

/// How long one message may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    host: String,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer").field("host", &self.host).finish_non_exhaustive()
    }
}

fn bad(why: impl Into<String>) -> Error {
    Error::invalid_field("CONTINUITY_SMTP_URL", why.into())
}

impl SmtpMailer {
    /// The mailer the environment configures, or `None` without `CONTINUITY_SMTP_URL`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad URL, a missing or bad sender, or an unreadable CA file.
    pub fn from_env() -> Result<Option<Self>> {
        let Some(url) = std::env::var("CONTINUITY_SMTP_URL").ok().filter(|u| !u.trim().is_empty()) else { return Ok(None) };
        let from = std::env::var("CONTINUITY_MAIL_FROM")
            .map_err(|_| Error::invalid_field("CONTINUITY_MAIL_FROM", "the sender address, required with CONTINUITY_SMTP_URL"))?;
        let ca = match std::env::var("CONTINUITY_SMTP_CA_FILE").ok().filter(|p| !p.is_empty()) {
            Some(path) => Some(
                std::fs::read(&path)
                    .map_err(|e| Error::invalid_field("CONTINUITY_SMTP_CA_FILE", format!("cannot read {path}: {e}")))?,
            ),
            None => None,
        };
        Self::new(&url, &from, ca.as_deref()).map(Some)
    }

    /// A mailer for `url` (as above) sending as `from`, trusting `ca` (PEM) beside the
    /// system's roots.
    ///
    /// # Errors
    /// `INVALID_REQUEST` as for [`Self::from_env`].
    pub fn new(url: &str, from: &str, ca: Option<&[u8]>) -> Result<Self> {
        check_address("CONTINUITY_MAIL_FROM", from)?;
        let parsed = url::Url::parse(url.trim()).map_err(|e| bad(format!("not a URL: {e}")))?;
        let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("no host"))?.trim_matches(['[', ']']).to_owned();
        let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        let plain = parsed.query_pairs().any(|(k, v)| k == "tls" && v == "none");
        let tls_params = || -> Result<TlsParameters> {
            let mut b = TlsParameters::builder(host.clone());
            if let Some(pem) = ca {
                b = b.add_root_certificate(Certificate::from_pem(pem).map_err(|e| bad(format!("the CA file: {e}")))?);
            }
            b.build_rustls().map_err(|e| bad(format!("TLS: {e}")))
        };
        let (tls, default_port) = match (parsed.scheme(), plain) {
            ("smtps", false) => (Tls::Wrapper(tls_params()?), 465),
            ("smtp", false) => (Tls::Required(tls_params()?), 587),
            ("smtp", true) if loopback => (Tls::None, 25),
            ("smtp", true) => return Err(bad("tls=none only to a loopback host; a relay elsewhere needs STARTTLS or smtps://")),
            _ => return Err(bad("smtp:// (STARTTLS) or smtps:// (TLS)")),
        };
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.clone())
            .port(parsed.port().unwrap_or(default_port))
            .tls(tls)
            .timeout(Some(TIMEOUT));
        if !parsed.username().is_empty() {
            let decode = |s: &str| percent_decode(s);
            b = b.credentials(Credentials::new(decode(parsed.username()), decode(parsed.password().unwrap_or_default())));
        }
        let from: Mailbox = from.parse().map_err(|e| Error::invalid_field("CONTINUITY_MAIL_FROM", format!("{e}")))?;
        Ok(Self { transport: b.build(), from, host })
    }
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: &Mail) -> Result<()> {
        let to: Mailbox = mail.to.parse().map_err(|e| Error::invalid_field("to", format!("{e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject.clone())
            .header(ContentType::TEXT_PLAIN)
            .body(mail.text.clone())
            .map_err(|e| Error::invalid(format!("the message: {e}")))?;
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            // 5xx: the server refused this message for good; anything else may pass later.
            Err(e) if e.is_permanent() => Err(Error::invalid(format!("the mail server refused the message: {e}"))),
            Err(e) => Err(Error::unavailable(format!("the mail server at {} did not take the message: {e}", self.host))),
        }
    }

    fn name(&self) -> &'static str {
        "smtp"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        SmtpMailer::new("smtp://user:p%40ss@mail.example.com", "ops@example.com", None).unwrap();
        SmtpMailer::new("smtps://mail.example.com", "ops@example.com", None).unwrap();
        SmtpMailer::new("smtp://127.0.0.1:1025?tls=none", "ops@example.com", None).unwrap();
        let e = SmtpMailer::new("smtp://mail.example.com?tls=none", "ops@example.com", None).unwrap_err();
        assert!(e.message.contains("loopback"), "{e}");
        let e = SmtpMailer::new("http://mail.example.com", "ops@example.com", None).unwrap_err();
        assert!(e.message.contains("smtps://"), "{e}");
        let e = SmtpMailer::new("smtp://mail.example.com", "not an address", None).unwrap_err();
        assert!(e.message.contains("CONTINUITY_MAIL_FROM"), "{e}");
        assert_eq!(percent_decode("p%40ss+x"), "p@ss+x");
        let m = SmtpMailer::new("smtp://user:secret@mail.example.com", "ops@example.com", None).unwrap();
        assert!(!format!("{m:?}").contains("secret"));
    }
}
