//! Cursor pagination, identical on every backend.
//!
//! A cursor is opaque to clients. Adapters encode whatever they need (an SQLite key, a
//! DynamoDB `LastEvaluatedKey`) as a string; a cursor from one tenant is useless to
//! another because every adapter re-applies the tenant filter.

/// Default and maximum page sizes; larger requests are clamped, not rejected.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 500;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

impl PageRequest {
    pub fn first(limit: u32) -> Self {
        Self { limit: Some(limit), cursor: None }
    }

    pub fn after(limit: u32, cursor: impl Into<String>) -> Self {
        Self { limit: Some(limit), cursor: Some(cursor.into()) }
    }

    /// The effective page size: default when absent, clamped to [1, MAX_PAGE_SIZE].
    pub fn size(&self) -> u32 {
        self.limit.unwrap_or(DEFAULT_PAGE_SIZE).clamp(1, MAX_PAGE_SIZE)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Present when more items may follow.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    pub fn empty() -> Self {
        Self { items: Vec::new(), next_cursor: None }
    }
}
