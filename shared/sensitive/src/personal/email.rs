//! E-mail addresses. Any address of a person is personal data; one at a free-mail provider
//! is a *private* address (rule `private-email-address`), usually more sensitive than a work
//! address (rule `email-address`).
//!
//! Not reported:
//! - role accounts ([`ROLE_ACCOUNTS`]: `support@`, `noreply@`, `security@`…), which name a
//!   function rather than a person, with or without a `+tag`;
//! - machine identities ([`MACHINE_DOMAINS`]: Google service accounts, GitHub noreply, SSH
//!   algorithm names like `chacha20-poly1305@openssh.com`) and message ids (a local part of
//!   [`MIN_MESSAGE_ID`] or more generated characters);
//! - look-alikes: `user@host` without a dot-TLD, `@mentions`, SSH remotes
//!   (`git@github.com:org/repo.git`), image names (`icon@2x.png`), package specifiers
//!   (`@scope/pkg@1.2.3`), the `user@` of a URL (`https://user@host/`).

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::rules::{EMAIL_ADDRESS, PRIVATE_EMAIL_ADDRESS};
use crate::text::{LINE_LIMIT, before, under, word_like};

static EMAIL: Lazy = Lazy::new(|| {
    Re::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+")
});

/// Local parts that name a function, not a person.
const ROLE_ACCOUNTS: &[&str] = &[
    "abuse",
    "accounting",
    "accounts",
    "admin",
    "administrator",
    "alerts",
    "billing",
    "careers",
    "compliance",
    "contact",
    "customerservice",
    "devops",
    "do-not-reply",
    "donotreply",
    "dpo",
    "enquiries",
    "feedback",
    "finance",
    "gdpr",
    "hello",
    "help",
    "helpdesk",
    "hostmaster",
    "hr",
    "info",
    "inquiries",
    "it",
    "jobs",
    "legal",
    "mailer-daemon",
    "marketing",
    "media",
    "newsletter",
    "no-reply",
    "noreply",
    "notifications",
    "office",
    "ops",
    "orders",
    "partners",
    "postmaster",
    "press",
    "privacy",
    "recruiting",
    "root",
    "sales",
    "security",
    "service",
    "support",
    "team",
    "webmaster",
];

/// Free-mail providers: exact domains.
const FREE_MAIL: &[&str] = &[
    "gmail.com",
    "googlemail.com",
    "outlook.com",
    "live.com",
    "msn.com",
    "icloud.com",
    "me.com",
    "mac.com",
    "proton.me",
    "protonmail.com",
    "protonmail.ch",
    "pm.me",
    "aol.com",
    "mail.ru",
    "inbox.ru",
    "list.ru",
    "bk.ru",
    "zoho.com",
    "zohomail.com",
    "fastmail.com",
    "fastmail.fm",
    "hey.com",
    "tutanota.com",
    "tutanota.de",
    "tuta.io",
    "tutamail.com",
    "mail.com",
    "ymail.com",
    "rocketmail.com",
    "web.de",
    "t-online.de",
    "freenet.de",
    "free.fr",
    "orange.fr",
    "laposte.net",
    "libero.it",
    "virgilio.it",
    "qq.com",
    "163.com",
    "126.com",
    "naver.com",
    "daum.net",
    "rediffmail.com",
    "seznam.cz",
    "wp.pl",
    "o2.pl",
    "interia.pl",
    "onet.pl",
    "bigpond.com",
    "comcast.net",
    "verizon.net",
    "att.net",
    "sbcglobal.net",
    "btinternet.com",
    "sky.com",
    "virginmedia.com",
    "ya.ru",
    "rambler.ru",
    "hushmail.com",
    "gmx.net",
    "mailbox.org",
    "posteo.de",
    "posteo.net",
];

/// Free-mail providers present under many country domains (`yahoo.co.uk`, `gmx.de`).
const FREE_MAIL_ANY_TLD: &[&str] = &["yahoo", "hotmail", "outlook", "live", "gmx", "yandex", "aim"];

/// Domains of machine identities, matched with their subdomains.
const MACHINE_DOMAINS: &[&str] = &["gserviceaccount.com", "noreply.github.com", "openssh.com", "libssh.org"];

/// A local part this long and not made of words is a generated message id.
const MIN_MESSAGE_ID: usize = 24;

const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "avif", "heic"];

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    for m in EMAIL.find_iter(text) {
        let Some((local, domain)) = m.as_str().split_once('@') else { continue };
        let trimmed = local.trim_start_matches('.');
        let start = m.start() + local.len() - trimmed.len();
        let domain = domain.to_ascii_lowercase();
        if !address_ok(trimmed, &domain) || looks_like_other(text, start, m.end()) || role_account(trimmed) {
            continue;
        }
        let message_id = trimmed.len() >= MIN_MESSAGE_ID && !word_like(trimmed);
        if message_id || under(&domain, MACHINE_DOMAINS) || domain.ends_with(".localhost") {
            continue;
        }
        let rule = if free_mail(&domain) { &PRIVATE_EMAIL_ADDRESS } else { &EMAIL_ADDRESS };
        out.push(rule.at(start, m.end()));
    }
}

/// A local part without empty dot-atoms, and a domain whose last label is a real-looking TLD
/// (letters) and not an image extension, nor a `@2x` scale suffix.
fn address_ok(local: &str, domain: &str) -> bool {
    let tld = domain.rsplit('.').next().unwrap_or_default();
    let first = domain.split('.').next().unwrap_or_default();
    let scale = first.len() == 2 && first.ends_with('x') && first.starts_with(|c: char| c.is_ascii_digit());
    !local.is_empty()
        && !local.ends_with('.')
        && !local.contains("..")
        && (2..=24).contains(&tld.len())
        && tld.bytes().all(|b| b.is_ascii_alphabetic())
        && !IMAGE_EXTENSIONS.contains(&tld)
        && !scale
}

/// An SSH remote (`git@host:path`) or the userinfo of a URL (`scheme://user@host`).
fn looks_like_other(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    let scp_path = b.get(end) == Some(&b':') && b.get(end + 1).is_some_and(|c| !c.is_ascii_whitespace());
    let back = before(text, start, LINE_LIMIT);
    let token = back.rsplit(|c: char| c.is_whitespace() || "\"'<>(".contains(c)).next().unwrap_or_default();
    let in_url = token.contains("://");
    scp_path || in_url
}

fn role_account(local: &str) -> bool {
    let name = local.split('+').next().unwrap_or_default().to_ascii_lowercase();
    ROLE_ACCOUNTS.contains(&name.as_str())
}

fn free_mail(domain: &str) -> bool {
    let provider = domain.split('.').next().unwrap_or_default();
    FREE_MAIL.contains(&domain) || (FREE_MAIL_ANY_TLD.contains(&provider) && domain.matches('.').count() <= 2)
}
