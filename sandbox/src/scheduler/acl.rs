//! The scheduler's ACL system: policies with namespace rules (a `policy` disposition and/or
//! explicit `capabilities`, as in the real scheduler's policy language) and tokens, set up
//! through the admin API. The sandbox's root token is a management token.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::wire::ApiError;

/// Capabilities that `policy = "read"` grants on a namespace.
const READ: &[&str] = &[
    "list-jobs",
    "parse-job",
    "read-job",
    "csi-list-volume",
    "csi-read-volume",
    "read-job-scaling",
    "list-scaling-policies",
    "read-scaling-policy",
];

/// Capabilities that `policy = "write"` adds to read.
const WRITE: &[&str] = &[
    "scale-job",
    "submit-job",
    "dispatch-job",
    "read-logs",
    "read-fs",
    "alloc-exec",
    "alloc-lifecycle",
    "csi-mount-volume",
    "csi-write-volume",
    "submit-recommendation",
];

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NamespaceRule {
    #[serde(default, rename = "Policy", alias = "policy")]
    pub policy: Option<String>,
    #[serde(default, rename = "Capabilities", alias = "capabilities")]
    pub capabilities: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Policy {
    pub name: String,
    pub description: String,
    pub namespaces: BTreeMap<String, NamespaceRule>,
    pub create_index: u64,
    /// The HCL rules as written through `/v1/acl/policy` (empty for admin-API policies).
    #[serde(default)]
    pub rules: String,
    #[serde(default)]
    pub modify_index: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Token {
    pub accessor_id: String,
    pub secret_id: String,
    pub name: String,
    /// `client` or `management`.
    pub kind: String,
    pub policies: Vec<String>,
    pub create_index: u64,
    pub create_time: chrono::DateTime<chrono::Utc>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AclState {
    pub policies: BTreeMap<String, Policy>,
    /// Tokens keyed by secret.
    pub tokens: BTreeMap<String, Token>,
    /// Policies of the anonymous token (used when a request carries no token).
    #[serde(default)]
    pub anonymous_policies: Vec<String>,
}

/// What a request's token may do.
pub enum Acl {
    Management,
    Client(Vec<Policy>),
}

fn glob_match(pattern: &str, s: &str) -> bool {
    // Simple `*` glob, as the real scheduler's namespace rules allow.
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(pos) => rest = &rest[pos + p.len()..],
                None => return false,
            }
        }
    }
    true
}

impl Acl {
    /// Whether the token holds `cap` on namespace `ns`. An exact namespace rule wins over glob
    /// rules (the closest glob, i.e. the longest, applies); `deny` anywhere for the matched
    /// namespace denies.
    pub fn allow(&self, ns: &str, caps: &[&str]) -> bool {
        let policies = match self {
            Acl::Management => return true,
            Acl::Client(p) => p,
        };
        let mut granted: BTreeSet<String> = BTreeSet::new();
        let mut denied = false;
        for p in policies {
            let rule = p.namespaces.get(ns).or_else(|| {
                p.namespaces
                    .iter()
                    .filter(|(pat, _)| pat.contains('*') && glob_match(pat, ns))
                    .max_by_key(|(pat, _)| pat.len())
                    .map(|(_, r)| r)
            });
            let Some(rule) = rule else { continue };
            match rule.policy.as_deref() {
                Some("deny") => denied = true,
                Some("read") => granted.extend(READ.iter().map(|s| s.to_string())),
                Some("write") => {
                    granted.extend(READ.iter().map(|s| s.to_string()));
                    granted.extend(WRITE.iter().map(|s| s.to_string()));
                }
                Some("scale") => granted.extend(
                    [
                        "list-scaling-policies",
                        "read-scaling-policy",
                        "read-job-scaling",
                        "scale-job",
                    ]
                    .map(String::from),
                ),
                _ => {}
            }
            for c in &rule.capabilities {
                if c == "deny" {
                    denied = true;
                }
                granted.insert(c.clone());
            }
        }
        !denied && caps.iter().any(|c| granted.contains(*c))
    }
}

impl AclState {
    /// Resolve the request's token. No token is the anonymous token; an unknown secret is
    /// refused with "Permission denied" like current releases of the real scheduler do.
    pub fn resolve(&self, token: Option<&str>, root_token: &str) -> Result<Acl, ApiError> {
        let names = match token {
            None => self.anonymous_policies.clone(),
            Some(t) if t == root_token => return Ok(Acl::Management),
            Some(t) => match self.tokens.get(t) {
                Some(tok) if tok.kind == "management" => return Ok(Acl::Management),
                Some(tok) => tok.policies.clone(),
                None => return Err(ApiError::permission_denied()),
            },
        };
        Ok(Acl::Client(
            names
                .iter()
                .filter_map(|n| self.policies.get(n).cloned())
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match() {
        assert!(glob_match("*", "default"));
        assert!(glob_match("prod-*", "prod-web"));
        assert!(!glob_match("prod-*", "dev-web"));
    }
}
