//! Placeholder until the AWS fixtures land.
