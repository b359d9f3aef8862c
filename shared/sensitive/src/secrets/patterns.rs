//! Provider secrets as one table: tokens recognisable by their own shape (a fixed prefix and
//! length, like `ghp_…` or `sk_live_…`), and provider secrets that are only recognisable by
//! the credential word in front of them (a 32-hex Datadog key after `DD_API_KEY`).
//!
//! Every row is matched the same way, which keeps each rule a line of data:
//! 1. the regex runs over the original text; the value is capture group 1 if the regex has
//!    one, else the whole match, minus a trailing `.` (the end of a sentence);
//! 2. the value must not be glued to a letter or digit on its right, nor on its left unless
//!    the regex says itself what precedes it (a capture group); its length must be in `len`
//!    (regexes end in a greedy class, so a longer run is rejected, not cut);
//! 3. if `context` is not empty, one of its words must stand on the same line within
//!    [`WINDOW`] bytes before the value, with nothing between them that ends an assignment
//!    (`;`, `,`, `&`, `|`): `SignedHeaders=…;x-amz-security-token, Signature=…` names a
//!    header, it does not give its value;
//! 4. `check` has the last word (checksums of shape, randomness, line context).

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::*;
use crate::text::{
    alnum_at, alnum_before, before, byte_before, has_keyword, last_keyword_end, line, line_end, line_start, mixed_case,
    random_looking,
};
use std::ops::{Range, RangeInclusive};

/// How far before a value its context word may stand.
pub(crate) const WINDOW: usize = 48;

struct Pattern {
    rule: &'static Rule,
    /// Lower-case keywords that wake a row whose regex has no literal to search for (see
    /// [`crate::engine`]); empty for rows that start with a literal.
    needles: &'static [&'static str],
    regex: &'static str,
    len: RangeInclusive<usize>,
    context: &'static [&'static str],
    check: fn(&Ctx<'_>, Range<usize>) -> bool,
}

/// A row that starts with a literal, with no context and no extra check.
const fn token(rule: &'static Rule, regex: &'static str, len: RangeInclusive<usize>) -> Pattern {
    Pattern { rule, needles: &[], regex, len, context: &[], check: always }
}

/// A row that starts with a literal, with an extra check.
const fn checked(
    rule: &'static Rule,
    regex: &'static str,
    len: RangeInclusive<usize>,
    check: fn(&Ctx<'_>, Range<usize>) -> bool,
) -> Pattern {
    Pattern { rule, needles: &[], regex, len, context: &[], check }
}

/// A row whose value counts only after one of `context` (which also serves as needles);
/// the value must look generated and not be a placeholder.
const fn in_context(
    rule: &'static Rule,
    context: &'static [&'static str],
    regex: &'static str,
    len: RangeInclusive<usize>,
) -> Pattern {
    Pattern { rule, needles: context, regex, len, context, check: generated }
}

const AWS_SECRET_WORDS: &[&str] = &[
    "aws_secret_access_key",
    "secret_access_key",
    "secretaccesskey",
    "secret access key",
    "aws secret",
    "aws_secret",
    "aws-secret",
    "awssecret",
];

/// An AWS secret key is named, or stands next to an access key id.
const AWS_SECRET_NEEDLES: &[&str] =
    &["secret_access", "secretaccess", "secret access", "aws secret", "aws_secret", "aws-secret", "awssecret", "akia", "asia"];

const HEROKU_WORDS: &[&str] =
    &["heroku_api_key", "heroku_api_token", "heroku api key", "heroku_auth_token", "heroku_token", "heroku token", "heroku_key"];
const DATADOG_WORDS: &[&str] = &[
    "dd_api_key",
    "dd_app_key",
    "dd_application_key",
    "dd-api-key",
    "dd-application-key",
    "datadog_api_key",
    "datadog_app_key",
    "datadog api key",
    "datadog app key",
    "datadog_key",
    "datadog key",
];
const OKTA_WORDS: &[&str] =
    &["okta_api_token", "okta_token", "okta api token", "okta_api_key", "okta token", "okta_client_token"];
const TWILIO_WORDS: &[&str] = &["twilio_auth_token", "twilio auth token", "twilio_token", "twilio token", "twilio_secret"];
const ATLASSIAN_WORDS: &[&str] = &[
    "jira_api_token",
    "jira_token",
    "jira api token",
    "jira token",
    "atlassian_api_token",
    "atlassian_token",
    "atlassian api token",
    "confluence_api_token",
    "confluence_token",
    "confluence api token",
];
const BITBUCKET_WORDS: &[&str] = &[
    "bitbucket_app_password",
    "bitbucket app password",
    "bitbucket_password",
    "bitbucket_token",
    "bitbucket_app_pass",
    "bitbucket_api_token",
];
const AZURE_STORAGE_WORDS: &[&str] = &[
    "accountkey",
    "account_key",
    "storage_key",
    "storagekey",
    "storage account key",
    "azure_storage_key",
    "storage_account_key",
];
const AZURE_SECRET_WORDS: &[&str] = &[
    "azure_client_secret",
    "azure client secret",
    "arm_client_secret",
    "azure_secret",
    "azure_ad_client_secret",
    "aad_client_secret",
];
const SESSION_WORDS: &[&str] =
    &["session_token", "sessiontoken", "security_token", "x-amz-security-token", "session token", "aws_security_token"];

