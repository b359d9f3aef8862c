//! The item port over DynamoDB: one table for every record of every tenant.
//!
//! Single-table layout (the SAM template creates the same table in production):
//!
//! | attribute | type | value                                  |
//! |-----------|------|----------------------------------------|
//! | `PK`      | S    | `"{tenant}#{part}"` (partition key)    |
//! | `SK`      | S    | the item's sort key (range key)        |
//! | `ver`     | N    | the item's version                     |
//! | `body`    | B    | the opaque body (absent when empty)    |
//!
//! The tenant leads the partition key, so a query can never leave one tenant's
//! partition. Reads are strongly consistent: the services read their own writes
//! (create-then-get, optimistic version checks), which eventually consistent reads
//! would break.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::BuildError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, Delete, KeySchemaElement, KeyType, Put,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TransactWriteItem,
};
use domain::{Error, Result};
use ports::items::{Condition, Item, ItemStore, MAX_WRITES_PER_BATCH, Query, Write};

use crate::unavailable;

const PK: &str = "PK";
const SK: &str = "SK";
const VER: &str = "ver";
const BODY: &str = "body";

type Attrs = HashMap<String, AttributeValue>;

/// The item port over one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoItems {
    client: Client,
    table: String,
}

impl DynamoItems {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (on-demand billing, `PK` hash + `SK` range) unless it exists,
    /// and waits until it is usable.
    ///
    /// For tests and local development only: production tables come from the SAM
    /// template, which also sets point-in-time recovery and deletion protection.
    ///
    /// # Errors
    /// `UNAVAILABLE` when DynamoDB cannot be reached or refuses the table.
    pub async fn create_table_if_missing(&self) -> Result<()> {
        if self.table_status().await?.is_none() {
            let key = |name: &str, kind: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
            let attr =
                |name: &str| AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build();
            let created = self
                .client
                .create_table()
                .table_name(&self.table)
                .billing_mode(BillingMode::PayPerRequest)
                .key_schema(key(PK, KeyType::Hash).map_err(build_error)?)
                .key_schema(key(SK, KeyType::Range).map_err(build_error)?)
                .attribute_definitions(attr(PK).map_err(build_error)?)
                .attribute_definitions(attr(SK).map_err(build_error)?)
                .send()
                .await;
            if let Err(e) = created {
                // Another test process may have created it between our check and now.
                let raced = e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception());
                if !raced {
                    return Err(unavailable("dynamodb CreateTable", &e));
                }
            }
        }
        // A new table is CREATING for a while on real DynamoDB; moto makes it ACTIVE at once.
        for _ in 0..120 {
            if self.table_status().await?.as_deref() == Some("ACTIVE") {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        Err(Error::unavailable(format!("dynamodb table {} did not become ACTIVE", self.table)))
    }

    /// The table's status, `None` when it does not exist.
    async fn table_status(&self) -> Result<Option<String>> {
        match self.client.describe_table().table_name(&self.table).send().await {
            Ok(out) => Ok(Some(
                out.table().and_then(|t| t.table_status()).map_or_else(|| "UNKNOWN".to_owned(), |s| s.as_str().to_owned()),
            )),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(None),
            Err(e) => Err(unavailable("dynamodb DescribeTable", &e)),
        }
    }
}

/// The partition key of `(tenant, part)`.
pub(crate) fn pk(tenant: &str, part: &str) -> String {
    format!("{tenant}#{part}")
}

/// Rejects keys that DynamoDB cannot store or that could collide across tenants.
///
/// A `#` in the tenant would let `("a#b", "c")` and `("a", "b#c")` share a partition;
/// tenant slugs never contain one, but this port takes plain strings, so check here
/// rather than trust every caller. DynamoDB refuses empty key strings.
fn check_key(tenant: &str, part: &str, sk: &str) -> Result<()> {
    if tenant.is_empty() || tenant.contains('#') {
        return Err(Error::invalid_field("tenant", "must be non-empty and contain no '#'"));
    }
    if part.is_empty() {
        return Err(Error::invalid_field("part", "must not be empty"));
    }
    if sk.is_empty() {
        return Err(Error::invalid_field("sk", "must not be empty"));
    }
    Ok(())
}

pub(crate) fn key(tenant: &str, part: &str, sk: &str) -> Attrs {
    HashMap::from([(PK.to_owned(), AttributeValue::S(pk(tenant, part))), (SK.to_owned(), AttributeValue::S(sk.to_owned()))])
}

/// The attribute a single conditional put carries with its own random id (readers
/// ignore it): see [`DynamoItems::write_one`].
const WRITE_ID: &str = "wid";

pub(crate) fn to_attrs(item: &Item) -> Attrs {
    let mut attrs = key(&item.tenant, &item.part, &item.sk);
    attrs.insert(VER.to_owned(), AttributeValue::N(item.version.to_string()));
    // An empty body is stored as no attribute: older DynamoDB (and some emulators)
    // reject empty binary values, and a missing body reads back as empty anyway.
    if !item.body.is_empty() {
        attrs.insert(BODY.to_owned(), AttributeValue::B(Blob::new(item.body.clone())));
    }
    attrs
}

/// Rebuilds an item read from `(tenant, part)`. A row without `SK` or a numeric `ver`
/// was not written by this adapter: that is corrupt data, not an outage.
pub(crate) fn from_attrs(tenant: &str, part: &str, attrs: &Attrs) -> Result<Item> {
    let sk = match attrs.get(SK) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => return Err(Error::internal(format!("dynamodb item in {} has no string SK", pk(tenant, part)))),
    };
    let version = match attrs.get(VER) {
        Some(AttributeValue::N(n)) => n
            .parse::<u64>()
            .map_err(|e| Error::internal(format!("dynamodb item {}/{sk} has a bad ver {n:?}: {e}", pk(tenant, part))))?,
        _ => return Err(Error::internal(format!("dynamodb item {}/{sk} has no numeric ver", pk(tenant, part)))),
    };
    let body = match attrs.get(BODY) {
        Some(AttributeValue::B(b)) => b.as_ref().to_vec(),
        None => Vec::new(),
        Some(_) => {
            return Err(Error::internal(format!("dynamodb item {}/{sk} has a non-binary body", pk(tenant, part))));
        }
    };
    Ok(Item { tenant: tenant.to_owned(), part: part.to_owned(), sk, version, body })
}

