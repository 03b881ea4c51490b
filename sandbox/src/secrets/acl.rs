//! ACL policies: parsing the policy document (HCL, or its JSON form) and evaluating path rules
//! the way the real service does.
//!
//! Matching follows the real service: an exact rule wins; for `LIST` an exact rule on the path
//! without its trailing `/` also counts; otherwise the highest-priority glob (`*` suffix) or
//! segment-wildcard (`+`) rule applies, with priority: later first wildcard, not a prefix glob,
//! fewer `+` segments, longer path, lexicographically larger. Rules of several policies on the
//! same path are merged (capabilities united), and `deny` on a path wins over everything.

use std::collections::HashMap;

use serde_json::Value;

pub const DENY: u32 = 1;
pub const CREATE: u32 = 1 << 1;
pub const READ: u32 = 1 << 2;
pub const UPDATE: u32 = 1 << 3;
pub const DELETE: u32 = 1 << 4;
pub const LIST: u32 = 1 << 5;
pub const SUDO: u32 = 1 << 6;
pub const PATCH: u32 = 1 << 7;
pub const SUBSCRIBE: u32 = 1 << 8;
pub const RECOVER: u32 = 1 << 9;

const CAP_NAMES: &[(&str, u32)] = &[
    ("deny", DENY),
    ("create", CREATE),
    ("read", READ),
    ("update", UPDATE),
    ("delete", DELETE),
    ("list", LIST),
    ("sudo", SUDO),
    ("patch", PATCH),
    ("subscribe", SUBSCRIBE),
    ("recover", RECOVER),
];

