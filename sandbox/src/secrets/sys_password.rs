//! `sys/policies/password/:name`: password policies (used by the directory engine's
//! `password_policy`), as the real service serves them: the policy is HCL with `length` and
//! `rule "charset" { charset = "...", min-chars = N }` blocks; `generate` returns a password.

use rand::seq::IndexedRandom;
use serde_json::json;

use super::fields;
use super::http::{ApiError, Resp};
use super::route::Route;
use super::{Ctx, Store};

pub fn routes() -> Vec<Route> {
    vec![
        Route::new("policies/password")
            .list(list)
            .doc("List password policies.", ""),
        Route::new("policies/password/:name/generate")
            .read(generate_h)
            .doc("Generate a password from a policy.", ""),
        Route::new("policies/password/:name")
            .read(read)
            .write(write)
            .delete(delete)
            .doc("Manage a password policy.", ""),
    ]
}

struct Parsed {
    length: usize,
    rules: Vec<(Vec<char>, usize)>,
}

fn parse(text: &str) -> Result<Parsed, String> {
    let body = hcl::parse(text).map_err(|e| e.to_string())?;
    let mut length = 0usize;
    let mut rules = Vec::new();
    for s in body.iter() {
        match s {
            hcl::Structure::Attribute(a) if a.key() == "length" => match a.expr() {
                hcl::Expression::Number(n) => length = n.as_u64().unwrap_or(0) as usize,
                _ => return Err("length must be a number".into()),
            },
            hcl::Structure::Attribute(a) => return Err(format!("invalid key {:?}", a.key())),
            hcl::Structure::Block(b) if b.identifier() == "rule" => {
                let mut charset = Vec::new();
                let mut min = 0usize;
                for inner in b.body().attributes() {
                    match (inner.key(), inner.expr()) {
                        ("charset", hcl::Expression::String(cs)) => charset = cs.chars().collect(),
                        ("min-chars", hcl::Expression::Number(n)) => {
                            min = n.as_u64().unwrap_or(0) as usize
                        }
                        (k, _) => return Err(format!("invalid rule field {k:?}")),
                    }
                }
                if charset.is_empty() {
                    return Err("charset rule needs a non-empty charset".into());
                }
                rules.push((charset, min));
            }
            hcl::Structure::Block(b) => return Err(format!("invalid key {:?}", b.identifier())),
        }
    }
    if length > 4096 {
        return Err(format!("length must be <= 4096 (got {length})"));
    }
    if length < 4 {
        return Err(format!("length must be >= 4 (got {length})"));
    }
    if rules.is_empty() {
        return Err("no rules specified".into());
    }
    if rules.iter().map(|(_, m)| m).sum::<usize>() > length {
        return Err("the minimum characters of the rules exceed the length".into());
    }
    Ok(Parsed { length, rules })
}

fn gen(p: &Parsed) -> String {
    let mut rng = rand::rng();
    let mut chars: Vec<char> = Vec::new();
    for (cs, min) in &p.rules {
        for _ in 0..*min {
            chars.push(*cs.choose(&mut rng).unwrap_or(&'x'));
        }
    }
    let all: Vec<char> = p
        .rules
        .iter()
        .flat_map(|(cs, _)| cs.iter().copied())
        .collect();
    while chars.len() < p.length {
        chars.push(*all.choose(&mut rng).unwrap_or(&'x'));
    }
    use rand::seq::SliceRandom;
    chars.shuffle(&mut rng);
    chars.into_iter().collect()
}

/// Generates a password from the named policy.
pub fn generate(store: &Store, name: &str) -> Result<String, ApiError> {
    let Some(text) = store.password_policies.get(name) else {
        return Err(ApiError::bad_request(format!(
            "policy {name:?} doesn't exist"
        )));
    };
    let p = parse(text).map_err(|e| ApiError::internal(format!("invalid password policy: {e}")))?;
    Ok(gen(&p))
}

fn list(c: &mut Ctx) -> Result<Resp, ApiError> {
    Resp::list(
        c.store()
            .password_policies
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
    )
}

fn read(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store()
        .password_policies
        .get(&n)
        .map(|p| Resp::data(json!({ "policy": p })))
        .ok_or_else(ApiError::not_found)
}

fn write(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let mut text = fields::string_or(&c.data, "policy", "")?;
    if text.is_empty() {
        return Err(ApiError::bad_request("missing policy"));
    }
    use base64::Engine;
    if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(text.as_bytes()) {
        if let Ok(s) = String::from_utf8(b) {
            text = s;
        }
    }
    parse(&text).map_err(|e| ApiError::bad_request(format!("invalid password policy: {e}")))?;
    c.store().password_policies.insert(n, text);
    Ok(Resp::no_content())
}

fn delete(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    c.store().password_policies.remove(&n);
    Ok(Resp::no_content())
}

fn generate_h(c: &mut Ctx) -> Result<Resp, ApiError> {
    let n = c.param("name");
    let pw = generate(c.store(), &n)?;
    Ok(Resp::data(json!({ "password": pw })))
}