/// A condition as DynamoDB expression parts: the expression and its `:v` value, if any.
fn condition_expr(condition: Condition) -> (Option<&'static str>, Option<Attrs>) {
    match condition {
        Condition::None => (None, None),
        Condition::Absent => (Some("attribute_not_exists(PK)"), None),
        Condition::Exists => (Some("attribute_exists(PK)"), None),
        // On a missing item `ver` does not exist and the comparison is false, as it must be.
        Condition::Version(v) => (Some("ver = :v"), Some(HashMap::from([(":v".to_owned(), AttributeValue::N(v.to_string()))]))),
    }
}

fn build_error(e: BuildError) -> Error {
    Error::internal(format!("dynamodb request could not be built: {e}"))
}

/// Where an exclusive start key lies relative to the keys a prefix selects.
#[derive(Debug, PartialEq, Eq)]
enum StartKey<'a> {
    /// Start at the first key in the scan direction.
    None,
    /// Start after this key.
    After(&'a str),
    /// Nothing can follow: the key lies past the prefix's range in the scan direction.
    Exhausted,
}

/// Places `after` against the keys starting with `prefix`.
///
/// DynamoDB refuses an `ExclusiveStartKey` outside the key condition's range ("The
/// provided starting key is outside query boundaries"), whereas the port defines the
/// answer: keys with the prefix form one contiguous range in bytewise order, so a cursor
/// outside it either precedes every one of them (start at the beginning) or follows every
/// one (nothing left).
fn start_key<'a>(prefix: &str, after: Option<&'a str>, descending: bool) -> StartKey<'a> {
    match after {
        None => StartKey::None,
        Some(a) if a.starts_with(prefix) => StartKey::After(a),
        // Below the range: every prefixed key is greater.
        Some(a) if a < prefix => {
            if descending {
                StartKey::Exhausted
            } else {
                StartKey::None
            }
        }
        // Above the range: every prefixed key is smaller.
        Some(_) => {
            if descending {
                StartKey::None
            } else {
                StartKey::Exhausted
            }
        }
    }
}

