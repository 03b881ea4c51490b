//! A CRD fixture shared by the schema tests (modelled on Quartet's SecretsPolicy).
#![allow(dead_code)]

use serde_json::{json, Value};

pub fn spec_schema() -> Value {
    json!({
        "type": "object",
        "description": "SecretsPolicySpec defines a policy in the secrets service.",
        "required": ["policy"],
        "properties": {
            "policy": {"type": "string", "description": "The policy document (HCL)."},
            "type": {"type": "string", "enum": ["acl", "rgp", "egp"], "default": "acl"},
            "name": {"type": "string", "maxLength": 64, "minLength": 1, "pattern": "^[a-z][a-z0-9-]*$"},
            "count": {"type": "integer", "minimum": 0, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
            "port": {"x-kubernetes-int-or-string": true},
            "note": {"type": "string", "nullable": true},
            "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3,
                       "x-kubernetes-list-type": "set"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"},
                        "minProperties": 1, "maxProperties": 2},
            "rules": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "required": ["name"], "properties": {
                           "name": {"type": "string"},
                           "enabled": {"type": "boolean", "default": true}}}},
            "options": {"type": "object", "default": {}, "properties": {
                "ttl": {"type": "string", "default": "1h"},
                "renew": {"type": "boolean"}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                          "x-kubernetes-preserve-unknown-fields": true},
            "uid": {"type": "string", "format": "uuid"},
            "when": {"type": "string", "format": "date-time"},
        }
    })
}

pub fn crd_with(spec: Value, extra_root: Value) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "items": {"type": "object",
                    "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
            }}
        }
    });
    if let (Some(s), Some(e)) = (schema.as_object_mut(), extra_root.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "secretspolicies.secrets.quartet.dev"},
        "spec": {
            "group": "secrets.quartet.dev",
            "scope": "Namespaced",
            "names": {"plural": "secretspolicies", "singular": "secretspolicy",
                      "kind": "SecretsPolicy", "listKind": "SecretsPolicyList",
                      "shortNames": ["sp"], "categories": ["quartet"]},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Type", "type": "string", "jsonPath": ".spec.type"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Count", "type": "integer", "jsonPath": ".spec.count", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ]
            }]
        }
    })
}

pub fn crd() -> Value {
    crd_with(spec_schema(), json!({}))
}

pub fn cr(spec: Value) -> Value {
    json!({
        "apiVersion": "secrets.quartet.dev/v1alpha1",
        "kind": "SecretsPolicy",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": spec
    })
}
