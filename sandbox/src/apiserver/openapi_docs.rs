//! The OpenAPI documents as served: built once per set of CRDs, answered with the caching
//! headers of kube-apiserver's OpenAPI handlers (kube-openapi `handler3`).
//!
//! Like the real server, this keeps every document it serves until a CRD changes, rather than
//! rebuilding it per request. It matters to clients: kubectl fetches `/openapi/v3` before every
//! `apply`, `explain` and `edit`, and building the documents from the CRDs took about half a
//! second each time in the debug build the tests run.
//!
//! What clients see, as from kube-apiserver:
//! - every document carries an `ETag`, and a request whose `If-None-Match` names it gets
//!   `304 Not Modified` (kubectl's HTTP cache revalidates the index this way);
//! - a group-version document fetched with the index's `?hash=` is `Cache-Control: public,
//!   immutable` with an `Expires` one year ahead, so kubectl's disk cache never asks again;
//! - a stale `?hash=` is redirected (`301`) to the current one.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::error::ApiError;
use super::schema;
use super::store::{crd_key, State};

/// One served document: its JSON and its ETag (the content hash the v3 index links with).
#[derive(Clone)]
struct Doc {
    body: Bytes,
    etag: String,
}

impl Doc {
    fn of(v: &Value) -> Self {
        Doc {
            body: Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
            etag: schema::openapi_content_hash(v),
        }
    }
}

/// The documents built for one set of CRDs (`key`); emptied when the CRDs change.
#[derive(Default)]
struct Built {
    key: String,
    v3_index: Option<Doc>,
    /// By group-version (`v1`, `group/version`); `None` when not served.
    v3: HashMap<String, Option<Doc>>,
    v2_json: Option<Doc>,
    v2_protobuf: Option<Bytes>,
}

/// The server's OpenAPI documents (see the module docs).
#[derive(Default)]
pub struct OpenApiDocs {
    built: Mutex<Built>,
}

/// What identifies the CRDs the documents are built from: each CRD's name and
/// resourceVersion (every write to a CRD, its status included, gives it a new one).
fn crd_key_of(st: &State) -> String {
    let mut key = String::new();
    for crd in st.list(&crd_key(), None) {
        let meta = &crd["metadata"];
        key.push_str(meta["name"].as_str().unwrap_or_default());
        key.push('@');
        key.push_str(meta["resourceVersion"].as_str().unwrap_or_default());
        key.push(';');
    }
    key
}

impl OpenApiDocs {
    /// Runs `f` on the documents built for the CRDs of `st` as they are now.
    fn with<R>(&self, st: &State, f: impl FnOnce(&mut Built, &State) -> R) -> R {
        let key = crd_key_of(st);
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if built.key != key {
            *built = Built {
                key,
                ..Built::default()
            };
        }
        f(&mut built, st)
    }

    /// `GET /openapi/v3`.
    pub fn v3_index(&self, st: &State, headers: &HeaderMap) -> Response {
        let doc = self.with(st, |b, st| {
            b.v3_index
                .get_or_insert_with(|| Doc::of(&schema::openapi_v3_index(&st.crds())))
                .clone()
        });
        respond(&doc, headers, None, "application/json")
    }

    /// `GET /openapi/v3/<api/v1|apis/g/v>[?hash=...]`; `path` is the part after `/openapi/v3/`.
    pub fn v3_group_version(
        &self,
        st: &State,
        gv: &str,
        path: &str,
        hash: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<Response, ApiError> {
        let doc = self.with(st, |b, st| {
            b.v3.entry(gv.to_string())
                .or_insert_with(|| {
                    schema::openapi_v3_group_version(&st.crds(), gv).map(|d| Doc::of(&d))
                })
                .clone()
        });
        let doc = doc.ok_or_else(ApiError::no_route)?;
        match hash {
            Some(h) if h != doc.etag => {
                let location = format!("/openapi/v3/{path}?hash={}", doc.etag);
                let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
                if let Ok(v) = HeaderValue::from_str(&location) {
                    r.headers_mut().insert(header::LOCATION, v);
                }
                Ok(r)
            }
            Some(_) => Ok(respond(
                &doc,
                headers,
                Some(immutable()),
                "application/json",
            )),
            None => Ok(respond(&doc, headers, None, "application/json")),
        }
    }

    /// `GET /openapi/v2` as JSON.
    pub fn v2_json(&self, st: &State, headers: &HeaderMap) -> Response {
        let doc = self.with(st, |b, st| {
            b.v2_json
                .get_or_insert_with(|| Doc::of(&schema::openapi_v2(&st.crds())))
                .clone()
        });
        respond(&doc, headers, None, "application/json")
    }

    /// `GET /openapi/v2` as protobuf.
    pub fn v2_protobuf(&self, st: &State) -> Bytes {
        self.with(st, |b, st| {
            b.v2_protobuf
                .get_or_insert_with(|| Bytes::from(schema::openapi_v2_protobuf(&st.crds())))
                .clone()
        })
    }
}

/// `Cache-Control` and `Expires` of a document fetched by its current hash.
fn immutable() -> [(header::HeaderName, String); 2] {
    let expires = (chrono::Utc::now() + chrono::Duration::days(365))
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    [
        (header::CACHE_CONTROL, "public, immutable".to_string()),
        (header::EXPIRES, expires),
    ]
}

fn respond(
    doc: &Doc,
    headers: &HeaderMap,
    cache: Option<[(header::HeaderName, String); 2]>,
    content_type: &'static str,
) -> Response {
    let etag = format!("\"{}\"", doc.etag);
    let not_modified = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        });
    let mut r = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, content_type)],
            doc.body.clone(),
        )
            .into_response()
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    for (name, value) in cache.into_iter().flatten() {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}