const UUID: &str = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

static PATTERNS: &[Pattern] = &[
    checked(
        &AWS_ACCESS_KEY_ID,
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]+",
        20..=20,
        aws_key_id,
    ),
    Pattern {
        rule: &AWS_SECRET_ACCESS_KEY,
        needles: AWS_SECRET_NEEDLES,
        regex: r"[A-Za-z0-9/+]{40,}",
        len: 40..=40,
        context: &[],
        check: aws_secret,
    },
    token(&AWS_SESSION_TOKEN, r"(?:IQoJb3JpZ2luX2Vj|FwoGZXIvYXdzE)[A-Za-z0-9/+=]+", 100..=4096),
    in_context(&AWS_SESSION_TOKEN, SESSION_WORDS, r"[A-Za-z0-9/+%]{100,}={0,2}", 100..=4096),
    token(&GCP_API_KEY, r"AIza[A-Za-z0-9_-]+", 39..=39),
    in_context(&AZURE_STORAGE_KEY, AZURE_STORAGE_WORDS, r"[A-Za-z0-9+/]{86,}==", 88..=88),
    checked(&AZURE_SAS, r"[?&;]sig=([A-Za-z0-9%+/=]+)", 40..=200, azure_sas),
    token(&AZURE_SAS, r"SharedAccessKey=([A-Za-z0-9+/]+={0,2})", 44..=44),
    checked(&AZURE_CLIENT_SECRET, r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]+", 37..=40, azure_client_secret),
    in_context(&AZURE_CLIENT_SECRET, AZURE_SECRET_WORDS, r"[A-Za-z0-9_~.-]{30,}", 30..=44),
    checked(&GITHUB_TOKEN, r"gh[pousr]_[A-Za-z0-9]+", 40..=255, generated),
    checked(&GITHUB_TOKEN, r"github_pat_[A-Za-z0-9_]+", 82..=255, generated),
    checked(
        &GITLAB_TOKEN,
        r"(?:glpat|gldt|glrt|glptt|glcbt|gloas|glsoat|glffct|glimt|glagent|glft)-[A-Za-z0-9_.-]+",
        25..=255,
        generated,
    ),
    checked(&GITLAB_TOKEN, r"GR1348941[A-Za-z0-9_-]+", 29..=64, generated),
    checked(&BITBUCKET_APP_PASSWORD, r"ATBB[A-Za-z0-9_=.-]+", 32..=128, generated),
    in_context(&BITBUCKET_APP_PASSWORD, BITBUCKET_WORDS, r"[A-Za-z0-9_-]{18,}", 18..=128),
    checked(&SLACK_TOKEN, r"xox[baprse]-[A-Za-z0-9-]+", 20..=255, slack),
    checked(&SLACK_TOKEN, r"xapp-[0-9]-[A-Za-z0-9-]+", 30..=255, slack),
    checked(
        &SLACK_WEBHOOK,
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]+",
        40..=300,
        slack_webhook,
    ),
    checked(
        &DISCORD_WEBHOOK,
        r"(?:https?://)?(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]+",
        60..=300,
        discord_webhook,
    ),
    checked(
        &TEAMS_WEBHOOK,
        r"(?:https?://)?[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]+",
        60..=500,
        teams_webhook,
    ),
    Pattern {
        rule: &DISCORD_BOT_TOKEN,
        needles: &["discord", "bot "],
        regex: r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}",
        len: 59..=76,
        context: &["discord", "bot"],
        check: generated,
    },
    checked(&TELEGRAM_BOT_TOKEN, r"(?:[^A-Za-z0-9]|bot)?([0-9]{8,10}:[A-Za-z0-9_-]+)", 44..=46, telegram),
    checked(&STRIPE_SECRET_KEY, r"[rs]k_(?:live|test)_[A-Za-z0-9]+", 28..=255, generated),
    checked(&STRIPE_WEBHOOK_SECRET, r"whsec_[A-Za-z0-9+/=]+", 38..=255, generated),
    checked(&SQUARE_TOKEN, r"sq0(?:atp|csp)-[A-Za-z0-9_-]+", 29..=100, generated),
    checked(&SQUARE_TOKEN, r"EAAA[A-Za-z0-9_+=-]+", 60..=100, generated),
    token(&BRAINTREE_TOKEN, r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}", 60..=80),
    checked(&SHOPIFY_TOKEN, r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]+", 38..=38, generated),
    token(
        &PLAID_ACCESS_TOKEN,
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        40..=60,
    ),
    checked(&OPENAI_API_KEY, r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]+", 40..=400, generated),
    checked(&OPENAI_API_KEY, r"sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]+", 40..=400, generated),
    checked(&ANTHROPIC_API_KEY, r"sk-ant-(?:api03|admin01|oat01|ort01)-[A-Za-z0-9_-]+", 90..=300, generated),
    checked(&HUGGINGFACE_TOKEN, r"hf_[A-Za-z0-9]+", 37..=37, |ctx, r| ctx.text.get(r).is_some_and(mixed_case)),
    checked(&NPM_TOKEN, r"npm_[A-Za-z0-9]+", 40..=40, generated),
    token(&PYPI_TOKEN, r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]+", 70..=400),
    // An age identity: bech32 of the X25519 key (58 characters of its alphabet).
    token(&AGE_SECRET_KEY, r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", 74..=74),
    checked(&DOCKERHUB_TOKEN, r"dckr_(?:pat|oat)_[A-Za-z0-9_-]+", 36..=100, generated),
    token(&DIGITALOCEAN_TOKEN, r"do[opr]_v1_[a-f0-9]+", 71..=71),
    checked(&VAULT_TOKEN, r"hv[sbr]\.[A-Za-z0-9_-]+", 28..=512, vault),
    checked(&HEROKU_API_KEY, r"HRKU-[A-Za-z0-9_-]+", 55..=80, generated),
    in_context(&HEROKU_API_KEY, HEROKU_WORDS, UUID, 36..=36),
    checked(&TWILIO_API_KEY, r"SK[0-9a-fA-F]+", 34..=34, generated),
    in_context(&TWILIO_AUTH_TOKEN, TWILIO_WORDS, r"[0-9a-f]{32,}", 32..=32),
    token(&SENDGRID_API_KEY, r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+", 69..=69),
    checked(&MAILGUN_API_KEY, r"key-[0-9a-f]+", 36..=36, generated),
    checked(&MAILCHIMP_API_KEY, r"[0-9a-f]{32}-us[0-9]+", 35..=37, generated),
    checked(&ATLASSIAN_API_TOKEN, r"ATATT3[A-Za-z0-9_=-]+", 100..=400, generated),
    in_context(&ATLASSIAN_API_TOKEN, ATLASSIAN_WORDS, r"[A-Za-z0-9]{24,}", 24..=24),
    checked(&LINEAR_API_KEY, r"lin_(?:api|oauth)_[A-Za-z0-9]+", 48..=80, generated),
    token(&SENTRY_DSN, r"https?://([0-9a-f]{32})(?::[0-9a-f]{32})?@[A-Za-z0-9.-]+(?::[0-9]+)?/[0-9]+", 32..=32),
    checked(&SENTRY_AUTH_TOKEN, r"sntry[su]_[A-Za-z0-9+/=_]+", 47..=400, generated),
    checked(&DATABRICKS_TOKEN, r"dapi[a-f0-9]+(?:-[0-9])?", 36..=38, databricks),
    checked(&GRAFANA_TOKEN, r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", 46..=46, generated),
    checked(&GRAFANA_TOKEN, r"glc_[A-Za-z0-9+/]+={0,2}", 36..=400, generated),
    token(&NEWRELIC_API_KEY, r"NRAK-[A-Z0-9]+", 32..=32),
    Pattern {
        rule: &DATADOG_API_KEY,
        needles: DATADOG_WORDS,
        regex: r"[0-9a-f]{32,}",
        len: 32..=40,
        context: DATADOG_WORDS,
        check: |ctx, r| (r.len() == 32 || r.len() == 40) && generated(ctx, r),
    },
    token(&OKTA_API_TOKEN, r"SSWS[ \t]+(00[A-Za-z0-9_-]+)", 42..=42),
    in_context(&OKTA_API_TOKEN, OKTA_WORDS, r"00[A-Za-z0-9_-]{40,}", 42..=42),
    checked(&CONTINUITY_API_KEY, r"ctn_[A-Za-z0-9_.-]+", 24..=512, generated),
];

/// One detector per row, each with its regex compiled once.
pub(crate) fn detectors() -> Vec<Detector> {
    PATTERNS
        .iter()
        .map(|p| {
            let re = Re::new(p.regex);
            Detector::woken_by(p.needles, move |ctx, out| run(p, &re, ctx, out))
        })
        .collect()
}

fn run(p: &Pattern, re: &Re, ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for caps in re.captures_iter(ctx.text) {
        let (Some(whole), Some(m)) = (caps.get(0), caps.get(1).or_else(|| caps.get(0))) else { continue };
        let start = m.start();
        let end = start + m.as_str().trim_end_matches('.').len();
        if p.len.contains(&(end - start))
            && (whole.start() < start || !alnum_before(ctx.text, start))
            && !alnum_at(ctx.text, end)
            && (p.context.is_empty() || labels(before(&ctx.lower, start, WINDOW), p.context))
            && (p.check)(ctx, start..end)
        {
            out.push(p.rule.at(start, end));
        }
    }
}

/// One of `words` stands in `window` and nothing after it ends an assignment.
fn labels(window: &str, words: &[&str]) -> bool {
    last_keyword_end(window, words).is_some_and(|end| !window.get(end..).unwrap_or_default().contains([';', ',', '&', '|']))
}

fn always(_: &Ctx<'_>, _: Range<usize>) -> bool {
    true
}

/// Looks generated (letters with digits, or mixed case, in its last [`TAIL`] characters,
/// where the random body of a prefixed token is) and is not a placeholder.
fn generated(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let Some(value) = ctx.text.get(r) else { return false };
    let tail = value.get(value.len().saturating_sub(TAIL)..).unwrap_or(value);
    random_looking(tail) && !is_placeholder(value)
}

const TAIL: usize = 20;

/// AWS key ids are base32 after the four-letter prefix.
fn aws_key_id(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    ctx.text.get(r.start + 4..r.end).is_some_and(|b| b.bytes().all(|c| c.is_ascii_uppercase() || (b'2'..=b'7').contains(&c)))
}

static AWS_KEY_ID_NEARBY: Lazy = Lazy::new(|| Re::new(r"(?:AKIA|ASIA)[A-Z2-7]{16}"));

/// A 40-character secret key is one only in AWS context: a credential word just before it,
/// or an access key id on its line or a neighbouring one.
fn aws_secret(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let text = ctx.text;
    let Some(value) = text.get(r.clone()) else { return false };
    if !mixed_case(value) {
        return false;
    }
    if labels(before(&ctx.lower, r.start, WINDOW), AWS_SECRET_WORDS) {
        return true;
    }
    let from = line_start(text, line_start(text, r.start).saturating_sub(1));
    let to = line_end(text, line_end(text, r.end) + 1);
    text.get(from..to).is_some_and(|near| AWS_KEY_ID_NEARBY.is_match(near))
}

/// A SAS `sig=` counts inside a signed URL or SAS string, which also carries `sv=` or `se=`.
fn azure_sas(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let l = line(&ctx.lower, r.start);
    l.contains("sv=") || l.contains("se=")
}

/// The new-format client secret (`xxx8Q~…`) must not continue a longer token on the left.
fn azure_client_secret(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    !matches!(byte_before(ctx.text, r.start), Some(b'_' | b'~' | b'.' | b'-')) && generated(ctx, r)
}

/// Slack tokens have numeric, dash-separated parts after the prefix.
fn slack(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    ctx.text.get(r.start + 5..r.end).is_some_and(|body| body.contains('-') && body.bytes().any(|b| b.is_ascii_digit()))
}

/// `…/services/T…/B…/secret`: at least three path parts after the kind.
fn slack_webhook(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let url = ctx.text.get(r).unwrap_or_default();
    let path = url.split_once("slack.com/").map_or("", |(_, p)| p);
    path.split('/').filter(|s| !s.is_empty()).count() >= 4
}

/// `…/api/webhooks/{id}/{token}` with a token of 60 or more characters.
fn discord_webhook(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    ctx.text.get(r).and_then(|u| u.rsplit('/').next()).is_some_and(|t| t.len() >= 60)
}

fn teams_webhook(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    ctx.text.get(r).is_some_and(|u| u.contains("/IncomingWebhook/"))
}

/// `{bot id}:{35 characters}`; the secret part of real tokens starts with `AA`, otherwise
/// the line must speak of Telegram or a bot.
fn telegram(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let Some((_, secret)) = ctx.text.get(r.clone()).and_then(|t| t.split_once(':')) else { return false };
    secret.len() == 35
        && random_looking(secret)
        && (secret.starts_with("AA") || has_keyword(line(&ctx.lower, r.start), &["telegram", "bot"]))
}

/// `hvs.` and friends must not be the tail of a dotted name (`www.hvs.example`).
fn vault(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    byte_before(ctx.text, r.start) != Some(b'.') && generated(ctx, r)
}

/// `dapi` + exactly 32 hex (and an optional `-N` suffix).
fn databricks(ctx: &Ctx<'_>, r: Range<usize>) -> bool {
    let hex = ctx.text.get(r.start + 4..r.end).map(|t| t.split('-').next().unwrap_or_default());
    hex.is_some_and(|h| h.len() == 32) && generated(ctx, r)
}
