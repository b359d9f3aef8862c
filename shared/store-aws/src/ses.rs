//! [`SesMailer`]: the mail port over Amazon SES (API v2 `SendEmail`, signed with SigV4
//! through [`SignedHttp`]), for the Lambda functions. The sender is the stack's
//! `MailFrom` parameter (`CONTINUITY_MAIL_FROM`), an identity verified in SES.

use async_trait::async_trait;
use domain::{Error, Result};
use ports::mail::{Mail, Mailer};
use serde_json::json;

use crate::signed::SignedHttp;

#[derive(Debug, Clone)]
pub struct SesMailer {
    http: SignedHttp,
    from: String,
}

impl SesMailer {
    /// A mailer sending as `from` through `http` (the SES v2 endpoint, service `ses`).
    pub fn new(http: SignedHttp, from: &str) -> Self {
        Self { http, from: from.to_owned() }
    }

    /// The `SendEmail` body of `mail`.
    pub fn request(&self, mail: &Mail) -> serde_json::Value {
        json!({
            "FromEmailAddress": self.from,
            "Destination": {"ToAddresses": [mail.to]},
            "Content": {"Simple": {
                "Subject": {"Data": mail.subject, "Charset": "UTF-8"},
                "Body": {"Text": {"Data": mail.text, "Charset": "UTF-8"}},
            }},
        })
    }
}

#[async_trait]
impl Mailer for SesMailer {
    async fn send(&self, mail: &Mail) -> Result<()> {
        let body = serde_json::to_vec(&self.request(mail)).map_err(Error::internal)?;
        let (status, answer) =
            self.http.send("POST", "/v2/email/outbound-emails", "application/json", body, &[400, 403, 404]).await?;
        if (200..300).contains(&status) {
            return Ok(());
        }
        // A rejected message (unverified sender, the sandbox's unverified recipient, a
        // suppressed address) is refused for good: trying again sends nothing.
        let why = answer.get("message").or_else(|| answer.get("Message")).and_then(|m| m.as_str()).unwrap_or("refused");
        Err(Error::invalid(format!("SES refused the message ({status}): {why}")))
    }

    fn name(&self) -> &'static str {
        "ses"
    }
}
