//! A port a process was deliberately built without: every call refuses with
//! `UNAVAILABLE`, naming who lacks it. A Lambda function that never reaches a port
//! (the authorizer has no queue, no blobs) wires this instead of the real adapter, so
//! its binary links neither the adapter nor its SDK client.

use std::time::Duration;

use async_trait::async_trait;
use domain::{Error, Result, TenantId};

use crate::blob::{BlobKey, BlobStore};
use crate::queue::{DeadLetter, Delivery, Queue, QueueMessage};

/// The absent port of `.0` (e.g. "the authorizer").
#[derive(Debug, Clone, Copy)]
pub struct Absent(pub &'static str);

impl Absent {
    fn refuse<T>(self, port: &str) -> Result<T> {
        Err(Error::unavailable(format!("{} is built without {port}", self.0)))
    }
}

#[async_trait]
impl Queue for Absent {
    async fn send(&self, _: &QueueMessage) -> Result<()> {
        self.refuse("the work queue")
    }
    async fn receive(&self, _: u32, _: Duration) -> Result<Vec<Delivery>> {
        self.refuse("the work queue")
    }
    async fn ack(&self, _: &str) -> Result<()> {
        self.refuse("the work queue")
    }
    async fn release(&self, _: &str, _: Duration) -> Result<()> {
        self.refuse("the work queue")
    }
    async fn dead_letters(&self, _: u32) -> Result<Vec<DeadLetter>> {
        self.refuse("the work queue")
    }
    async fn depth(&self) -> Result<u64> {
        self.refuse("the work queue")
    }
}

#[async_trait]
impl BlobStore for Absent {
    async fn put(&self, _: &BlobKey, _: &[u8]) -> Result<()> {
        self.refuse("the blob store")
    }
    async fn get(&self, _: &BlobKey) -> Result<Option<Vec<u8>>> {
        self.refuse("the blob store")
    }
    async fn list(&self, _: &TenantId, _: &str, _: Option<&str>, _: u32) -> Result<Vec<BlobKey>> {
        self.refuse("the blob store")
    }
    async fn delete(&self, _: &BlobKey) -> Result<()> {
        self.refuse("the blob store")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_refuses_naming_who_lacks_the_port() {
        let a = Absent("the authorizer");
        let e = a.receive(1, Duration::ZERO).await.unwrap_err();
        assert_eq!(e.code, domain::ErrorCode::Unavailable);
        assert_eq!(e.internal.as_deref(), Some("the authorizer is built without the work queue"));
        let key = BlobKey::new(&TenantId::new("acme").unwrap(), "x").unwrap();
        assert_eq!(a.get(&key).await.unwrap_err().internal.as_deref(), Some("the authorizer is built without the blob store"));
    }
}