pub fn cap_bit(name: &str) -> Option<u32> {
    CAP_NAMES.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Capability names of a bitmap, in the order the real service lists them.
pub fn cap_names(bits: u32) -> Vec<String> {
    if bits & DENY != 0 {
        return vec!["deny".into()];
    }
    let order = [
        "create",
        "delete",
        "list",
        "patch",
        "read",
        "recover",
        "subscribe",
        "sudo",
        "update",
    ];
    order
        .iter()
        .filter(|n| cap_bit(n).is_some_and(|b| bits & b != 0))
        .map(|s| s.to_string())
        .collect()
}

#[derive(Clone, Debug, PartialEq)]
pub struct PathRule {
    pub path: String,
    pub caps: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedPolicy {
    pub rules: Vec<PathRule>,
}

const PATH_KEYS: &[&str] = &[
    "comment",
    "policy",
    "capabilities",
    "allowed_parameters",
    "denied_parameters",
    "required_parameters",
    "min_wrapping_ttl",
    "max_wrapping_ttl",
    "mfa_methods",
    "control_group",
    "subscribe_event_types",
    "pagination_limit",
];

/// Parses an ACL policy document. The error text is what follows `failed to parse policy: `.
pub fn parse(text: &str) -> Result<ParsedPolicy, String> {
    if text.trim_start().starts_with('{') {
        return parse_json(text);
    }
    let body = hcl::parse(text).map_err(|e| e.to_string())?;
    let mut rules = Vec::new();
    for s in body.iter() {
        match s {
            hcl::Structure::Attribute(a) => {
                if a.key() != "name" {
                    return Err(format!("invalid key {:?}", a.key()));
                }
            }
            hcl::Structure::Block(b) => {
                if b.identifier() != "path" {
                    return Err(format!("invalid key {:?}", b.identifier()));
                }
                let [label] = b.labels() else {
                    return Err("path block must have exactly one path name".into());
                };
                let path = label.as_str().to_string();
                let mut caps = 0u32;
                let mut seen_caps = false;
                for inner in b.body().iter() {
                    match inner {
                        hcl::Structure::Attribute(a) => {
                            let key = a.key();
                            if !PATH_KEYS.contains(&key) {
                                return Err(format!("path {path:?}: invalid key {key:?}"));
                            }
                            match key {
                                "capabilities" => {
                                    seen_caps = true;
                                    let hcl::Expression::Array(items) = a.expr() else {
                                        return Err(format!(
                                            "path {path:?}: capabilities must be a list of strings"
                                        ));
                                    };
                                    for it in items {
                                        let hcl::Expression::String(c) = it else {
                                            return Err(format!("path {path:?}: capabilities must be a list of strings"));
                                        };
                                        caps |= capability(&path, c)?;
                                    }
                                }
                                "policy" => {
                                    let hcl::Expression::String(p) = a.expr() else {
                                        return Err(format!(
                                            "path {path:?}: policy must be a string"
                                        ));
                                    };
                                    caps |= old_policy(&path, p)?;
                                }
                                _ => {}
                            }
                        }
                        hcl::Structure::Block(ib) => {
                            let key = ib.identifier();
                            if !PATH_KEYS.contains(&key) {
                                return Err(format!("path {path:?}: invalid key {key:?}"));
                            }
                        }
                    }
                }
                let _ = seen_caps;
                rules.push(PathRule {
                    path: path.trim_start_matches('/').to_string(),
                    caps: norm(caps),
                });
            }
        }
    }
    Ok(ParsedPolicy { rules })
}

fn parse_json(text: &str) -> Result<ParsedPolicy, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Value::Object(top) = v else {
        return Err("policy must be an object".into());
    };
    let mut rules = Vec::new();
    for (k, val) in &top {
        match k.as_str() {
            "name" => {}
            "path" => {
                let Value::Object(paths) = val else {
                    return Err("path must be an object".into());
                };
                for (path, body) in paths {
                    let Value::Object(body) = body else {
                        return Err(format!("path {path:?}: must be an object"));
                    };
                    let mut caps = 0;
                    for (key, x) in body {
                        if !PATH_KEYS.contains(&key.as_str()) {
                            return Err(format!("path {path:?}: invalid key {key:?}"));
                        }
                        match (key.as_str(), x) {
                            ("capabilities", Value::Array(items)) => {
                                for it in items {
                                    let Some(c) = it.as_str() else {
                                        return Err(format!(
                                            "path {path:?}: capabilities must be a list of strings"
                                        ));
                                    };
                                    caps |= capability(path, c)?;
                                }
                            }
                            ("capabilities", _) => {
                                return Err(format!(
                                    "path {path:?}: capabilities must be a list of strings"
                                ))
                            }
                            ("policy", Value::String(p)) => caps |= old_policy(path, p)?,
                            _ => {}
                        }
                    }
                    rules.push(PathRule {
                        path: path.trim_start_matches('/').to_string(),
                        caps: norm(caps),
                    });
                }
            }
            other => return Err(format!("invalid key {other:?}")),
        }
    }
    Ok(ParsedPolicy { rules })
}

fn norm(caps: u32) -> u32 {
    if caps & DENY != 0 {
        DENY
    } else {
        caps
    }
}

fn capability(path: &str, c: &str) -> Result<u32, String> {
    cap_bit(c).ok_or_else(|| format!("path {path:?}: invalid capability {c:?}"))
}

/// The pre-0.9 `policy = "read"` form, still accepted by the real service.
fn old_policy(path: &str, p: &str) -> Result<u32, String> {
    Ok(match p {
        "deny" => DENY,
        "read" => READ | LIST,
        "write" => CREATE | READ | UPDATE | DELETE | LIST,
        "sudo" => CREATE | READ | UPDATE | DELETE | LIST | SUDO,
        other => return Err(format!("path {path:?}: invalid policy {other:?}")),
    })
}

/// The merged rules of a token's policies.
#[derive(Debug, Default)]
pub struct Acl {
    root: bool,
    exact: HashMap<String, u32>,
    prefix: HashMap<String, u32>,
    segment: HashMap<String, u32>,
}

struct Candidate<'a> {
    first_wc: usize,
    is_prefix: bool,
    wildcards: usize,
    path: &'a str,
    caps: u32,
}

impl Acl {
    pub fn root() -> Self {
        Self {
            root: true,
            ..Self::default()
        }
    }

