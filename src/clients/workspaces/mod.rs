//! Client of the infrastructure-workspace service (spec B): JSON:API documents under
//! `/api/v2` with a bearer token. This module holds the JSON:API helpers every engine uses
//! (full pagination by `meta.pagination`, path encoding); one file per engine.

pub mod nocode;
pub mod run;
pub mod workspace;

use std::sync::Arc;

use serde_json::{json, Value};

use super::http::{ClientError, Http};

pub use workspace::WorkspacesClient;

/// Largest page the service serves; lists are read with it to keep calls few.
pub const PAGE_SIZE: usize = 100;

pub use crate::clients::http::encode_segment as seg;

/// A JSON:API `data` document.
pub fn doc(data: Value) -> Value {
    json!({ "data": data })
}

/// Every item of a paginated list: follows `meta.pagination.next-page` (not `links`, which
/// are absolute on one server and relative on another) until there is none.
pub async fn list_all(http: &Arc<Http>, path: &str) -> Result<Vec<Value>, ClientError> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut page = 1usize;
    let mut out = Vec::new();
    loop {
        let url = format!("{path}{sep}page%5Bnumber%5D={page}&page%5Bsize%5D={PAGE_SIZE}");
        let resp = http.call("GET", &url, None).await?;
        if let Some(items) = resp.body.get("data").and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        let next = resp
            .body
            .pointer("/meta/pagination/next-page")
            .and_then(Value::as_u64);
        match next {
            Some(n) if (n as usize) > page => page = n as usize,
            _ => return Ok(out),
        }
    }
}

/// A string attribute (`null` and absent alike are `None`).
pub fn attr_str(v: &Value, key: &str) -> Option<String> {
    v.get("attributes")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .map(str::to_string)
}
