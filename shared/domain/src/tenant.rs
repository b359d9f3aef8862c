//! Tenants (SPEC §3.1): who owns data, on which plan, with which schema.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{TenantId, Timestamp};

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "&'static str")]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            /// Parses the wire name.
            ///
            /// # Errors
            /// `INVALID_REQUEST` listing the accepted values.
            pub fn parse(raw: &str) -> Result<Self, $crate::error::Error> {
                match raw {
                    $($text => Ok(Self::$variant),)+
                    _ => Err($crate::error::Error::invalid_field(
                        $what,
                        format!("unknown value {raw:?}; expected one of: {}", [$($text),+].join(", ")),
                    )),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::error::Error;
            fn try_from(value: String) -> Result<Self, $crate::error::Error> { Self::parse(&value) }
        }

        impl From<$name> for &'static str {
            fn from(value: $name) -> Self { value.as_str() }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.as_str()) }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> Result<Self, $crate::error::Error> { Self::parse(s) }
        }

        /// With the `schema` feature: a string with the wire names as its `enum`.
        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($text),+] })
            }
        }
    };
}
pub(crate) use string_enum;

string_enum! {
    /// Plan tiers, ordered: `free < starter < pro < enterprise`.
    PlanTier, "plan" { Free = "free", Starter = "starter", Pro = "pro", Enterprise = "enterprise" }
}

string_enum! {
    /// The department (domain key) whose Spine schema a tenant uses (SPEC §4.1).
    Department, "department" {
        CustomerSuccess = "customer_success",
        Sales = "sales",
        Marketing = "marketing",
        Finance = "finance",
        Support = "support",
        Engineering = "engineering",
        Product = "product",
        Operations = "operations",
        People = "people",
        Legal = "legal",
        It = "it",
        Executive = "executive",
    }
}

string_enum! {
    /// The industry overlay applied on top of the department schema (SPEC §4.1).
    Industry, "industry" {
        Saas = "saas",
        Healthcare = "healthcare",
        Retail = "retail",
        FinancialServices = "financial_services",
        Manufacturing = "manufacturing",
        Education = "education",
        RealEstate = "real_estate",
        Logistics = "logistics",
        Media = "media",
        ProfessionalServices = "professional_services",
        PublicSector = "public_sector",
    }
}

string_enum! {
    /// Storage tier (SPEC §3.4). `promoted` is one-way.
    StorageTier, "storage_tier" { Edge = "edge", Promoted = "promoted" }
}

/// A tenant and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: TenantId,
    pub display_name: String,
    pub plan: PlanTier,
    pub department: Department,
    pub industry: Industry,
    pub storage_tier: StorageTier,
    /// Requests per minute allowed for the whole tenant; `None` uses the plan default.
    pub rate_limit_per_minute: Option<u32>,
    /// Per-tenant overrides of a capability's minimum plan tier (SPEC §5.3).
    #[serde(default)]
    pub tier_overrides: std::collections::BTreeMap<String, PlanTier>,
    /// Identity providers trusted for enterprise sign-in (ID-JAG), by issuer.
    #[serde(default)]
    pub trusted_idps: Vec<crate::oauth::TrustedIdp>,
    /// The tenant's triage weights and thresholds (SPEC §6.2); `None` uses the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triage: Option<TriagePolicy>,
    /// The operator's tenant (the one `bootstrap` creates, or `local` on serve): its
    /// `admin` keys administer every tenant through the admin API, not only their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Optimistic-concurrency version, starting at 1 and bumped by every update.
    pub version: u64,
}

/// Triage weights (confidence, relevance, risk, conflict, quality) and the two
/// thresholds: at or above `auto_approve` a proposal is written without a person, below
/// `reject_below` it is rejected with the reason, in between a person decides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TriagePolicy {
    pub weights: [f64; 5],
    pub auto_approve: f64,
    pub reject_below: f64,
    /// How long a proposal waits for a person before it is escalated (never
    /// auto-approved), in seconds (SPEC §6.3: the wait's `TimeoutSeconds`).
    #[serde(default = "default_approval_timeout")]
    pub approval_timeout_secs: u64,
    /// What happens to an org proposal holding personal data (a card number, a national
    /// id, an e-mail address): it never auto-approves; a person decides (seeing it
    /// redacted), or it is rejected.
    #[serde(default)]
    pub personal_data: PersonalDataRule,
}

string_enum! {
    /// The tenant's rule for personal data in org proposals (SPEC §6.2).
    PersonalDataRule, "personal_data" {
        Human = "human",
        Reject = "reject",
    }
}

