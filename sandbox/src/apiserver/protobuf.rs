//! Decoding of Kubernetes protobuf request bodies for the built-in kinds kubectl creates with
//! its typed clients (and the `DeleteOptions` of their deletes) (`kubectl create
//! secret|configmap|namespace|serviceaccount|role|rolebinding|...`, `kubectl auth can-i` send
//! `application/vnd.kubernetes.protobuf` and never fall back to JSON). Responses are always
//! JSON (those clients also accept it). Only the fields of the kinds we serve are known;
//! unknown fields are skipped.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::error::ApiError;

/// How one field is encoded.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    /// A string Go's JSON leaves out when empty (`omitempty`): gogo's protobuf writes every
    /// string, so kubectl's bodies carry `generateName: ""` and such, which a real server never
    /// shows.
    OptStr,
    Bool,
    Int,
    Time,
    Msg(&'static [F]),
    MapStr,
    MapBytes,
    RepStr,
    RepMsg(&'static [F]),
}

/// A field: number, JSON name, encoding.
type F = (u64, &'static str, Kind);

const OWNER_REF: &[F] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[F] = &[
    (1, "name", Kind::OptStr),
    (2, "generateName", Kind::OptStr),
    (3, "namespace", Kind::OptStr),
    (5, "uid", Kind::OptStr),
    (6, "resourceVersion", Kind::OptStr),
    (7, "generation", Kind::Int),
    (8, "creationTimestamp", Kind::Time),
    (9, "deletionTimestamp", Kind::Time),
    (10, "deletionGracePeriodSeconds", Kind::Int),
    (11, "labels", Kind::MapStr),
    (12, "annotations", Kind::MapStr),
    (13, "ownerReferences", Kind::RepMsg(OWNER_REF)),
    (14, "finalizers", Kind::RepStr),
];

const OBJECT_REF: &[F] = &[
    (1, "kind", Kind::OptStr),
    (2, "namespace", Kind::OptStr),
    (3, "name", Kind::OptStr),
    (4, "uid", Kind::OptStr),
    (5, "apiVersion", Kind::OptStr),
    (6, "resourceVersion", Kind::OptStr),
    (7, "fieldPath", Kind::OptStr),
];

const LOCAL_REF: &[F] = &[(1, "name", Kind::Str)];

const SECRET: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapBytes),
    (3, "type", Kind::OptStr),
    (4, "stringData", Kind::MapStr),
    (5, "immutable", Kind::Bool),
];

const CONFIG_MAP: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::MapStr),
    (3, "binaryData", Kind::MapBytes),
    (4, "immutable", Kind::Bool),
];

const NAMESPACE_SPEC: &[F] = &[(1, "finalizers", Kind::RepStr)];

const NAMESPACE: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(NAMESPACE_SPEC)),
];

const SERVICE_ACCOUNT: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "secrets", Kind::RepMsg(OBJECT_REF)),
    (3, "automountServiceAccountToken", Kind::Bool),
    (4, "imagePullSecrets", Kind::RepMsg(LOCAL_REF)),
];

const LEASE_SPEC: &[F] = &[
    (1, "holderIdentity", Kind::Str),
    (2, "leaseDurationSeconds", Kind::Int),
    (3, "acquireTime", Kind::Time),
    (4, "renewTime", Kind::Time),
    (5, "leaseTransitions", Kind::Int),
];

const LEASE: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(LEASE_SPEC)),
];

const BOUND_OBJECT_REF: &[F] = &[
    (1, "kind", Kind::Str),
    (2, "apiVersion", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
];

const TOKEN_REQUEST_SPEC: &[F] = &[
    (1, "audiences", Kind::RepStr),
    (3, "boundObjectRef", Kind::Msg(BOUND_OBJECT_REF)),
    (4, "expirationSeconds", Kind::Int),
];

/// authentication.k8s.io/v1 `TokenRequest` (`kubectl create token` sends it).
const TOKEN_REQUEST: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(TOKEN_REQUEST_SPEC)),
];

const TOKEN_REVIEW_SPEC: &[F] = &[(1, "token", Kind::Str), (2, "audiences", Kind::RepStr)];

const TOKEN_REVIEW: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(TOKEN_REVIEW_SPEC)),
];

