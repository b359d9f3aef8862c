//! Engineering records (issue #18): one versioned item per record under its project and
//! kind, so a project's records of one kind are one prefix.

use async_trait::async_trait;
use domain::engineering::{EngRecord, kind_of};
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId};

use super::{Expect, Records, encode, put, versioned};
use crate::items::{Condition, Write};

/// The engineering record store.
#[async_trait]
pub trait EngineeringStore: Send + Sync {
    /// The record `id` of `project` (its kind is read from the id).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed project or id; `UNAVAILABLE`.
    async fn get_eng_record(&self, tenant: &TenantId, project: &str, id: &Id) -> Result<Option<EngRecord>>;
    /// Writes `record` under `expect`; returns it with its new version.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed record or an id of another kind; `CONFLICT` when
    /// `expect` does not hold; `UNAVAILABLE`.
    async fn put_eng_record(&self, record: &EngRecord, expect: Expect) -> Result<EngRecord>;
    /// A project's records (of one kind, when given), ordered by kind then id.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed project or cursor; `UNAVAILABLE`.
    async fn list_eng_records(
        &self,
        tenant: &TenantId,
        project: &str,
        kind: Option<domain::engineering::RecordKind>,
        page: &PageRequest,
    ) -> Result<Page<EngRecord>>;
    /// Every project's records (the reindex, the maintenance job).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_all_eng_records(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<EngRecord>>;
    /// Deletes the record if it still has its version.
    ///
    /// # Errors
    /// `CONFLICT` when it changed or is gone; `UNAVAILABLE`.
    async fn delete_eng_record(&self, record: &EngRecord) -> Result<()>;
}

fn project_key(project: &str) -> Result<Id> {
    Id::new(project).map_err(|_| Error::invalid_field("project", "1-128 printable characters without # or /"))
}

fn key(project: &str, id: &Id) -> Result<String> {
    Ok(format!("{}#{}#{id}", project_key(project)?, kind_of(id.as_str())?.as_str()))
}

#[async_trait]
impl EngineeringStore for Records {
    async fn get_eng_record(&self, tenant: &TenantId, project: &str, id: &Id) -> Result<Option<EngRecord>> {
        self.get_one(tenant.as_str(), "eng", &key(project, id)?).await
    }

    async fn put_eng_record(&self, record: &EngRecord, expect: Expect) -> Result<EngRecord> {
        record.body.check()?;
        if kind_of(record.id.as_str())? != record.kind() {
            return Err(Error::invalid_field("id", format!("a {} record's id starts with {}.", record.kind(), record.kind())));
        }
        let tenant = record.tenant.as_str();
        let sk = key(&record.project, &record.id)?;
        let (mut version, condition) = versioned(expect);
        if expect == Expect::Any {
            version = self.items.get(tenant, "eng", &sk).await?.map_or(1, |i| i.version + 1);
        }
        let mut stored = record.clone();
        stored.version = version;
        self.items.write(vec![put(tenant, "eng", sk, version, encode(&stored)?, condition)]).await.map_err(|e| {
            if e.code != ErrorCode::Conflict {
                return e;
            }
            match expect {
                Expect::Absent => Error::conflict(format!("record {} exists already", record.id)),
                _ => Error::conflict(format!("record {} changed since it was read; read it again", record.id)),
            }
        })?;
        Ok(stored)
    }

    async fn list_eng_records(
        &self,
        tenant: &TenantId,
        project: &str,
        kind: Option<domain::engineering::RecordKind>,
        page: &PageRequest,
    ) -> Result<Page<EngRecord>> {
        let prefix = match kind {
            Some(k) => format!("{}#{}#", project_key(project)?, k.as_str()),
            None => format!("{}#", project_key(project)?),
        };
        self.page(tenant.as_str(), "eng", &prefix, page, false).await
    }

    async fn list_all_eng_records(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<EngRecord>> {
        self.page(tenant.as_str(), "eng", "", page, false).await
    }

    async fn delete_eng_record(&self, record: &EngRecord) -> Result<()> {
        let sk = key(&record.project, &record.id)?;
        self.items
            .write(vec![Write::Delete {
                tenant: record.tenant.as_str().to_owned(),
                part: "eng".into(),
                sk,
                condition: Condition::Version(record.version),
            }])
            .await
    }
}
