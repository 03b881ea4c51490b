//! Engine and module versions: exact versions and the engine's constraint syntax
//! (`= 1.2.3`, `!=`, `>`, `>=`, `<`, `<=`, `~> 1.0.0`, comma-separated, all must hold).

/// `1.2.3` (also `1.2`, `1`) as a comparable triple; pre-release suffixes are not offered.
pub fn parse(s: &str) -> Option<(u64, u64, u64)> {
    let s = s.trim().trim_start_matches('v');
    let mut parts = s.split('.');
    let a = parts.next()?.parse().ok()?;
    let b = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    let c = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((a, b, c))
}

fn parts(s: &str) -> usize {
    s.trim().split('.').count()
}

/// Whether `v` satisfies the constraint; `None` when the constraint is malformed.
pub fn matches(constraint: &str, v: (u64, u64, u64)) -> Option<bool> {
    for clause in constraint.split(',') {
        let c = clause.trim();
        let (op, rest) = ["~>", ">=", "<=", "!=", ">", "<", "="]
            .iter()
            .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim())))
            .unwrap_or(("=", c));
        let want = parse(rest)?;
        let ok = match op {
            "=" => v == want,
            "!=" => v != want,
            ">" => v > want,
            ">=" => v >= want,
            "<" => v < want,
            "<=" => v <= want,
            "~>" => {
                // `~> 1.2.3` allows 1.2.x (x ≥ 3); `~> 1.2` allows 1.x (≥ 1.2); `~> 1` allows ≥ 1.
                let upper = match parts(rest) {
                    1 => (u64::MAX, 0, 0),
                    2 => (want.0 + 1, 0, 0),
                    _ => (want.0, want.1 + 1, 0),
                };
                v >= want && v < upper
            }
            _ => return None,
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

/// The newest of `available` satisfying `constraint` (an exact version is its own constraint).
pub fn resolve(constraint: &str, available: &[String]) -> Option<String> {
    if constraint == "latest" {
        return newest(available);
    }
    available
        .iter()
        .filter_map(|a| parse(a).map(|p| (p, a)))
        .filter(|(p, _)| matches(constraint, *p) == Some(true))
        .max_by_key(|(p, _)| *p)
        .map(|(_, a)| a.clone())
}

pub fn newest(available: &[String]) -> Option<String> {
    available
        .iter()
        .filter_map(|a| parse(a).map(|p| (p, a)))
        .max_by_key(|(p, _)| *p)
        .map(|(_, a)| a.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pessimistic_constraint_selects_newest_patch() {
        let avail: Vec<String> = ["1.0.1", "1.0.9", "1.1.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(resolve("~> 1.0.0", &avail).as_deref(), Some("1.0.9"));
        assert_eq!(resolve("~> 1.0", &avail).as_deref(), Some("1.1.0"));
        assert_eq!(resolve(">= 1.0.2, < 1.1", &avail).as_deref(), Some("1.0.9"));
        assert_eq!(resolve("2.0.0", &avail), None);
    }
}