const RESOURCE_ATTRIBUTES: &[F] = &[
    (1, "namespace", Kind::Str),
    (2, "verb", Kind::Str),
    (3, "group", Kind::Str),
    (4, "version", Kind::Str),
    (5, "resource", Kind::Str),
    (6, "subresource", Kind::Str),
    (7, "name", Kind::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[F] = &[(1, "path", Kind::Str), (2, "verb", Kind::Str)];

/// `SubjectAccessReviewSpec` (fields 1 and 2 are also the whole `SelfSubjectAccessReviewSpec`);
/// `extra` (a map of string lists) is not decoded.
const ACCESS_REVIEW_SPEC: &[F] = &[
    (1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
    (
        2,
        "nonResourceAttributes",
        Kind::Msg(NON_RESOURCE_ATTRIBUTES),
    ),
    (3, "user", Kind::Str),
    (4, "groups", Kind::RepStr),
    (6, "uid", Kind::Str),
];

/// SelfSubjectAccessReview, SubjectAccessReview and LocalSubjectAccessReview share a layout.
const ACCESS_REVIEW: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(ACCESS_REVIEW_SPEC)),
];

const RULES_REVIEW: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(&[(1, "namespace", Kind::Str)])),
];

const SELF_SUBJECT_REVIEW: &[F] = &[(1, "metadata", Kind::Msg(OBJECT_META))];

const POLICY_RULE: &[F] = &[
    (1, "verbs", Kind::RepStr),
    (2, "apiGroups", Kind::RepStr),
    (3, "resources", Kind::RepStr),
    (4, "resourceNames", Kind::RepStr),
    (5, "nonResourceURLs", Kind::RepStr),
];

const LABEL_SELECTOR_REQUIREMENT: &[F] = &[
    (1, "key", Kind::Str),
    (2, "operator", Kind::Str),
    (3, "values", Kind::RepStr),
];

const LABEL_SELECTOR: &[F] = &[
    (1, "matchLabels", Kind::MapStr),
    (
        2,
        "matchExpressions",
        Kind::RepMsg(LABEL_SELECTOR_REQUIREMENT),
    ),
];

/// Role and ClusterRole (`kubectl create role|clusterrole` send them as protobuf).
const ROLE: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::RepMsg(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        Kind::Msg(&[(1, "clusterRoleSelectors", Kind::RepMsg(LABEL_SELECTOR))]),
    ),
];

const SUBJECT: &[F] = &[
    (1, "kind", Kind::Str),
    (2, "apiGroup", Kind::OptStr),
    (3, "name", Kind::Str),
    (4, "namespace", Kind::OptStr),
];

const ROLE_REF: &[F] = &[
    (1, "apiGroup", Kind::Str),
    (2, "kind", Kind::Str),
    (3, "name", Kind::Str),
];

/// RoleBinding and ClusterRoleBinding (`kubectl create rolebinding|clusterrolebinding`).
const BINDING: &[F] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "subjects", Kind::RepMsg(SUBJECT)),
    (3, "roleRef", Kind::Msg(ROLE_REF)),
];

const PRECONDITIONS: &[F] = &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)];

/// `DeleteOptions`: typed clients send it as the protobuf body of a DELETE (Helm's release
/// storage deletes its `sh.helm.release.v1.*` Secrets this way on `helm uninstall`).
const DELETE_OPTIONS: &[F] = &[
    (1, "gracePeriodSeconds", Kind::Int),
    (2, "preconditions", Kind::Msg(PRECONDITIONS)),
    (3, "orphanDependents", Kind::Bool),
    (4, "propagationPolicy", Kind::Str),
    (5, "dryRun", Kind::RepStr),
];

fn bad(msg: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized: protobuf: {msg}"
    ))
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or_else(|| bad("truncated varint"))?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ApiError> {
        let n = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
        let end = self
            .i
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or_else(|| bad("truncated field"))?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    /// Next `(field number, wire type)`, or `None` at the end.
    fn tag(&mut self) -> Result<Option<(u64, u64)>, ApiError> {
        if self.i >= self.b.len() {
            return Ok(None);
        }
        let t = self.varint()?;
        Ok(Some((t >> 3, t & 7)))
    }

    fn skip(&mut self, wire: u64) -> Result<(), ApiError> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => self.i += 8,
            2 => {
                self.bytes()?;
            }
            5 => self.i += 4,
            _ => return Err(bad("unsupported wire type")),
        }
        Ok(())
    }
}

