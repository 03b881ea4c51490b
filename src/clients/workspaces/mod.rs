//! Clients of the workspace service (spec B), JSON:API under `/api/v2` with a bearer token.

pub mod nocode;