    /// Builds the ACL of a set of parsed policies. `entity_id` fills the
    /// `{{identity.entity.id}}` template of the default policy; rules whose templates cannot be
    /// filled are skipped.
    pub fn new<'a>(
        policies: impl IntoIterator<Item = &'a ParsedPolicy>,
        entity_id: Option<&str>,
    ) -> Self {
        let mut acl = Self::default();
        for p in policies {
            for r in &p.rules {
                let mut path = r.path.clone();
                if path.contains("{{") {
                    match entity_id {
                        Some(id)
                            if path.contains("{{identity.entity.id}}")
                                && path.matches("{{").count() == 1 =>
                        {
                            path = path.replace("{{identity.entity.id}}", id);
                        }
                        _ => continue,
                    }
                }
                let map = if path.contains('+') {
                    &mut acl.segment
                } else if let Some(p) = path.strip_suffix('*') {
                    path = p.to_string();
                    &mut acl.prefix
                } else {
                    &mut acl.exact
                };
                let e = map.entry(path).or_insert(0);
                if *e & DENY != 0 {
                    continue;
                }
                *e = norm(*e | r.caps);
            }
        }
        acl
    }

    pub fn is_root(&self) -> bool {
        self.root
    }

    /// Whether any rule grants some capability on `prefix` or below it (used to decide which
    /// mounts a token can see, as the real service's API description and UI mount listing do).
    pub fn any_under(&self, prefix: &str) -> bool {
        if self.root {
            return true;
        }
        let ok = |c: &u32| *c & DENY == 0 && *c != 0;
        self.exact
            .iter()
            .any(|(p, c)| p.starts_with(prefix) && ok(c))
            || self
                .prefix
                .iter()
                .any(|(p, c)| (p.starts_with(prefix) || prefix.starts_with(p.as_str())) && ok(c))
            || self.segment.iter().any(|(p, c)| {
                ok(c) && {
                    let pat: Vec<&str> = p.trim_end_matches('*').split('/').collect();
                    let pre: Vec<&str> = prefix.trim_end_matches('/').split('/').collect();
                    pat.iter()
                        .zip(pre.iter())
                        .all(|(a, b)| *a == "+" || a == b || b.starts_with(a))
                }
            })
    }

    /// Capability bitmap granted on `path` (`list` true for a LIST request).
    pub fn caps(&self, path: &str, list: bool) -> u32 {
        if self.root {
            return CREATE | READ | UPDATE | DELETE | LIST | SUDO | PATCH | SUBSCRIBE | RECOVER;
        }
        if let Some(c) = self.exact.get(path) {
            return *c;
        }
        if list {
            if let Some(c) = self.exact.get(path.trim_end_matches('/')) {
                return *c;
            }
        }
        let mut cands: Vec<Candidate> = Vec::new();
        if let Some((p, c)) = self
            .prefix
            .iter()
            .filter(|(p, _)| path.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
        {
            cands.push(Candidate {
                first_wc: p.len(),
                is_prefix: true,
                wildcards: 0,
                path: p,
                caps: *c,
            });
        }
        let parts: Vec<&str> = path.split('/').collect();
        'outer: for (full, caps) in &self.segment {
            let first_wc = full.find('+').unwrap_or(full.len());
            let (cur, is_prefix) = match full.strip_suffix('*') {
                Some(c) => (c, true),
                None => (full.as_str(), false),
            };
            let wc_parts: Vec<&str> = cur.split('/').collect();
            if parts.len() < wc_parts.len() || (!is_prefix && wc_parts.len() != parts.len()) {
                continue;
            }
            let mut wildcards = 0;
            for (i, ap) in wc_parts.iter().enumerate() {
                if *ap == "+" {
                    wildcards += 1;
                } else if *ap == parts[i] {
                } else if is_prefix && i == wc_parts.len() - 1 && parts[i].starts_with(ap) {
                } else {
                    continue 'outer;
                }
            }
            cands.push(Candidate {
                first_wc,
                is_prefix,
                wildcards,
                path: cur,
                caps: *caps,
            });
        }
        cands
            .into_iter()
            .max_by(|a, b| {
                a.first_wc
                    .cmp(&b.first_wc)
                    .then((!a.is_prefix).cmp(&!b.is_prefix))
                    .then(b.wildcards.cmp(&a.wildcards))
                    .then(a.path.len().cmp(&b.path.len()))
                    .then(a.path.cmp(b.path))
            })
            .map(|c| c.caps)
            .unwrap_or(0)
    }

    /// Whether `cap` is granted on `path` (deny removes every capability).
    pub fn allows(&self, path: &str, cap: u32, list: bool) -> bool {
        let c = self.caps(path, list);
        c & DENY == 0 && c & cap != 0
    }
}

