//! Connector status (SPEC §4.5): where a tenant's link to one source tool stands.
//!
//! ```text
//! not_connected → oauth_pending → oauth_complete → syncing_initial → sync_complete ⇄ syncing_delta
//!                      │               │                 │                                │
//!                      └───────────────┴──────┬──────────┴────────────────────────────────┘
//!                                             ▼
//!                                        sync_error ──▶ syncing_initial | syncing_delta | oauth_pending
//! (and any state → not_connected: disconnection)
//! ```
//!
//! "Connected" ([`ConnectorState::is_connected`]) and "data-populated"
//! ([`ConnectorState::has_data`]) are different questions: a connector whose OAuth just
//! completed is connected but has nothing to answer with yet, and a capability must then
//! say `CONNECTOR_SYNCING` rather than fabricate values.
//!
//! [`ConnectorStatus::transition`] is the one place a status changes; it is pure, so the
//! store can run it between a read and a version-conditioned write.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{TenantId, Timestamp};
use crate::tenant::string_enum;

/// Maximum length of [`ConnectorStatus::error_stage`].
pub const MAX_ERROR_STAGE_LEN: usize = 64;
/// Maximum length of [`ConnectorStatus::error_message`].
pub const MAX_ERROR_MESSAGE_LEN: usize = 2000;

string_enum! {
    /// The state of one connector of one tenant (SPEC §4.5); legal moves are [`ConnectorState::can_move_to`].
    ConnectorState, "state" {
        NotConnected = "not_connected",
        OauthPending = "oauth_pending",
        OauthComplete = "oauth_complete",
        SyncingInitial = "syncing_initial",
        SyncComplete = "sync_complete",
        SyncingDelta = "syncing_delta",
        SyncError = "sync_error",
    }
}

impl ConnectorState {
    /// Whether `self → to` is a legal move. The rules, and why:
    ///
    /// 1. **Happy path** — `not_connected → oauth_pending → oauth_complete →
    ///    syncing_initial → sync_complete`: a source must be authorised before it can be
    ///    read, and read in full once before anything can be answered from it.
    /// 2. **Delta syncs repeat** — `sync_complete → syncing_delta → sync_complete`: after the
    ///    initial load only changes are fetched, for as long as the connector lives.
    /// 3. **Failures** — `sync_error` is reachable from every *active* stage
    ///    (`oauth_pending`, `oauth_complete`, `syncing_initial`, `syncing_delta`), because
    ///    only a stage that is doing work can fail. `not_connected` and `sync_complete` are
    ///    idle and `sync_error` is already a failure, so none of them moves to `sync_error`.
    /// 4. **Recovery** — `sync_error → syncing_initial | syncing_delta` retries the failed
    ///    sync, and `sync_error → oauth_pending` re-authorises (a revoked or expired grant);
    ///    nothing else leaves `sync_error`, so a failure is never papered over by jumping
    ///    straight to `sync_complete`.
    /// 5. **Disconnection** — `any → not_connected`: a tenant may disconnect at any time,
    ///    whatever the connector is doing.
    /// 6. **Re-entry** — only `syncing_initial → syncing_initial` and
    ///    `syncing_delta → syncing_delta` are allowed, as progress updates of a running
    ///    sync. Every other self-move is refused: it would bump the version and the
    ///    timestamp while changing nothing, and would hide a caller that lost track of
    ///    the state (for instance a second OAuth start, or disconnecting twice).
    ///
    /// Everything else (skipping OAuth, going back to OAuth from a healthy connector,
    /// `sync_complete → syncing_initial`, …) is illegal.
    pub fn can_move_to(self, to: Self) -> bool {
        use ConnectorState::*;
        match (self, to) {
            // 6: progress updates of a running sync; every other self-move is refused
            // (checked first, so 5 does not admit not_connected → not_connected).
            (SyncingInitial, SyncingInitial) | (SyncingDelta, SyncingDelta) => true,
            (from, to) if from == to => false,
            // 5: disconnection.
            (_, NotConnected) => true,
            // 1: the happy path.
            (NotConnected, OauthPending)
            | (OauthPending, OauthComplete)
            | (OauthComplete, SyncingInitial)
            | (SyncingInitial, SyncComplete)
            // 2: delta syncs repeat.
            | (SyncComplete, SyncingDelta)
            | (SyncingDelta, SyncComplete)
            // 3: failure of an active stage.
            | (OauthPending | OauthComplete | SyncingInitial | SyncingDelta, SyncError)
            // 4: recovery.
            | (SyncError, SyncingInitial | SyncingDelta | OauthPending) => true,
            _ => false,
        }
    }

