//! The mail port: a message reaches its one recipient once, from the mailer's sender,
//! with its subject and text intact (non-ASCII, a line that starts with a dot, a long
//! line); a message the far side refuses for good is `INVALID_REQUEST` with its reason.
//!
//! Each backend's fixture reads what arrived its own way: the SMTP server the test runs
//! (embedded), moto's record of SES's sent messages (AWS).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use domain::ErrorCode;
use ports::mail::{Mail, Mailer};

/// One message as it arrived, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrived {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    pub text: String,
}

/// Reads every message that arrived so far.
pub type Inbox = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Vec<Arrived>> + Send>> + Send + Sync>;

pub struct MailFixture {
    pub mailer: Arc<dyn Mailer>,
    /// The mailer's sender.
    pub from: String,
    pub inbox: Inbox,
    /// A mailer and a message the far side refuses for good (a rejected recipient, an
    /// unverified sender).
    pub refused: (Arc<dyn Mailer>, Mail),
}

fn fresh_address() -> String {
    let n: u64 = rand::random();
    format!("ops-{n:016x}@example.com")
}

pub async fn delivers_a_message_intact(f: MailFixture) {
    let to = fresh_address();
    let long = "word ".repeat(60);
    let text = format!("Proposal «Renewal terms» waits — score 0.62.\n.a line that starts with a dot\n{long}\nlast line");
    let mail = Mail::new(&to, "Waiting for you: Renewal terms für ACME", &text).unwrap();
    f.mailer.send(&mail).await.unwrap();
    let arrived: Vec<Arrived> = (f.inbox)().await.into_iter().filter(|m| m.to.contains(&to)).collect();
    assert_eq!(arrived.len(), 1, "once: {arrived:?}");
    let m = &arrived[0];
    assert_eq!(m.to, vec![to.clone()], "to its recipient alone");
    assert_eq!(m.from, f.from);
    assert_eq!(m.subject, "Waiting for you: Renewal terms für ACME");
    assert_eq!(m.text.replace("\r\n", "\n").trim_end(), text, "the text intact");
}

pub async fn refusals_are_final_with_a_reason(f: MailFixture) {
    let (mailer, mail) = f.refused;
    let e = mailer.send(&mail).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest, "{e}");
    assert!(e.message.contains("refused"), "{e}");
    assert!(!(f.inbox)().await.iter().any(|m| m.to.contains(&mail.to)), "nothing arrived");
}
