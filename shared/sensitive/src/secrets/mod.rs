//! Secrets: credentials whose leak lets someone act as their owner.
//!
//! - [`patterns`]: provider tokens by shape, and provider secrets by the word before them;
//! - [`keys`]: private keys, armoured or not, PuTTY files, service-account JSON;
//! - [`jwt`]: JSON Web Tokens, checked by decoding their header;
//! - [`urls`]: passwords inside URLs, connection strings and client command lines;
//! - [`header`]: `Authorization` header values;
//! - [`assign`]: values assigned to credential-named keys in any configuration syntax;
//! - [`prose`]: passwords written in sentences;
//! - [`entropy`]: unknown high-entropy tokens after a credential word.

mod assign;
mod entropy;
mod header;
mod jwt;
mod keys;
mod patterns;
mod prose;
mod urls;

use crate::engine::Detector;

/// Every secret detector.
pub(crate) fn detectors() -> Vec<Detector> {
    let mut all = patterns::detectors();
    all.extend(keys::detectors());
    all.extend(jwt::detectors());
    all.extend(urls::detectors());
    all.extend(header::detectors());
    all.extend(assign::detectors());
    all.extend(prose::detectors());
    all.extend(entropy::detectors());
    all
}