    /// Whether the source is authorised: `oauth_complete` and every later state
    /// (`syncing_initial`, `sync_complete`, `syncing_delta`, `sync_error`).
    ///
    /// `sync_error` counts as connected: the connector was set up and its last stage
    /// failed; [`ConnectorStatus::error_stage`] says which. Connected does not mean there
    /// is data to answer with — see [`ConnectorState::has_data`].
    pub fn is_connected(self) -> bool {
        !matches!(self, Self::NotConnected | Self::OauthPending)
    }

    /// Whether a full initial sync has completed, so reads can be answered from the
    /// Spine: `sync_complete` and `syncing_delta` (a delta refreshes data already there).
    pub fn has_data(self) -> bool {
        matches!(self, Self::SyncComplete | Self::SyncingDelta)
    }
}

/// A source tool slug (`hubspot`, `salesforce`, `stripe`): 1–64 characters of `a-z`,
/// `0-9`, `_` and `-`, starting with a letter. It is a storage sort key, so it never
/// contains the key separator `#`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ConnectorSource(String);

impl ConnectorSource {
    /// Parses a source slug.
    ///
    /// # Errors
    /// `INVALID_REQUEST` unless the slug is 1–64 characters of `a-z0-9_-` starting with a letter.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        if raw.is_empty() || raw.len() > 64 {
            return Err(Error::invalid_field("source", "must be 1-64 characters"));
        }
        if let Some(bad) = raw.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-')) {
            return Err(Error::invalid_field("source", format!("contains the character {bad:?}, which is not allowed")));
        }
        if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(Error::invalid_field("source", "must start with a letter"));
        }
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ConnectorSource {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<ConnectorSource> for String {
    fn from(value: ConnectorSource) -> Self {
        value.0
    }
}

impl fmt::Display for ConnectorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The status of one connector of one tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectorStatus {
    pub tenant: TenantId,
    pub source: ConnectorSource,
    pub state: ConnectorState,
    /// Progress of the initial sync in [0, 1]; only ever set in `syncing_initial`.
    pub progress: Option<f64>,
    /// The stage that failed (e.g. `oauth_pending`, `syncing_delta`); only in `sync_error`.
    pub error_stage: Option<String>,
    /// What went wrong, safe to show the tenant; only in `sync_error`.
    pub error_message: Option<String>,
    pub updated_at: Timestamp,
    /// Optimistic-concurrency version: 0 until first stored, then 1 and bumped by every write.
    pub version: u64,
}

impl ConnectorStatus {
    /// The status of a source nobody has connected yet (version 0: not stored).
    pub fn not_connected(tenant: TenantId, source: ConnectorSource, now: Timestamp) -> Self {
        Self {
            tenant,
            source,
            state: ConnectorState::NotConnected,
            progress: None,
            error_stage: None,
            error_message: None,
            updated_at: now,
            version: 0,
        }
    }

    /// The status after moving to `to`. Pure: the caller stores the result under the
    /// version of `self`, so a concurrent move makes the write fail instead of being lost.
    ///
    /// - `progress` must lie in [0, 1]; it is kept only when `to` is `syncing_initial`
    ///   and cleared otherwise.
    /// - `error` is `(stage, message)`; `sync_error` requires it, every other state clears it.
    /// - `updated_at` becomes `now`; the version is left for the store to bump.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a progress outside [0, 1] (or NaN), or a `sync_error` without
    /// a non-empty stage and message within [`MAX_ERROR_STAGE_LEN`] / [`MAX_ERROR_MESSAGE_LEN`];
    /// `CONFLICT` when `self.state → to` is not a legal move ([`ConnectorState::can_move_to`]).
    pub fn transition(
        &self,
        to: ConnectorState,
        progress: Option<f64>,
        error: Option<(String, String)>,
        now: Timestamp,
    ) -> Result<Self, Error> {
        if let Some(p) = progress {
            check_progress(p)?;
        }
        let (error_stage, error_message) = if to == ConnectorState::SyncError {
            let (stage, message) =
                error.ok_or_else(|| Error::invalid_field("error", "sync_error requires the failing stage and a message"))?;
            check_error(&stage, &message)?;
            (Some(stage), Some(message))
        } else {
            (None, None)
        };
        if !self.state.can_move_to(to) {
            return Err(Error::conflict(format!("connector {} cannot move from {} to {}", self.source, self.state, to)));
        }
        Ok(Self {
            tenant: self.tenant.clone(),
            source: self.source.clone(),
            state: to,
            progress: if to == ConnectorState::SyncingInitial { progress } else { None },
            error_stage,
            error_message,
            updated_at: now,
            version: self.version,
        })
    }

    /// Checks the invariants [`ConnectorStatus::transition`] guarantees, for a status
    /// built elsewhere before it is stored: progress only in `syncing_initial` and within
    /// [0, 1]; an error stage and message exactly in `sync_error`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the offending field.
    pub fn check(&self) -> Result<(), Error> {
        if let Some(p) = self.progress {
            if self.state != ConnectorState::SyncingInitial {
                return Err(Error::invalid_field("progress", "is only kept while syncing_initial"));
            }
            check_progress(p)?;
        }
        match (self.state, &self.error_stage, &self.error_message) {
            (ConnectorState::SyncError, Some(stage), Some(message)) => check_error(stage, message),
            (ConnectorState::SyncError, _, _) => {
                Err(Error::invalid_field("error", "sync_error requires the failing stage and a message"))
            }
            (_, None, None) => Ok(()),
            _ => Err(Error::invalid_field("error", "only sync_error carries an error")),
        }
    }
}

fn check_progress(p: f64) -> Result<(), Error> {
    // `contains` is false for NaN, so NaN is refused too.
    if (0.0..=1.0).contains(&p) { Ok(()) } else { Err(Error::invalid_field("progress", "must be within [0, 1]")) }
}

fn check_error(stage: &str, message: &str) -> Result<(), Error> {
    if stage.trim().is_empty() || stage.chars().count() > MAX_ERROR_STAGE_LEN {
        return Err(Error::invalid_field("error_stage", format!("must be 1-{MAX_ERROR_STAGE_LEN} characters")));
    }
    if message.trim().is_empty() || message.chars().count() > MAX_ERROR_MESSAGE_LEN {
        return Err(Error::invalid_field("error_message", format!("must be 1-{MAX_ERROR_MESSAGE_LEN} characters")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ConnectorState::*;
    use super::*;
    use crate::ErrorCode;

    /// The legal-move matrix, written out by hand: row = from, column = to, in
    /// declaration order (NC OP OC SI SC SD SE).
    const EXPECTED: [[bool; 7]; 7] = {
        const T: bool = true;
        const F: bool = false;
        [
            //NC OP OC SI SC SD SE
            [F, T, F, F, F, F, F], // not_connected
            [T, F, T, F, F, F, T], // oauth_pending
            [T, F, F, T, F, F, T], // oauth_complete
            [T, F, F, T, T, F, T], // syncing_initial
            [T, F, F, F, F, T, F], // sync_complete
            [T, F, F, F, T, T, T], // syncing_delta
            [T, T, F, T, F, T, F], // sync_error
        ]
    };

    fn status(state: ConnectorState) -> ConnectorStatus {
        let mut s = ConnectorStatus::not_connected(
            TenantId::new("acme").unwrap(),
            ConnectorSource::new("hubspot").unwrap(),
            Timestamp(1),
        );
        s.state = state;
        s.version = 7;
        if state == SyncError {
            s.error_stage = Some("syncing_delta".into());
            s.error_message = Some("boom".into());
        }
        s
    }

    fn err() -> Option<(String, String)> {
        Some(("syncing_initial".into(), "token expired".into()))
    }

    #[test]
    fn declaration_order_matches_the_matrix() {
        let names: Vec<&str> = ConnectorState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "not_connected",
                "oauth_pending",
                "oauth_complete",
                "syncing_initial",
                "sync_complete",
                "syncing_delta",
                "sync_error"
            ]
        );
    }

    #[test]
    fn every_pair_matches_the_expected_matrix() {
        for (i, from) in ConnectorState::ALL.iter().enumerate() {
            for (j, to) in ConnectorState::ALL.iter().enumerate() {
                let expected = EXPECTED[i][j];
                assert_eq!(from.can_move_to(*to), expected, "{from} -> {to}");
                // `transition` agrees with `can_move_to` on every pair.
                let error = if *to == SyncError { err() } else { None };
                let got = status(*from).transition(*to, None, error, Timestamp(2));
                if expected {
                    let next = got.unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
                    assert_eq!((next.state, next.updated_at, next.version), (*to, Timestamp(2), 7));
                    next.check().unwrap();
                } else {
                    let e = got.unwrap_err();
                    assert_eq!(e.code, ErrorCode::Conflict, "{from} -> {to}");
                    assert!(e.message.contains(from.as_str()) && e.message.contains(to.as_str()), "{}", e.message);
                }
            }
        }
    }

    #[test]
    fn representative_illegal_moves() {
        for (from, to) in [
            (NotConnected, SyncingInitial), // skipping OAuth
            (NotConnected, OauthComplete),  // no OAuth round-trip
            (NotConnected, NotConnected),   // disconnecting twice
            (OauthPending, OauthPending),   // a second OAuth start
            (OauthComplete, SyncComplete),  // no data without a sync
            (SyncComplete, SyncingInitial), // initial load happens once
            (SyncComplete, SyncError),      // idle cannot fail
            (SyncComplete, SyncComplete),   // no-op write
            (SyncError, SyncComplete),      // a failure is never papered over
            (SyncError, SyncError),         // already failed
            (SyncingDelta, OauthPending),   // a healthy connector does not re-authorise
            (NotConnected, SyncError),      // idle cannot fail
        ] {
            assert!(!from.can_move_to(to), "{from} -> {to} must be illegal");
        }
    }

    #[test]
    fn happy_path_and_repeating_deltas() {
        let mut s = status(NotConnected);
        for to in
            [OauthPending, OauthComplete, SyncingInitial, SyncComplete, SyncingDelta, SyncComplete, SyncingDelta, SyncComplete]
        {
            s = s.transition(to, None, None, Timestamp(3)).unwrap();
        }
        assert_eq!(s.state, SyncComplete);
    }

    #[test]
    fn connected_and_populated_are_different() {
        let connected: Vec<_> = ConnectorState::ALL.iter().filter(|s| s.is_connected()).copied().collect();
        assert_eq!(connected, [OauthComplete, SyncingInitial, SyncComplete, SyncingDelta, SyncError]);
        let populated: Vec<_> = ConnectorState::ALL.iter().filter(|s| s.has_data()).copied().collect();
        assert_eq!(populated, [SyncComplete, SyncingDelta]);
        assert!(OauthComplete.is_connected() && !OauthComplete.has_data());
    }

    #[test]
    fn progress_is_bounded_and_kept_only_while_syncing_initial() {
        let s = status(OauthComplete);
        for bad in [-0.01, 1.01, f64::NAN, f64::INFINITY] {
            let e = s.transition(SyncingInitial, Some(bad), None, Timestamp(2)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{bad}");
            assert_eq!(e.payload.field_errors[0].field, "progress");
        }
        for ok in [0.0, 0.5, 1.0] {
            assert_eq!(s.transition(SyncingInitial, Some(ok), None, Timestamp(2)).unwrap().progress, Some(ok));
        }
        let syncing = s.transition(SyncingInitial, Some(0.4), None, Timestamp(2)).unwrap();
        let more = syncing.transition(SyncingInitial, Some(0.8), None, Timestamp(3)).unwrap();
        assert_eq!(more.progress, Some(0.8));
        let done = more.transition(SyncComplete, Some(1.0), None, Timestamp(4)).unwrap();
        assert_eq!(done.progress, None, "progress is cleared outside syncing_initial");
        let delta = done.transition(SyncingDelta, Some(0.3), None, Timestamp(5)).unwrap();
        assert_eq!(delta.progress, None, "deltas carry no progress");
        // Out-of-range progress is refused even where it would be cleared.
        assert_eq!(done.transition(SyncingDelta, Some(2.0), None, Timestamp(5)).unwrap_err().code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn sync_error_requires_a_stage_and_other_states_clear_it() {
        let s = status(SyncingInitial);
        let e = s.transition(SyncError, None, None, Timestamp(2)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        for (stage, message) in [("", "m"), ("  ", "m"), ("s", ""), (&*"x".repeat(65), "m")] {
            let e = s.transition(SyncError, None, Some((stage.into(), message.into())), Timestamp(2)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{stage:?}/{message:?}");
        }
        let failed = s.transition(SyncError, Some(0.5), err(), Timestamp(2)).unwrap();
        assert_eq!(failed.error_stage.as_deref(), Some("syncing_initial"));
        assert_eq!(failed.error_message.as_deref(), Some("token expired"));
        assert_eq!(failed.progress, None);
        let retried = failed.transition(SyncingInitial, Some(0.0), err(), Timestamp(3)).unwrap();
        assert_eq!((retried.error_stage, retried.error_message), (None, None), "leaving sync_error clears the error");
    }

    #[test]
    fn input_errors_come_before_legality() {
        // A malformed request is INVALID_REQUEST even when the move is also illegal.
        let e = status(NotConnected).transition(SyncError, None, None, Timestamp(2)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn check_enforces_the_invariants() {
        status(SyncError).check().unwrap();
        let mut s = status(SyncComplete);
        s.progress = Some(0.5);
        assert!(s.check().is_err());
        let mut s = status(SyncingInitial);
        s.progress = Some(1.5);
        assert!(s.check().is_err());
        let mut s = status(SyncError);
        s.error_stage = None;
        assert!(s.check().is_err());
        let mut s = status(SyncingDelta);
        s.error_message = Some("stale".into());
        assert!(s.check().is_err());
    }

    #[test]
    fn sources_are_strict_slugs() {
        for ok in ["hubspot", "salesforce", "stripe", "google_drive", "ms-365", "a", &"a".repeat(64)] {
            assert_eq!(ConnectorSource::new(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "1password", "_x", "-x", "HubSpot", "hub#spot", "hub spot", "hub/spot", "hübspot", &"a".repeat(65)] {
            let e = ConnectorSource::new(bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{bad:?}");
        }
    }

    #[test]
    fn deserialising_goes_through_validation() {
        use serde::de::value::{Error as DeError, StringDeserializer};
        let good = StringDeserializer::<DeError>::new("hubspot".to_owned());
        assert_eq!(ConnectorSource::deserialize(good).unwrap(), ConnectorSource::new("hubspot").unwrap());
        let bad = StringDeserializer::<DeError>::new("Hub#Spot".to_owned());
        assert!(ConnectorSource::deserialize(bad).is_err());
        let state = StringDeserializer::<DeError>::new("syncing_delta".to_owned());
        assert_eq!(ConnectorState::deserialize(state).unwrap(), SyncingDelta);
        assert_eq!(String::from(ConnectorSource::new("stripe").unwrap()), "stripe");
    }
}

/// A record the ingestion pipeline could not write: kept with its reason so an operator
/// sees why (the record itself stays in the raw blob the loader wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestFailure {
    pub tenant: TenantId,
    /// The queue message's idempotency key (`{batch}:{part}:{index}`).
    pub key: String,
    pub source: ConnectorSource,
    /// The raw blob holding the record, and its index there.
    pub raw_blob: String,
    pub index: u32,
    /// Why it failed, last attempt (a taxonomy message, safe to show the tenant).
    pub reason: String,
    pub attempts: u32,
    /// Whether the attempts are used up and the message went to the dead-letter queue.
    pub dead_lettered: bool,
    pub at: Timestamp,
}
