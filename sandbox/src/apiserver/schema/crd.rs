//! Validation of `CustomResourceDefinition` objects before they are stored.

use serde_json::Value;

use super::FieldError;

pub(crate) fn validate(crd: &Value) -> Vec<FieldError> {
    let _ = crd;
    Vec::new()
}