/// The built-in `default` policy, as the real service ships it (abridged to the paths an
/// ordinary token needs).
pub const DEFAULT_POLICY: &str = r#"
# Allow tokens to look up their own properties
path "auth/token/lookup-self" {
    capabilities = ["read"]
}

# Allow tokens to renew themselves
path "auth/token/renew-self" {
    capabilities = ["update"]
}

# Allow tokens to revoke themselves
path "auth/token/revoke-self" {
    capabilities = ["update"]
}

# Allow a token to look up its own capabilities on a path
path "sys/capabilities-self" {
    capabilities = ["update"]
}

# Allow a token to look up its own entity by id or name
path "identity/entity/id/{{identity.entity.id}}" {
  capabilities = ["read"]
}
path "identity/entity/name/{{identity.entity.name}}" {
  capabilities = ["read"]
}

# Allow a token to look up its resultant ACL from all policies. This is useful
# for UIs. It is an internal path because the format may change at any time
# based on how the internal ACL features and capabilities change.
path "sys/internal/ui/resultant-acl" {
    capabilities = ["read"]
}

# Allow a token to renew a lease via lease_id in the request body; old path for
# old clients, new path for newer
path "sys/renew" {
    capabilities = ["update"]
}
path "sys/leases/renew" {
    capabilities = ["update"]
}

# Allow looking up lease properties. This requires knowing the lease ID ahead
# of time and does not divulge any sensitive information.
path "sys/leases/lookup" {
    capabilities = ["update"]
}

# Allow a token to manage its own cubbyhole
path "cubbyhole/*" {
    capabilities = ["create", "read", "update", "delete", "list"]
}

# Allow a token to wrap arbitrary values in a response-wrapping token
path "sys/wrapping/wrap" {
    capabilities = ["update"]
}

# Allow a token to look up the creation time and TTL of a given
# response-wrapping token
path "sys/wrapping/lookup" {
    capabilities = ["update"]
}

# Allow a token to unwrap a response-wrapping token. This is a convenience to
# avoid client token swapping since this is also part of the response wrapping
# policy.
path "sys/wrapping/unwrap" {
    capabilities = ["update"]
}

# Allow general purpose tools
path "sys/tools/hash" {
    capabilities = ["update"]
}
path "sys/tools/hash/*" {
    capabilities = ["update"]
}

# Allow checking the status of a Control Group request if the user has the
# accessor
path "sys/control-group/request" {
    capabilities = ["update"]
}

# Allow a token to make requests to the Authorization Endpoint for OIDC providers.
path "identity/oidc/provider/+/authorize" {
    capabilities = ["read", "update"]
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(text: &str) -> Acl {
        let p = parse(text).expect("parses");
        Acl::new([&p], None)
    }

    #[test]
    fn default_policy_parses() {
        let p = parse(DEFAULT_POLICY).expect("default policy parses");
        assert!(p.rules.len() > 10);
    }

    #[test]
    fn glob_and_exact_rules_match() {
        let a = acl(r#"path "secret/*" { capabilities = ["read", "list"] }
                       path "secret/foo" { capabilities = ["deny"] }"#);
        assert!(a.allows("secret/bar", READ, false));
        assert!(!a.allows("secret/foo", READ, false));
        assert!(!a.allows("secret/bar", UPDATE, false));
        assert!(a.allows("secret/", LIST, true));
    }

    #[test]
    fn segment_wildcards_match_one_segment() {
        let a = acl(r#"path "secret/+/config" { capabilities = ["read"] }"#);
        assert!(a.allows("secret/a/config", READ, false));
        assert!(!a.allows("secret/a/b/config", READ, false));
    }

    #[test]
    fn more_specific_glob_wins() {
        let a = acl(r#"path "sys/*" { capabilities = ["read"] }
                       path "sys/policies/*" { capabilities = ["update"] }"#);
        assert!(!a.allows("sys/policies/acl/x", READ, false));
        assert!(a.allows("sys/policies/acl/x", UPDATE, false));
    }

    #[test]
    fn bad_capability_is_rejected() {
        assert!(parse(r#"path "x" { capabilities = ["fly"] }"#).is_err());
        assert!(parse(r#"bogus "x" { }"#).is_err());
        assert!(parse(r#"path "x" { "#).is_err());
    }
}