// `string_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for PersonalDataRule {
    fn default() -> Self {
        Self::Human
    }
}

/// Seven days.
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

fn default_approval_timeout() -> u64 {
    DEFAULT_APPROVAL_TIMEOUT_SECS
}

impl Default for TriagePolicy {
    fn default() -> Self {
        Self {
            weights: [0.3, 0.2, 0.15, 0.15, 0.2],
            auto_approve: 0.85,
            reject_below: 0.60,
            approval_timeout_secs: DEFAULT_APPROVAL_TIMEOUT_SECS,
            personal_data: PersonalDataRule::Human,
        }
    }
}

impl TriagePolicy {
    /// The wait's heartbeat interval: the hourly maintenance job proves every stored
    /// wait is still there by sending a heartbeat, so a wait lost from the store
    /// escalates after two missed beats (or at the timeout, if sooner). Always below
    /// the timeout, as Step Functions requires.
    pub fn approval_heartbeat_secs(&self) -> u64 {
        (2 * 3600 + 600).min(self.approval_timeout_secs - 1).max(1)
    }

    /// Weights in [0, 1] summing to 1 (± 0.001); `0 ≤ reject_below < auto_approve ≤ 1`;
    /// an approval timeout between 2 s and 365 days.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming what is wrong.
    pub fn check(&self) -> Result<(), Error> {
        if self.weights.iter().any(|w| !(0.0..=1.0).contains(w)) {
            return Err(Error::invalid_field("triage.weights", "each weight must lie in [0, 1]"));
        }
        let sum: f64 = self.weights.iter().sum();
        if (sum - 1.0).abs() > 0.001 {
            return Err(Error::invalid_field("triage.weights", format!("the five weights must sum to 1 (they sum to {sum:.3})")));
        }
        if !(0.0 <= self.reject_below && self.reject_below < self.auto_approve && self.auto_approve <= 1.0) {
            return Err(Error::invalid_field("triage", "thresholds must satisfy 0 ≤ reject_below < auto_approve ≤ 1"));
        }
        if !(2..=365 * 24 * 3600).contains(&self.approval_timeout_secs) {
            return Err(Error::invalid_field("triage.approval_timeout_secs", "must lie between 2 seconds and 365 days"));
        }
        Ok(())
    }
}

impl Tenant {
    pub fn new(id: TenantId, plan: PlanTier, department: Department, industry: Industry, now: Timestamp) -> Self {
        Self {
            display_name: id.to_string(),
            id,
            plan,
            department,
            industry,
            storage_tier: StorageTier::Edge,
            rate_limit_per_minute: None,
            tier_overrides: std::collections::BTreeMap::new(),
            trusted_idps: Vec::new(),
            triage: None,
            operator: false,
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }

    /// The effective per-tenant rate limit (requests per minute): explicit, else the plan's default.
    pub fn effective_rate_limit(&self) -> u32 {
        self.rate_limit_per_minute.unwrap_or(match self.plan {
            PlanTier::Free => 60,
            PlanTier::Starter => 300,
            PlanTier::Pro => 1200,
            PlanTier::Enterprise => 6000,
        })
    }

    /// Whether a change of storage tier is allowed (never a downgrade).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for `promoted → edge`.
    pub fn check_storage_tier_change(&self, to: StorageTier) -> Result<(), Error> {
        if self.storage_tier == StorageTier::Promoted && to == StorageTier::Edge {
            return Err(Error::invalid_field("storage_tier", "a promoted tenant is never downgraded to edge"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_ordered() {
        assert!(PlanTier::Free < PlanTier::Starter);
        assert!(PlanTier::Pro < PlanTier::Enterprise);
    }

    #[test]
    fn twelve_departments_eleven_industries() {
        assert_eq!(Department::ALL.len(), 12);
        assert_eq!(Industry::ALL.len(), 11);
    }

    #[test]
    fn unknown_values_list_the_choices() {
        let e = PlanTier::parse("gold").unwrap_err();
        assert!(e.message.contains("free, starter, pro, enterprise"), "{}", e.message);
    }

    #[test]
    fn promoted_is_one_way() {
        let mut t = Tenant::new(TenantId::new("acme").unwrap(), PlanTier::Pro, Department::Sales, Industry::Saas, Timestamp(0));
        assert!(t.check_storage_tier_change(StorageTier::Promoted).is_ok());
        t.storage_tier = StorageTier::Promoted;
        assert!(t.check_storage_tier_change(StorageTier::Edge).is_err());
    }
}
