//! JSON:API plumbing: documents, error objects, query parameters and pagination as the real
//! service serves them.

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

pub const MEDIA_TYPE: &str = "application/vnd.api+json";
pub const DEFAULT_PAGE_SIZE: usize = 20;
/// The real service caps `page[size]` at 100 (larger values are clamped, not refused).
pub const MAX_PAGE_SIZE: usize = 100;

/// A JSON:API error response: one or more error objects and the HTTP status.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {errors:?}")]
pub struct ApiError {
    pub status: StatusCode,
    pub errors: Vec<Value>,
}

impl ApiError {
    /// Absent and unauthorized look the same (spec §5): `{"errors":[{"status":"404","title":"not found"}]}`.
    pub fn not_found() -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            errors: vec![json!({"status": "404", "title": "not found"})],
        }
    }

    pub fn unauthorized() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            errors: vec![json!({"status": "401", "title": "unauthorized"})],
        }
    }

    /// A 422 about one attribute, with a JSON pointer to it.
    pub fn invalid(pointer: &str, detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            errors: vec![json!({
                "status": "422",
                "title": "invalid attribute",
                "detail": detail.into(),
                "source": {"pointer": pointer},
            })],
        }
    }

    /// A 422 about the request as a whole.
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            errors: vec![
                json!({"status": "422", "title": "unprocessable entity", "detail": detail.into()}),
            ],
        }
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            errors: vec![json!({"status": "409", "title": "conflict", "detail": detail.into()})],
        }
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            errors: vec![json!({"status": "403", "title": "forbidden", "detail": detail.into()})],
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            errors: vec![json!({"status": "400", "title": "bad request", "detail": detail.into()})],
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        document(self.status, json!({"errors": self.errors}))
    }
}

pub type ApiResult<T = Response> = Result<T, ApiError>;

/// A JSON:API document response.
pub fn document(status: StatusCode, body: Value) -> Response {
    let mut resp = (status, body.to_string()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    resp
}

pub fn ok(body: Value) -> Response {
    document(StatusCode::OK, body)
}

pub fn created(body: Value) -> Response {
    document(StatusCode::CREATED, body)
}

pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

pub fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// Query parameters, decoded (`page%5Bnumber%5D` becomes `page[number]`); the last value wins.
#[derive(Debug, Default, Clone)]
pub struct QueryParams(pub BTreeMap<String, String>);

impl QueryParams {
    pub fn parse(raw: Option<&str>) -> Self {
        let mut map = BTreeMap::new();
        if let Some(q) = raw {
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                map.insert(k.into_owned(), v.into_owned());
            }
        }
        Self(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Comma-separated `include` values.
    /// The `include` values, each spelled with underscores: the real service accepts the
    /// relationship names with dashes too (python-tfe sends `created-by`,
    /// `configuration-version`, `cost-estimate`, `task-stages`; go-tfe `current-state-version`),
    /// so `-` and `_` are one spelling here.
    pub fn includes(&self) -> Vec<String> {
        self.get("include")
            .map(|s| {
                s.split(',')
                    .map(|p| p.trim().replace('-', "_"))
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `page[number]` and `page[size]`: invalid or missing values fall back to the first page
    /// and 20 per page, as the real service does; sizes are clamped to 1..=100.
    pub fn page(&self) -> (usize, usize) {
        let number = self
            .get("page[number]")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(1);
        let size = self
            .get("page[size]")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(DEFAULT_PAGE_SIZE)
            .min(MAX_PAGE_SIZE);
        (number, size)
    }
}

tokio::task_local! {
    /// `scheme://host[:port]` of the request being answered, set by the service middleware:
    /// pagination links are absolute URLs, as the real service writes them.
    pub static BASE_URL: String;
}

/// The absolute form of an API path (the path itself outside a request).
pub fn absolute(path: &str) -> String {
    BASE_URL
        .try_with(|b| format!("{b}{path}"))
        .unwrap_or_else(|_| path.to_string())
}

/// One page of `items` as a JSON:API list document with `links` and `meta.pagination`. The
/// links are absolute URLs, as the real service writes them (issue 22).
/// `path` is the API path of the list (without query); other query parameters are kept.
pub fn paginate(
    items: Vec<Value>,
    params: &QueryParams,
    path: &str,
    included: Vec<Value>,
) -> Value {
    let (number, size) = params.page();
    let total = items.len();
    let total_pages = total.div_ceil(size).max(1);
    let data: Vec<Value> = items
        .into_iter()
        .skip((number - 1) * size)
        .take(size)
        .collect();
    let link = |page: usize| {
        let mut q: Vec<(String, String)> = params
            .0
            .iter()
            .filter(|(k, _)| k.as_str() != "page[number]" && k.as_str() != "page[size]")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        q.push(("page[number]".into(), page.to_string()));
        q.push(("page[size]".into(), size.to_string()));
        let qs = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(q)
            .finish();
        Value::String(absolute(&format!("{path}?{qs}")))
    };
    let prev = if number > 1 { Some(number - 1) } else { None };
    let next = if number < total_pages {
        Some(number + 1)
    } else {
        None
    };
    let mut doc = json!({
        "data": data,
        "links": {
            "self": link(number),
            "first": link(1),
            "prev": prev.map(link).unwrap_or(Value::Null),
            "next": next.map(link).unwrap_or(Value::Null),
            "last": link(total_pages),
        },
        "meta": {"pagination": {
            "current-page": number,
            "page-size": size,
            "prev-page": prev,
            "next-page": next,
            "total-pages": total_pages,
            "total-count": total,
        }},
    });
    if !included.is_empty() {
        doc["included"] = Value::Array(included);
    }
    doc
}

/// Parse a request body as JSON whatever its Content-Type (real clients omit it sometimes).
/// An empty body is `null`.
pub fn parse_body(body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        errors: vec![
            json!({"status": "400", "title": "JSON body is invalid", "detail": e.to_string()}),
        ],
    })
}

/// `data` of a request document, which must be an object.
pub fn data_object(body: &Value) -> ApiResult<&Map<String, Value>> {
    body.get("data")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::invalid("/data", "data must be a JSON:API resource object"))
}

/// `data` of a request document, which must be an array of resource identifiers.
pub fn data_array(body: &Value) -> ApiResult<&Vec<Value>> {
    body.get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::invalid("/data", "data must be an array"))
}

/// Checks `data.type` (when the client sends one it must be one of `allowed`; a missing type is
/// refused like the real service refuses it).
pub fn check_type(data: &Map<String, Value>, allowed: &[&str]) -> ApiResult<()> {
    match data.get("type").and_then(Value::as_str) {
        Some(t) if allowed.contains(&t) => Ok(()),
        Some(t) => Err(ApiError {
            status: StatusCode::CONFLICT,
            errors: vec![json!({
                "status": "409",
                "title": "conflict",
                "detail": format!("Resource type {t:?} does not match the endpoint, expected {:?}", allowed[0]),
                "source": {"pointer": "/data/type"},
            })],
        }),
        None => Err(ApiError::invalid("/data/type", "type is required")),
    }
}

/// Attributes of a request resource: keys are matched after folding `_` to `-` and letter
/// case, because clients send both spellings (`auto_apply` and `auto-apply`).
pub struct Attrs<'a> {
    map: BTreeMap<String, &'a Value>,
}