/// Whether a write error means "the condition did not hold".
fn put_conflict(e: &PutItemError) -> bool {
    e.is_conditional_check_failed_exception()
}

fn delete_conflict(e: &DeleteItemError) -> bool {
    e.is_conditional_check_failed_exception()
}

/// A cancelled transaction is a `CONFLICT` only when a condition failed. Cancellation
/// for a concurrent transaction on the same item (`TransactionConflict`) or throttling
/// says nothing about the conditions: reporting it as `CONFLICT` would, for instance,
/// make an idempotency claim look already taken. It is `UNAVAILABLE`, which callers retry.
fn transaction_conflict(e: &TransactWriteItemsError) -> bool {
    match e {
        TransactWriteItemsError::TransactionCanceledException(c) => {
            c.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
        }
        _ => false,
    }
}

#[async_trait]
impl ItemStore for DynamoItems {
    async fn get(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<Item>> {
        check_key(tenant, part, sk)?;
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(tenant, part, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("dynamodb GetItem", &e))?;
        out.item().map(|attrs| from_attrs(tenant, part, attrs)).transpose()
    }

    async fn query(&self, q: Query<'_>) -> Result<(Vec<Item>, bool)> {
        check_key(q.tenant, q.part, "-")?;
        let start = match start_key(q.prefix, q.after, q.descending) {
            StartKey::Exhausted => return Ok((Vec::new(), false)),
            StartKey::None => None,
            StartKey::After(a) => Some(key(q.tenant, q.part, a)),
        };
        // Like the embedded store, treat a zero limit as one rather than fail a page.
        let limit = usize::try_from(q.limit.max(1)).unwrap_or(usize::MAX);
        let mut values = HashMap::from([(":pk".to_owned(), AttributeValue::S(pk(q.tenant, q.part)))]);
        let condition = if q.prefix.is_empty() {
            "PK = :pk"
        } else {
            values.insert(":prefix".to_owned(), AttributeValue::S(q.prefix.to_owned()));
            "PK = :pk AND begins_with(SK, :prefix)"
        };
        // Ask for one item more than the page: if it comes back, more follow, so a full
        // last page does not make callers fetch an empty one. `Limit` counts evaluated
        // items, which is exactly the returned ones here since there is no filter.
        let ask = i32::try_from(limit.saturating_add(1)).unwrap_or(i32::MAX);
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression(condition)
            .set_expression_attribute_values(Some(values))
            .scan_index_forward(!q.descending)
            .limit(ask)
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("dynamodb Query", &e))?;
        let mut items = out.items().iter().map(|a| from_attrs(q.tenant, q.part, a)).collect::<Result<Vec<_>>>()?;
        // DynamoDB also stops at 1 MB of data and then returns a LastEvaluatedKey with
        // fewer items than asked: more may follow then too.
        let more = items.len() > limit || out.last_evaluated_key().is_some_and(|k| !k.is_empty());
        items.truncate(limit);
        Ok((items, more))
    }