fn utf8(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("invalid utf-8"))
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ApiError> {
    let mut r = Reader { b, i: 0 };
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some((n, w)) = r.tag()? {
        match (n, w) {
            (1, 2) => k = utf8(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = if bytes_value {
                    json!(base64::engine::general_purpose::STANDARD.encode(raw))
                } else {
                    json!(utf8(raw)?)
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> Result<Value, ApiError> {
    let mut r = Reader { b, i: 0 };
    let mut secs = 0i64;
    while let Some((n, w)) = r.tag()? {
        match (n, w) {
            (1, 0) => secs = r.varint()? as i64,
            (_, w) => r.skip(w)?,
        }
    }
    let t = chrono::DateTime::from_timestamp(secs, 0).ok_or_else(|| bad("time out of range"))?;
    Ok(json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn message(b: &[u8], schema: &[F]) -> Result<Value, ApiError> {
    let mut r = Reader { b, i: 0 };
    let mut out = Map::new();
    while let Some((n, w)) = r.tag()? {
        let Some((_, name, kind)) = schema.iter().find(|(num, _, _)| *num == n) else {
            r.skip(w)?;
            continue;
        };
        let name = name.to_string();
        match (kind, w) {
            (Kind::Str, 2) => {
                out.insert(name, json!(utf8(r.bytes()?)?));
            }
            (Kind::OptStr, 2) => {
                let v = utf8(r.bytes()?)?;
                if !v.is_empty() {
                    out.insert(name, json!(v));
                }
            }
            (Kind::Bool, 0) => {
                out.insert(name, json!(r.varint()? != 0));
            }
            (Kind::Int, 0) => {
                out.insert(name, json!(r.varint()? as i64));
            }
            (Kind::Time, 2) => {
                out.insert(name, time(r.bytes()?)?);
            }
            (Kind::Msg(s), 2) => {
                out.insert(name, message(r.bytes()?, s)?);
            }
            (Kind::MapStr, 2) | (Kind::MapBytes, 2) => {
                let (k, v) = map_entry(r.bytes()?, matches!(kind, Kind::MapBytes))?;
                let m = out.entry(name).or_insert_with(|| json!({}));
                m[k] = v;
            }
            (Kind::RepStr, 2) => {
                let s = utf8(r.bytes()?)?;
                let a = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = a.as_array_mut() {
                    a.push(json!(s));
                }
            }
            (Kind::RepMsg(s), 2) => {
                let m = message(r.bytes()?, s)?;
                let a = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = a.as_array_mut() {
                    a.push(m);
                }
            }
            (_, w) => r.skip(w)?,
        }
    }
    Ok(Value::Object(out))
}

/// Decode a `k8s\0`-prefixed `runtime.Unknown` envelope holding one of our built-in kinds.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let inner = body
        .strip_prefix(b"k8s\x00")
        .ok_or_else(|| bad("missing k8s magic"))?;
    let mut r = Reader { b: inner, i: 0 };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while let Some((n, w)) = r.tag()? {
        match (n, w) {
            (1, 2) => {
                let tm = r.bytes()?;
                let mut t = Reader { b: tm, i: 0 };
                while let Some((n, w)) = t.tag()? {
                    match (n, w) {
                        (1, 2) => api_version = utf8(t.bytes()?)?,
                        (2, 2) => kind = utf8(t.bytes()?)?,
                        (_, w) => t.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let schema = match kind.as_str() {
        "Secret" => SECRET,
        "ConfigMap" => CONFIG_MAP,
        "Namespace" => NAMESPACE,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Lease" => LEASE,
        "DeleteOptions" => DELETE_OPTIONS,
        "TokenRequest" => TOKEN_REQUEST,
        "TokenReview" => TOKEN_REVIEW,
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            ACCESS_REVIEW
        }
        "SelfSubjectRulesReview" => RULES_REVIEW,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => BINDING,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (protobuf is not supported for {other})"
            )))
        }
    };
    let mut obj = message(raw, schema)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}