impl<'a> Attrs<'a> {
    pub fn of(data: &'a Map<String, Value>) -> ApiResult<Self> {
        let mut map = BTreeMap::new();
        match data.get("attributes") {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => {
                for (k, v) in o {
                    map.insert(fold(k), v);
                }
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    "/data/attributes",
                    "attributes must be an object",
                ))
            }
        }
        Ok(Self { map })
    }

    pub fn from_map(o: &'a Map<String, Value>) -> Self {
        Self {
            map: o.iter().map(|(k, v)| (fold(k), v)).collect(),
        }
    }

    /// The raw value (null included) when the key is present.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map.get(&fold(key)).copied()
    }

    pub fn has(&self, key: &str) -> bool {
        self.raw(key).is_some_and(|v| !v.is_null())
    }

    pub fn string(&self, key: &str) -> ApiResult<Option<String>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::invalid(
                &pointer(key),
                format!("{key} must be a string"),
            )),
        }
    }

    pub fn bool(&self, key: &str) -> ApiResult<Option<bool>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(_) => Err(ApiError::invalid(
                &pointer(key),
                format!("{key} must be a boolean"),
            )),
        }
    }

    pub fn strings(&self, key: &str) -> ApiResult<Option<Vec<String>>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::invalid(
                            &pointer(key),
                            format!("{key} must be an array of strings"),
                        )
                    })
                })
                .collect::<ApiResult<Vec<_>>>()
                .map(Some),
            Some(_) => Err(ApiError::invalid(
                &pointer(key),
                format!("{key} must be an array of strings"),
            )),
        }
    }
}

pub fn pointer(key: &str) -> String {
    format!("/data/attributes/{key}")
}

fn fold(k: &str) -> String {
    k.to_ascii_lowercase().replace('_', "-")
}

/// The `data` of a to-one relationship in a request: `relationships.<name>.data.id`.
pub fn relationship_id(data: &Map<String, Value>, name: &str) -> Option<String> {
    let rels = data.get("relationships")?.as_object()?;
    let rel = rels.iter().find(|(k, _)| fold(k) == fold(name))?.1;
    rel.get("data")?.get("id")?.as_str().map(str::to_string)
}

/// The `data` array of a to-many relationship in a request.
pub fn relationship_list<'a>(data: &'a Map<String, Value>, name: &str) -> Option<&'a Vec<Value>> {
    let rels = data.get("relationships")?.as_object()?;
    let rel = rels.iter().find(|(k, _)| fold(k) == fold(name))?.1;
    rel.get("data")?.as_array()
}

/// `{"data": {"id", "type"}}` for a relationship, or `{"data": null}`.
pub fn rel_one(kind: &str, id: Option<&str>) -> Value {
    match id {
        Some(id) => json!({"data": {"id": id, "type": kind}}),
        None => json!({"data": null}),
    }
}

pub fn rel_many(kind: &str, ids: impl IntoIterator<Item = String>) -> Value {
    let data: Vec<Value> = ids
        .into_iter()
        .map(|id| json!({"id": id, "type": kind}))
        .collect();
    json!({ "data": data })
}

pub fn iso(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
