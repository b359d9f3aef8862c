//! How a failed command reads at the terminal: the taxonomy error's text, and the next
//! step its code suggests (`main` prints it under every error).

/// A service error for the person at the terminal: the message and what actually failed
/// (its taxonomy code kept, so [`next_step`] can say what to do).
pub(super) fn domain_err(e: domain::Error) -> anyhow::Error {
    OperatorError { code: e.code, text: e.for_operator() }.into()
}

/// A taxonomy error as the CLI shows it.
#[derive(Debug)]
struct OperatorError {
    code: domain::ErrorCode,
    text: String,
}

impl std::fmt::Display for OperatorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for OperatorError {}

/// What to do next after a failed command, from the kind of failure: printed under the
/// error (`main`), so no error leaves the person at the terminal without a way on.
pub fn next_step(e: &anyhow::Error) -> &'static str {
    use domain::ErrorCode as C;
    if e.chain().any(|c| c.downcast_ref::<crate::home::format::NewerHome>().is_some()) {
        return "install the release that wrote the home (curl -fsSL \
                https://github.com/continuity-hq/continuity/releases/latest/download/install.sh | sh), then run the command again";
    }
    let code = e.chain().find_map(|c| c.downcast_ref::<OperatorError>()).map(|o| o.code);
    match code {
        Some(C::InvalidRequest | C::PayloadTooLarge) => {
            "fix the value named above; `continuity <command> --help` lists each option and its format"
        }
        Some(C::NotFound) => {
            "check the name: `continuity tenant list`, `continuity key list --tenant T`, `continuity user list --tenant T` show what exists"
        }
        Some(C::Conflict) => "it exists already or changed meanwhile: look at it again (the `list`/`show` command) and retry",
        Some(C::Unauthenticated) => {
            "the key or token is not valid here: create a new one with `continuity key create` (or run `continuity setup` again)"
        }
        Some(C::Forbidden | C::PlanInsufficient) => {
            "the credential or plan lacks what this needs (the scope or plan is named above): use a key that has it, or `continuity tenant set`"
        }
        Some(C::RateLimited) => "wait a moment and retry",
        Some(C::Unavailable | C::ResolverDegraded) => {
            "a store or service could not be reached: retry; for the home, check no other program locks it; for a stack, run `continuity --backend aws --stack NAME doctor`"
        }
        Some(C::Internal) => "this is a bug: run again with RUST_LOG=debug and report the output",
        Some(C::CapabilityNotFound | C::ConnectorNotAvailable | C::ConnectorSyncing) => {
            "see `continuity --help` and the guide (docs/guide.md) for what is available"
        }
        None => "see `continuity <command> --help`; the guide (docs/guide.md) covers every command",
    }
}
