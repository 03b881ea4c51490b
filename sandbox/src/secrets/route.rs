//! The route table: each backend (system, token, identity-provider auth, identity, transform,
//! directory) declares its paths, operations and properties (sudo, unauthenticated, root
//! namespace only, licence). The dispatcher and the API description both read it.

use std::collections::HashMap;

use super::http::{ApiError, Op, Resp};
use super::Ctx;

pub type Handler = fn(&mut Ctx) -> Result<Resp, ApiError>;
pub type ExistFn = fn(&mut Ctx) -> bool;

/// Which licence a path needs. Without it the server behaves as one that does not have the
/// feature at all: the path is not registered (404 `unsupported path`), as on the community
/// edition of the real service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Licence {
    None,
    Enterprise,
    Premium,
}

pub struct Route {
    pub pattern: &'static str,
    pub ops: Vec<(Op, Handler)>,
    pub exists: Option<ExistFn>,
    pub sudo: bool,
    /// sudo needed for the list operation only.
    pub sudo_list: bool,
    pub unauth: bool,
    pub root_ns: bool,
    /// Allowed on a DR secondary (the real service serves only a few paths there).
    pub dr_secondary: bool,
    pub licence: Licence,
    pub summary: &'static str,
    pub description: &'static str,
}

impl Route {
    pub fn new(pattern: &'static str) -> Self {
        Self {
            pattern,
            ops: Vec::new(),
            exists: None,
            sudo: false,
            sudo_list: false,
            unauth: false,
            root_ns: false,
            dr_secondary: false,
            licence: Licence::None,
            summary: "",
            description: "",
        }
    }
    pub fn read(mut self, h: Handler) -> Self {
        self.ops.push((Op::Read, h));
        self
    }
    pub fn list(mut self, h: Handler) -> Self {
        self.ops.push((Op::List, h));
        self
    }
    /// Create and update with one handler.
    pub fn write(mut self, h: Handler) -> Self {
        self.ops.push((Op::Create, h));
        self.ops.push((Op::Update, h));
        self
    }
    pub fn delete(mut self, h: Handler) -> Self {
        self.ops.push((Op::Delete, h));
        self
    }
    pub fn exists(mut self, f: ExistFn) -> Self {
        self.exists = Some(f);
        self
    }
    pub fn sudo(mut self) -> Self {
        self.sudo = true;
        self
    }
    pub fn sudo_list(mut self) -> Self {
        self.sudo_list = true;
        self
    }
    pub fn unauth(mut self) -> Self {
        self.unauth = true;
        self
    }
    pub fn root_ns(mut self) -> Self {
        self.root_ns = true;
        self
    }
    pub fn dr_secondary(mut self) -> Self {
        self.dr_secondary = true;
        self
    }
    pub fn licence(mut self, l: Licence) -> Self {
        self.licence = l;
        self
    }
    pub fn doc(mut self, summary: &'static str, description: &'static str) -> Self {
        self.summary = summary;
        self.description = description;
        self
    }

    pub fn handler(&self, op: Op) -> Option<Handler> {
        self.ops.iter().find(|(o, _)| *o == op).map(|(_, h)| *h)
    }

    /// Matches a mount-relative path; returns the path parameters.
    pub fn matches(&self, path: &str) -> Option<HashMap<String, String>> {
        let path = path.trim_end_matches('/');
        let pat_parts: Vec<&str> = if self.pattern.is_empty() {
            vec![]
        } else {
            self.pattern.split('/').collect()
        };
        let parts: Vec<&str> = if path.is_empty() {
            vec![]
        } else {
            path.split('/').collect()
        };
        let mut params = HashMap::new();
        for (i, pp) in pat_parts.iter().enumerate() {
            if let Some(name) = pp.strip_prefix('*') {
                if i >= parts.len() {
                    return None;
                }
                let rest = parts[i..].join("/");
                if rest.is_empty() {
                    return None;
                }
                params.insert(name.to_string(), rest);
                return Some(params);
            }
            let part = parts.get(i)?;
            if let Some(name) = pp.strip_prefix(':') {
                if part.is_empty() {
                    return None;
                }
                params.insert(name.to_string(), part.to_string());
            } else if pp != part {
                return None;
            }
        }
        if parts.len() != pat_parts.len() {
            return None;
        }
        Some(params)
    }
}
