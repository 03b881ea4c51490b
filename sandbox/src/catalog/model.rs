//! The catalog's ACL state: tokens, policies, roles, auth methods, binding rules, datacenters
//! and the bootstrap marker, with the JSON shapes of the real service (Consul).

use std::collections::BTreeMap;

use base64::Engine;
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub const GLOBAL_MANAGEMENT_ID: &str = "00000000-0000-0000-0000-000000000001";
pub const ANONYMOUS_ACCESSOR: &str = "00000000-0000-0000-0000-000000000002";
pub const PRIMARY_DC: &str = "dc1";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Link {
    pub id: String,
    pub name: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Token {
    pub accessor_id: String,
    pub secret_id: String,
    pub description: String,
    pub policies: Vec<Link>,
    pub roles: Vec<Link>,
    pub service_identities: Vec<String>,
    pub node_identities: Vec<(String, String)>,
    pub local: bool,
    /// The datacenter a local token lives in.
    pub datacenter: String,
    pub auth_method: String,
    pub auth_method_namespace: String,
    pub namespace: String,
    pub expiration_time: Option<DateTime<Utc>>,
    pub create_time: DateTime<Utc>,
    pub create_index: u64,
    pub modify_index: u64,
}

impl Token {
    /// Consul's Hash is a digest of the token's permission-relevant fields.
    fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.description.as_bytes());
        for p in &self.policies {
            h.update(p.id.as_bytes());
        }
        for r in &self.roles {
            h.update(r.id.as_bytes());
        }
        for s in &self.service_identities {
            h.update(s.as_bytes());
        }
        h.update([self.local as u8]);
        base64::engine::general_purpose::STANDARD.encode(h.finalize())
    }

    /// The token as the real service renders it (empty lists and the auth method omitted,
    /// `Namespace`/`Partition` only in the enterprise edition).
    pub fn to_api(&self, enterprise: bool) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("AccessorID".into(), json!(self.accessor_id));
        m.insert("SecretID".into(), json!(self.secret_id));
        m.insert("Description".into(), json!(self.description));
        if !self.policies.is_empty() {
            m.insert(
                "Policies".into(),
                json!(self
                    .policies
                    .iter()
                    .map(|l| json!({"ID": l.id, "Name": l.name}))
                    .collect::<Vec<_>>()),
            );
        }
        if !self.roles.is_empty() {
            m.insert(
                "Roles".into(),
                json!(self
                    .roles
                    .iter()
                    .map(|l| json!({"ID": l.id, "Name": l.name}))
                    .collect::<Vec<_>>()),
            );
        }
        if !self.service_identities.is_empty() {
            m.insert(
                "ServiceIdentities".into(),
                json!(self
                    .service_identities
                    .iter()
                    .map(|s| json!({"ServiceName": s}))
                    .collect::<Vec<_>>()),
            );
        }
        if !self.node_identities.is_empty() {
            m.insert(
                "NodeIdentities".into(),
                json!(self
                    .node_identities
                    .iter()
                    .map(|(n, dc)| json!({"NodeName": n, "Datacenter": dc}))
                    .collect::<Vec<_>>()),
            );
        }
        m.insert("Local".into(), json!(self.local));
        if !self.auth_method.is_empty() {
            m.insert("AuthMethod".into(), json!(self.auth_method));
        }
        if let Some(t) = self.expiration_time {
            m.insert(
                "ExpirationTime".into(),
                json!(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            );
        }
        m.insert(
            "CreateTime".into(),
            json!(self
                .create_time
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        );
        m.insert("Hash".into(), json!(self.hash()));
        if enterprise {
            m.insert("Namespace".into(), json!(self.namespace));
            m.insert("Partition".into(), json!("default"));
            if !self.auth_method.is_empty() {
                m.insert(
                    "AuthMethodNamespace".into(),
                    json!(self.auth_method_namespace),
                );
            }
        }
        m.insert("CreateIndex".into(), json!(self.create_index));
        m.insert("ModifyIndex".into(), json!(self.modify_index));
        Value::Object(m)
    }

    /// The token list stub (no secret).
    pub fn to_stub(&self, enterprise: bool) -> Value {
        let mut v = self.to_api(enterprise);
        if let Some(m) = v.as_object_mut() {
            m.remove("SecretID");
            m.insert("Legacy".into(), json!(false));
        }
        v
    }

    pub fn expired(&self) -> bool {
        self.expiration_time
            .map(|t| t <= Utc::now())
            .unwrap_or(false)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Policy {
    pub id: String,
    pub name: String,
    pub description: String,
    pub rules: String,
    pub create_index: u64,
    pub modify_index: u64,
}

impl Policy {
    /// The access level the policy grants on the `acl` resource (`acl = "read"|"write"|"deny"`).
    /// Rules in JSON form (`{"acl": "read"}`) count too: Consul's policy parser is HCL's, which
    /// reads JSON, and py-consul's `acl.policy.create(rules=...)` sends its rules through
    /// `json.dumps`, so a dict of rules arrives in that form.
    pub fn acl_level(&self) -> Option<&'static str> {
        if self.id == GLOBAL_MANAGEMENT_ID {
            return Some("write");
        }
        if let Ok(Value::Object(rules)) = serde_json::from_str::<Value>(&self.rules) {
            return match rules.get("acl").and_then(Value::as_str) {
                Some("deny") => Some("deny"),
                Some("write") => Some("write"),
                Some("read") => Some("read"),
                _ => None,
            };
        }
        let compact: String = self.rules.chars().filter(|c| !c.is_whitespace()).collect();
        for level in ["deny", "write", "read"] {
            if compact.contains(&format!("acl=\"{level}\"")) {
                return Some(level);
            }
        }
        None
    }

    pub fn to_api(&self) -> Value {
        json!({
            "ID": self.id, "Name": self.name, "Description": self.description, "Rules": self.rules,
            "Hash": base64::engine::general_purpose::STANDARD.encode(Sha256::digest(self.rules.as_bytes())),
            "CreateIndex": self.create_index, "ModifyIndex": self.modify_index,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Role {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub policies: Vec<String>,
    pub service_identities: Vec<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub create_index: u64,
    #[serde(default)]
    pub modify_index: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuthMethod {
    pub name: String,
    /// `kubernetes` or `oidc`.
    pub kind: String,
    pub namespace: String,
    pub display_name: String,
    pub description: String,
    pub max_token_ttl_secs: Option<u64>,
    /// `local` (default) or `global`.
    pub token_locality: String,
    pub config: BTreeMap<String, Value>,
    #[serde(default)]
    pub create_index: u64,
    #[serde(default)]
    pub modify_index: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BindingRule {
    pub id: String,
    pub auth_method: String,
    pub namespace: String,
    pub selector: String,
    /// `service`, `role`, `policy` or `node`.
    pub bind_type: String,
    pub bind_name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub create_index: u64,
    #[serde(default)]
    pub modify_index: u64,
}

/// An OIDC flow started by auth-url, waiting for its callback.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OidcState {
    pub state: String,
    pub nonce: String,
    pub auth_method: String,
    pub namespace: String,
    pub redirect_uri: String,
    pub client_nonce: String,
    pub meta: BTreeMap<String, String>,
    pub created: DateTime<Utc>,
}

/// A code the emulated OIDC provider issued, exchangeable once.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OidcCode {
    pub client_id: String,
    pub redirect_uri: String,
    pub nonce: String,
    pub subject: String,
}

/// A user of the emulated OIDC provider and the claims of its ID token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OidcUser {
    pub subject: String,
    pub claims: serde_json::Map<String, Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Secondary {
    pub name: String,
    pub token_replication: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplicationFault {
    pub message: String,
    pub at: DateTime<Utc>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub index: u64,
    pub enterprise: bool,
    /// Raft index of the bootstrap (or initial-management setup); the "reset index" of the
    /// 403 answered to later bootstrap calls.
    pub bootstrap_index: Option<u64>,
    pub tokens: Vec<Token>,
    pub policies: Vec<Policy>,
    pub roles: Vec<Role>,
    pub auth_methods: Vec<AuthMethod>,
    pub binding_rules: Vec<BindingRule>,
    pub secondary: Option<Secondary>,
    /// The last replication error: never cleared (the real status keeps `LastError` and
    /// `LastErrorMessage` after recovery; health is `LastError` later than `LastSuccess`).
    pub replication_fault: Option<ReplicationFault>,
    /// Replication is failing now: writes do not move `LastSuccess`.
    #[serde(default)]
    pub replication_failing: bool,
    /// What the secondary had replicated when replication started failing (policy, role and
    /// token indexes): the real status keeps `ReplicatedIndex`/`ReplicatedTokenIndex` at the
    /// last successful round while the primary moves on, so the lag grows until recovery.
    #[serde(default)]
    pub replicated_at_failure: Option<[u64; 3]>,
    /// Answer bootstrap 403s as a follower does (`Permission denied: rpc error making call:
    /// ACL bootstrap no longer allowed (reset index: N)`).
    #[serde(default)]
    pub bootstrap_from_follower: bool,
    pub last_replication: DateTime<Utc>,
    pub tokens_index: u64,
    pub policies_index: u64,
    pub roles_index: u64,
    pub oidc_states: Vec<OidcState>,
    pub oidc_codes: BTreeMap<String, OidcCode>,
    pub oidc_users: BTreeMap<String, OidcUser>,
}

impl State {
    pub fn new(enterprise: bool) -> Self {
        let policy = Policy {
            id: GLOBAL_MANAGEMENT_ID.into(),
            name: "global-management".into(),
            description: "Builtin Policy that grants unlimited access".into(),
            rules: String::new(),
            create_index: 1,
            modify_index: 1,
        };
        Self {
            index: 1,
            enterprise,
            bootstrap_index: None,
            tokens: Vec::new(),
            policies: vec![policy],
            roles: Vec::new(),
            auth_methods: Vec::new(),
            binding_rules: Vec::new(),
            secondary: None,
            replication_fault: None,
            replication_failing: false,
            replicated_at_failure: None,
            bootstrap_from_follower: false,
            last_replication: Utc::now().round_subsecs(0),
            tokens_index: 1,
            policies_index: 1,
            roles_index: 1,
            oidc_states: Vec::new(),
            oidc_codes: BTreeMap::new(),
            oidc_users: BTreeMap::new(),
        }
    }

    /// Next raft index. Every write is a change a secondary replicates, so it also moves the
    /// secondary's LastSuccess (the real one updates after each replication round).
    pub fn bump(&mut self) -> u64 {
        self.index += 1;
        if !self.replication_failing {
            self.replication_succeeded();
        }
        self.index
    }

    /// A replication round succeeded now: `LastSuccess` moves (second precision, as rendered),
    /// strictly after the last error so a recovery reads healthy.
    pub fn replication_succeeded(&mut self) {
        let mut at = Utc::now().round_subsecs(0);
        if let Some(f) = &self.replication_fault {
            let after = f.at.round_subsecs(0) + chrono::Duration::seconds(1);
            if at < after {
                at = after;
            }
        }
        if at > self.last_replication {
            self.last_replication = at;
        }
        self.replicated_at_failure = None;
    }

    /// The secondary's replicated (policy, role, token) indexes: the primary's current ones
    /// while replication works, frozen at the first failure while it fails.
    pub fn replicated_indexes(&self) -> [u64; 3] {
        self.replicated_at_failure.unwrap_or([
            self.policies_index,
            self.roles_index,
            self.tokens_index,
        ])
    }

    /// A replication round failed now with `message`: `LastError` moves (strictly after the
    /// last success), `LastSuccess` stays until a round succeeds.
    pub fn replication_failed(&mut self, message: String) {
        let mut at = Utc::now().round_subsecs(0);
        let after = self.last_replication + chrono::Duration::seconds(1);
        if at < after {
            at = after;
        }
        self.replication_fault = Some(ReplicationFault { message, at });
        if !self.replication_failing {
            self.replicated_at_failure = Some(self.replicated_indexes());
        }
        self.replication_failing = true;
    }

    /// A management token with the given secret (bootstrap and initial management).
    pub fn management_token(&mut self, secret: String, description: &str) -> Token {
        let index = self.bump();
        let token = Token {
            accessor_id: uuid::Uuid::new_v4().to_string(),
            secret_id: secret,
            description: description.into(),
            policies: vec![Link {
                id: GLOBAL_MANAGEMENT_ID.into(),
                name: "global-management".into(),
            }],
            roles: Vec::new(),
            service_identities: Vec::new(),
            node_identities: Vec::new(),
            local: false,
            datacenter: PRIMARY_DC.into(),
            auth_method: String::new(),
            auth_method_namespace: String::new(),
            namespace: "default".into(),
            expiration_time: None,
            create_time: Utc::now(),
            create_index: index,
            modify_index: index,
        };
        self.tokens.push(token.clone());
        self.tokens_index = index;
        if !self.replication_failing {
            self.replication_succeeded();
        }
        token
    }

    /// A token usable in datacenter `dc` (global tokens everywhere, local ones only at home).
    pub fn token_by_secret(&self, secret: &str, dc: &str) -> Option<&Token> {
        self.tokens
            .iter()
            .find(|t| t.secret_id == secret && (!t.local || t.datacenter == dc) && !t.expired())
    }

    pub fn datacenter_known(&self, dc: &str) -> bool {
        dc == PRIMARY_DC
            || self
                .secondary
                .as_ref()
                .map(|s| s.name == dc)
                .unwrap_or(false)
    }

    /// The access a token has on the `acl` resource: through its policies and its roles'.
    pub fn acl_level(&self, token: &Token) -> Option<&'static str> {
        let mut ids: Vec<String> = token.policies.iter().map(|l| l.id.clone()).collect();
        for r in &token.roles {
            if let Some(role) = self.roles.iter().find(|x| x.id == r.id) {
                for name in &role.policies {
                    if let Some(p) = self.policies.iter().find(|p| &p.name == name) {
                        ids.push(p.id.clone());
                    }
                }
            }
        }
        let levels: Vec<&'static str> = ids
            .iter()
            .filter_map(|id| self.policies.iter().find(|p| &p.id == id))
            .filter_map(|p| p.acl_level())
            .collect();
        if levels.contains(&"deny") {
            Some("deny")
        } else if levels.contains(&"write") {
            Some("write")
        } else if levels.contains(&"read") {
            Some("read")
        } else {
            None
        }
    }
}