    /// A `Scan` of the table filtered to the tenant's partition keys (`{tenant}#…`): an
    /// export reads the whole table, which is what backups may afford. The cursor is the
    /// last evaluated key (`PK`, a line break, `SK`). Each request evaluates `limit`
    /// items, so a page may come back short when the filter drops some; one that would
    /// be empty reads on, so only the last page is empty.
    async fn scan_tenant(&self, tenant: &str, cursor: Option<&str>, limit: u32) -> Result<(Vec<Item>, Option<String>)> {
        check_key(tenant, "scan", "-")?;
        let prefix = format!("{tenant}#");
        let mut start = match cursor {
            Some(c) => {
                let (pk_value, sk) = c.split_once('\n').ok_or_else(|| Error::invalid_field("cursor", "not a scan cursor"))?;
                // The last key DynamoDB evaluated may be another tenant's: resuming from it
                // is what the scan needs.
                Some(HashMap::from([
                    (PK.to_owned(), AttributeValue::S(pk_value.to_owned())),
                    (SK.to_owned(), AttributeValue::S(sk.to_owned())),
                ]))
            }
            None => None,
        };
        let want = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("begins_with(PK, :p)")
                .expression_attribute_values(":p", AttributeValue::S(prefix.clone()))
                .limit(i32::try_from(want).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| unavailable("dynamodb Scan", &e))?;
            for attrs in out.items() {
                let Some(AttributeValue::S(full)) = attrs.get(PK) else { continue };
                let Some(part) = full.strip_prefix(&prefix) else { continue };
                items.push(from_attrs(tenant, part, attrs)?);
            }
            let next = out.last_evaluated_key().filter(|k| !k.is_empty()).map(|k| {
                let s = |name: &str| match k.get(name) {
                    Some(AttributeValue::S(v)) => v.clone(),
                    _ => String::new(),
                };
                format!("{}\n{}", s(PK), s(SK))
            });
            match next {
                // Everything evaluated was another tenant's: read on, so a page is never
                // empty but at the end.
                Some(c) if items.is_empty() => {
                    let (p, s) = c.split_once('\n').unwrap_or_default();
                    start = Some(HashMap::from([
                        (PK.to_owned(), AttributeValue::S(p.to_owned())),
                        (SK.to_owned(), AttributeValue::S(s.to_owned())),
                    ]));
                }
                next => return Ok((items, next)),
            }
        }
    }

    async fn write(&self, writes: Vec<Write>) -> Result<()> {
        if writes.len() > MAX_WRITES_PER_BATCH {
            return Err(Error::invalid(format!("at most {MAX_WRITES_PER_BATCH} writes per batch")));
        }
        // DynamoDB refuses a transaction touching one item twice; say so plainly instead
        // of surfacing its ValidationException as an outage.
        let mut seen = HashSet::new();
        for w in &writes {
            let (t, p, s) = match w {
                Write::Put { item, .. } => (&item.tenant, &item.part, &item.sk),
                Write::Delete { tenant, part, sk, .. } => (tenant, part, sk),
            };
            check_key(t, p, s)?;
            if !seen.insert((t, p, s)) {
                return Err(Error::invalid(format!("a batch writes {p}/{s} more than once")));
            }
        }
        match writes.as_slice() {
            [] => Ok(()),
            [one] => self.write_one(one).await,
            _ => self.write_transaction(&writes).await,
        }
    }
}

