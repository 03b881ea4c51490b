//! The options of a create, update or patch, checked as kube's handlers check them before
//! anything else (`ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`):
//! a `dryRun` other than `All`, an unknown `fieldValidation`, a `fieldManager` too long or with
//! an unprintable character, an apply without a `fieldManager` and `force` on any other patch
//! are refused with the real 422 (`PatchOptions.meta.k8s.io "" is invalid: ...`).

use serde_json::{json, Value};

use super::error::ApiError;
use super::patch::PatchType;
use super::schema::{self, go_printable as printable, FieldError};

/// `FieldManagerMaxLength`.
const FIELD_MANAGER_MAX: usize = 128;

/// Which write the options are of.
#[derive(Clone, Copy, Debug)]
pub enum Write {
    Create,
    Update,
    Patch(PatchType),
}

/// Every value of a query parameter, decoded, in order (as Go's `url.Values` holds them).
fn values(raw: Option<&str>, key: &str) -> Vec<String> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    raw.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .filter(|(k, _)| decode(k) == key)
        .map(|(_, v)| decode(v))
        .collect()
}

/// Go's `%#U`: `U+0041 'A'`, without the character when it is not printable.
fn go_rune(c: char) -> String {
    if printable(c) {
        format!("U+{:04X} '{c}'", c as u32)
    } else {
        format!("U+{:04X}", c as u32)
    }
}

/// The errors of the write's options, in kube's order.
fn errors(write: Write, raw: Option<&str>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let manager = values(raw, "fieldManager")
        .into_iter()
        .next()
        .unwrap_or_default();
    if let Write::Patch(ptype) = write {
        if ptype == PatchType::Apply {
            if manager.is_empty() {
                errs.push(FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                ));
            }
        } else if !values(raw, "force").is_empty() {
            errs.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
    }
    if manager.len() > FIELD_MANAGER_MAX {
        errs.push(FieldError::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX as i64,
        ));
    }
    for (i, c) in manager.char_indices().filter(|(_, c)| !printable(*c)) {
        errs.push(FieldError::invalid(
            "fieldManager",
            &json!(manager),
            &format!("invalid character {} (at position {i})", go_rune(c)),
        ));
    }
    let dry_run = values(raw, "dryRun");
    if dry_run.iter().any(|v| v != "All") {
        errs.push(FieldError::not_supported(
            "dryRun",
            &json!(dry_run),
            &["All".to_string()],
        ));
    }
    let validation = values(raw, "fieldValidation")
        .into_iter()
        .next()
        .unwrap_or_default();
    if !matches!(validation.as_str(), "" | "Ignore" | "Warn" | "Strict") {
        errs.push(FieldError::not_supported(
            "fieldValidation",
            &Value::String(validation),
            &["", "Ignore", "Strict", "Warn"].map(String::from),
        ));
    }
    errs
}

/// The 422 a real server gives the write's options, if any.
pub fn check(write: Write, raw: Option<&str>) -> Result<(), ApiError> {
    let errs = errors(write, raw);
    if errs.is_empty() {
        return Ok(());
    }
    let kind = match write {
        Write::Create => "CreateOptions",
        Write::Update => "UpdateOptions",
        Write::Patch(_) => "PatchOptions",
    };
    Err(ApiError::from_body(
        422,
        schema::invalid_status(kind, "meta.k8s.io", "", &errs),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(write: Write, q: &str) -> String {
        check(write, Some(q)).unwrap_err().message
    }

    #[test]
    fn every_error_of_the_options_is_reported_in_kubes_order_and_words() {
        assert_eq!(
            message(Write::Create, "dryRun=Foo&fieldValidation=bogus&fieldManager=%01x"),
            "CreateOptions.meta.k8s.io \"\" is invalid: [fieldManager: Invalid value: \"\\x01x\": invalid character U+0001 (at position 0), dryRun: Unsupported value: [\"Foo\"]: supported values: \"All\", fieldValidation: Unsupported value: \"bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"]"
        );
        assert_eq!(
            message(Write::Patch(PatchType::Merge), "force=false"),
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert_eq!(
            message(Write::Update, &format!("fieldManager={}", "m".repeat(129))),
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
        );
        assert_eq!(
            message(Write::Create, "dryRun=All&dryRun="),
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"All\",\"\"]: supported values: \"All\""
        );
        assert!(check(
            Write::Patch(PatchType::Apply),
            Some("fieldManager=q&force=true&dryRun=All")
        )
        .is_ok());
    }
}
