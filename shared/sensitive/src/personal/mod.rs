//! Personal data: values that identify a person or reach their money.
//!
//! - [`numbers`]: payment cards and all-digit national ids, whatever their separators;
//! - [`codes`]: IBANs and letter-and-digit national ids (UK NINO, Spanish DNI/NIE, Italian
//!   codice fiscale);
//! - [`labelled`]: passport numbers, dates of birth, driver's licence numbers after their label;
//! - [`email`]: e-mail addresses of people (not role accounts), private when at a free-mail provider.

mod codes;
mod email;
mod labelled;
mod numbers;

use crate::engine::Detector;

/// Every personal-data detector.
pub(crate) fn detectors() -> Vec<Detector> {
    let mut all = numbers::detectors();
    all.extend(codes::detectors());
    all.extend(labelled::detectors());
    all.extend(email::detectors());
    all
}