impl DynamoItems {
    /// One write needs no transaction: a conditional PutItem/DeleteItem is atomic and
    /// costs half as much.
    async fn write_one(&self, write: &Write) -> Result<()> {
        match write {
            Write::Put { item, condition } => {
                let (expr, values) = condition_expr(*condition);
                let mut attrs = to_attrs(item);
                // This write's own id, so that its retry is recognised below by the item
                // alone (two writes of the same content are still two writes).
                attrs.insert(WRITE_ID.to_owned(), AttributeValue::S(format!("{:016x}", rand::random::<u64>())));
                let sent = self
                    .client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(attrs.clone()))
                    .set_condition_expression(expr.map(str::to_owned))
                    .set_expression_attribute_values(values)
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                    .send()
                    .await;
                if let Err(e) = sent {
                    return match e.as_service_error() {
                        // The SDK retries an attempt that timed out, and that attempt may
                        // have committed: when the item the condition found is exactly
                        // the one written, write id included, the write is done (else a
                        // retried create would answer "already exists" to its own success).
                        Some(PutItemError::ConditionalCheckFailedException(c)) if c.item() == Some(&attrs) => Ok(()),
                        Some(s) if put_conflict(s) => {
                            Err(Error::conflict(format!("{} changed concurrently or already exists", item.part)))
                        }
                        _ => Err(unavailable("dynamodb PutItem", &e)),
                    };
                }
            }
            Write::Delete { tenant, part, sk, condition } => {
                let (expr, values) = condition_expr(*condition);
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key(tenant, part, sk)))
                    .set_condition_expression(expr.map(str::to_owned))
                    .set_expression_attribute_values(values)
                    .send()
                    .await
                    .map_err(|e| match e.as_service_error() {
                        Some(s) if delete_conflict(s) => Error::conflict(format!("{part} changed concurrently or is gone")),
                        _ => unavailable("dynamodb DeleteItem", &e),
                    })?;
            }
        }
        Ok(())
    }

    async fn write_transaction(&self, writes: &[Write]) -> Result<()> {
        let mut items = Vec::with_capacity(writes.len());
        for w in writes {
            let op = match w {
                Write::Put { item, condition } => {
                    let (expr, values) = condition_expr(*condition);
                    let put = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(to_attrs(item)))
                        .set_condition_expression(expr.map(str::to_owned))
                        .set_expression_attribute_values(values)
                        .build()
                        .map_err(build_error)?;
                    TransactWriteItem::builder().put(put).build()
                }
                Write::Delete { tenant, part, sk, condition } => {
                    let (expr, values) = condition_expr(*condition);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key(tenant, part, sk)))
                        .set_condition_expression(expr.map(str::to_owned))
                        .set_expression_attribute_values(values)
                        .build()
                        .map_err(build_error)?;
                    TransactWriteItem::builder().delete(delete).build()
                }
            };
            items.push(op);
        }
        // One token per logical batch: when the SDK retries an attempt that timed out but
        // committed, DynamoDB recognises the token and answers success instead of failing
        // the batch's conditions against its own earlier commit.
        let token = format!("{:032x}", rand::random::<u128>());
        self.client.transact_write_items().set_transact_items(Some(items)).client_request_token(token).send().await.map_err(
            |e| match e.as_service_error() {
                Some(s) if transaction_conflict(s) => Error::conflict("a condition of the batch does not hold"),
                _ => unavailable("dynamodb TransactWriteItems", &e),
            },
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_lead_with_the_tenant() {
        let k = key("acme", "entity", "account#1");
        assert_eq!(k.get(PK), Some(&AttributeValue::S("acme#entity".into())));
        assert_eq!(k.get(SK), Some(&AttributeValue::S("account#1".into())));
    }

    #[test]
    fn items_round_trip_through_attributes() {
        for body in [Vec::new(), b"{}".to_vec(), (0..=255u8).collect()] {
            let item = Item { tenant: "acme".into(), part: "p#x".into(), sk: "a#1".into(), version: 42, body };
            let attrs = to_attrs(&item);
            assert_eq!(from_attrs("acme", "p#x", &attrs).ok(), Some(item));
        }
    }

    #[test]
    fn corrupt_rows_are_internal_errors() {
        let mut attrs = key("acme", "p", "a");
        assert_eq!(from_attrs("acme", "p", &attrs).map_err(|e| e.code), Err(domain::ErrorCode::Internal));
        attrs.insert(VER.into(), AttributeValue::N("-1".into()));
        assert_eq!(from_attrs("acme", "p", &attrs).map_err(|e| e.code), Err(domain::ErrorCode::Internal));
    }

    #[test]
    fn keys_that_could_collide_are_refused() {
        assert!(check_key("a#b", "c", "s").is_err());
        assert!(check_key("acme", "", "s").is_err());
        assert!(check_key("acme", "p", "").is_err());
        assert!(check_key("_registry", "tenants", "acme").is_ok());
    }

    #[test]
    fn conditions_map_to_expressions() {
        assert_eq!(condition_expr(Condition::None), (None, None));
        assert_eq!(condition_expr(Condition::Absent).0, Some("attribute_not_exists(PK)"));
        assert_eq!(condition_expr(Condition::Exists).0, Some("attribute_exists(PK)"));
        let (expr, values) = condition_expr(Condition::Version(7));
        assert_eq!(expr, Some("ver = :v"));
        assert_eq!(values.and_then(|v| v.get(":v").cloned()), Some(AttributeValue::N("7".into())));
    }

    #[test]
    fn cursors_outside_the_prefix_are_placed() {
        assert_eq!(start_key("a#", None, false), StartKey::None);
        assert_eq!(start_key("a#", Some("a#05"), false), StartKey::After("a#05"));
        assert_eq!(start_key("a#", Some("a#05"), true), StartKey::After("a#05"));
        // "a" < "a#…": before the range.
        assert_eq!(start_key("a#", Some("a"), false), StartKey::None);
        assert_eq!(start_key("a#", Some("a"), true), StartKey::Exhausted);
        // "b" > "a#…": past the range.
        assert_eq!(start_key("a#", Some("b"), false), StartKey::Exhausted);
        assert_eq!(start_key("a#", Some("b"), true), StartKey::None);
        assert_eq!(start_key("", Some("zzz"), false), StartKey::After("zzz"));
    }
}
