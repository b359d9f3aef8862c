//! The rule table: every rule id the detector can emit, with its kind and class.
//!
//! One macro declares both the constants the detectors use and the public [`RULES`] list,
//! so the two can never disagree. The order matters: when two findings of the same class
//! and length overlap, the rule listed first (the more specific one) wins.

use crate::{Class, Finding};

/// A rule: what a detector reports.
pub(crate) struct Rule {
    pub id: &'static str,
    pub kind: &'static str,
    pub class: Class,
}

impl Rule {
    /// A finding of this rule over `start..end`.
    pub(crate) const fn at(&self, start: usize, end: usize) -> Finding {
        Finding { rule: self.id, kind: self.kind, class: self.class, start, end }
    }
}

macro_rules! rules {
    ($($name:ident = $id:literal, $kind:literal, $class:ident;)*) => {
        $(pub(crate) const $name: Rule = Rule { id: $id, kind: $kind, class: Class::$class };)*

        /// Every rule the detector can emit, as `(rule id, kind, class)`, most specific first.
        pub const RULES: &[(&str, &str, Class)] = &[$(($id, $kind, Class::$class)),*];
    };
}

rules! {
    AWS_ACCESS_KEY_ID = "aws-access-key-id", "an AWS access key ID", Secret;
    AWS_SECRET_ACCESS_KEY = "aws-secret-access-key", "an AWS secret access key", Secret;
    AWS_SESSION_TOKEN = "aws-session-token", "an AWS session token", Secret;
    GCP_API_KEY = "gcp-api-key", "a Google Cloud API key", Secret;
    GCP_SERVICE_ACCOUNT = "gcp-service-account", "a Google Cloud service-account private key", Secret;
    AZURE_STORAGE_KEY = "azure-storage-key", "an Azure storage account key", Secret;
    AZURE_SAS = "azure-sas-token", "an Azure shared access signature or key", Secret;
    AZURE_CLIENT_SECRET = "azure-client-secret", "an Azure AD client secret", Secret;
    GITHUB_TOKEN = "github-token", "a GitHub token", Secret;
    GITLAB_TOKEN = "gitlab-token", "a GitLab token", Secret;
    BITBUCKET_APP_PASSWORD = "bitbucket-app-password", "a Bitbucket app password", Secret;
    SLACK_TOKEN = "slack-token", "a Slack token", Secret;
    SLACK_WEBHOOK = "slack-webhook", "a Slack webhook URL", Secret;
    DISCORD_WEBHOOK = "discord-webhook", "a Discord webhook URL", Secret;
    TEAMS_WEBHOOK = "teams-webhook", "a Microsoft Teams webhook URL", Secret;
    DISCORD_BOT_TOKEN = "discord-bot-token", "a Discord bot token", Secret;
    TELEGRAM_BOT_TOKEN = "telegram-bot-token", "a Telegram bot token", Secret;
    STRIPE_SECRET_KEY = "stripe-secret-key", "a Stripe secret key", Secret;
    STRIPE_WEBHOOK_SECRET = "stripe-webhook-secret", "a Stripe webhook signing secret", Secret;
    SQUARE_TOKEN = "square-token", "a Square access token or secret", Secret;
    BRAINTREE_TOKEN = "braintree-token", "a PayPal Braintree access token", Secret;
    SHOPIFY_TOKEN = "shopify-token", "a Shopify access token", Secret;
    PLAID_ACCESS_TOKEN = "plaid-access-token", "a Plaid access token", Secret;
    OPENAI_API_KEY = "openai-api-key", "an OpenAI API key", Secret;
    ANTHROPIC_API_KEY = "anthropic-api-key", "an Anthropic API key", Secret;
    HUGGINGFACE_TOKEN = "huggingface-token", "a Hugging Face access token", Secret;
    NPM_TOKEN = "npm-token", "an npm access token", Secret;
    PYPI_TOKEN = "pypi-token", "a PyPI API token", Secret;
    AGE_SECRET_KEY = "age-secret-key", "an age secret key", Secret;
    DOCKERHUB_TOKEN = "dockerhub-token", "a Docker Hub access token", Secret;
    DIGITALOCEAN_TOKEN = "digitalocean-token", "a DigitalOcean token", Secret;
    VAULT_TOKEN = "vault-token", "a HashiCorp Vault token", Secret;
    HEROKU_API_KEY = "heroku-api-key", "a Heroku API key", Secret;
    TWILIO_API_KEY = "twilio-api-key", "a Twilio API key", Secret;
    TWILIO_AUTH_TOKEN = "twilio-auth-token", "a Twilio auth token", Secret;
    SENDGRID_API_KEY = "sendgrid-api-key", "a SendGrid API key", Secret;
    MAILGUN_API_KEY = "mailgun-api-key", "a Mailgun API key", Secret;
    MAILCHIMP_API_KEY = "mailchimp-api-key", "a Mailchimp API key", Secret;
    ATLASSIAN_API_TOKEN = "atlassian-api-token", "an Atlassian API token", Secret;
    LINEAR_API_KEY = "linear-api-key", "a Linear API key", Secret;
    SENTRY_DSN = "sentry-dsn", "a Sentry DSN key", Secret;
    SENTRY_AUTH_TOKEN = "sentry-auth-token", "a Sentry auth token", Secret;
    DATABRICKS_TOKEN = "databricks-token", "a Databricks access token", Secret;
    GRAFANA_TOKEN = "grafana-token", "a Grafana token", Secret;
    NEWRELIC_API_KEY = "newrelic-api-key", "a New Relic API key", Secret;
    DATADOG_API_KEY = "datadog-api-key", "a Datadog API or application key", Secret;
    OKTA_API_TOKEN = "okta-api-token", "an Okta API token", Secret;
    CONTINUITY_API_KEY = "continuity-api-key", "a Continuity API key", Secret;
    PRIVATE_KEY = "private-key", "a private key", Secret;
    JWT = "jwt", "a JSON Web Token", Secret;
    URL_CREDENTIALS = "url-credentials", "a password in a URL", Secret;
    CONNECTION_STRING_PASSWORD = "connection-string-password", "a password in a connection string or command line", Secret;
    AUTHORIZATION_HEADER = "authorization-header", "an HTTP Authorization credential", Secret;
    PASSWORD_ASSIGNMENT = "password-assignment", "a password in configuration", Secret;
    SECRET_ASSIGNMENT = "secret-assignment", "a secret or API key in configuration", Secret;
    PASSWORD_IN_PROSE = "password-in-prose", "a password written in prose", Secret;
    COMMAND_LINE_CREDENTIAL = "command-line-credential", "a password on a command line", Secret;
    HIGH_ENTROPY_SECRET = "high-entropy-secret", "a high-entropy secret in credential context", Secret;
    PAYMENT_CARD = "payment-card", "a payment card number", Personal;
    IBAN = "iban", "an IBAN (bank account number)", Personal;
    US_SSN = "us-ssn", "a US Social Security number", Personal;
    UK_NINO = "uk-nino", "a UK National Insurance number", Personal;
    CA_SIN = "ca-sin", "a Canadian Social Insurance Number", Personal;
    ES_DNI = "es-dni", "a Spanish DNI/NIE number", Personal;
    IT_CODICE_FISCALE = "it-codice-fiscale", "an Italian codice fiscale", Personal;
    NL_BSN = "nl-bsn", "a Dutch citizen service number (BSN)", Personal;
    IN_AADHAAR = "in-aadhaar", "an Indian Aadhaar number", Personal;
    FR_NIR = "fr-nir", "a French social security number (NIR)", Personal;
    DE_TAX_ID = "de-tax-id", "a German tax identification number", Personal;
    PASSPORT_NUMBER = "passport-number", "a passport number", Personal;
    DATE_OF_BIRTH = "date-of-birth", "a date of birth", Personal;
    DRIVERS_LICENCE = "drivers-licence", "a driver's licence number", Personal;
    EMAIL_ADDRESS = "email-address", "an e-mail address", Personal;
    PRIVATE_EMAIL_ADDRESS = "private-email-address", "a private e-mail address", Personal;
}

/// Position of a rule in [`RULES`]: lower is more specific.
pub(crate) fn rank(id: &str) -> usize {
    RULES.iter().position(|(r, _, _)| *r == id).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_kinds_have_an_article() {
        for (i, (id, kind, _)) in RULES.iter().enumerate() {
            assert!(id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{id}");
            assert_eq!(rank(id), i, "{id} is listed twice");
            assert!(kind.starts_with("a ") || kind.starts_with("an "), "{kind}");
        }
    }
}
