//! The Swagger 2.0 document as kube-apiserver serves it to kubectl: protobuf, in gnostic's
//! `openapi.v2.Document` message (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! the media type client-go's `OpenAPISchema()` asks for, with no JSON fallback).
//!
//! Encoded: `swagger`, `info` and `definitions` (kubectl builds its v2 models from definitions
//! only; `paths` are not read). Schema keywords map to their gnostic fields; `default`,
//! `enum`, `example` and `x-*` vendor extensions are `Any { yaml }` carrying the JSON text
//! (JSON is YAML), as gnostic does.
//!
//! Deliberate difference from kube: definitions of built-in kinds are published without
//! `x-kubernetes-group-version-kind`, so kubectl finds no v2 model for them and computes
//! client-side-apply patches from its compiled-in Go types (k8s-openapi's schemas lack the
//! `x-kubernetes-patch-*` directives kubectl would read there; the compiled-in types carry
//! exactly the real semantics). Custom resources keep it.

use serde_json::{Map, Value};

/// Field numbers of gnostic's `openapi.v2.Schema`.
mod schema_field {
    pub const REF: u64 = 1;
    pub const FORMAT: u64 = 2;
    pub const TITLE: u64 = 3;
    pub const DESCRIPTION: u64 = 4;
    pub const DEFAULT: u64 = 5;
    pub const MULTIPLE_OF: u64 = 6;
    pub const MAXIMUM: u64 = 7;
    pub const EXCLUSIVE_MAXIMUM: u64 = 8;
    pub const MINIMUM: u64 = 9;
    pub const EXCLUSIVE_MINIMUM: u64 = 10;
    pub const MAX_LENGTH: u64 = 11;
    pub const MIN_LENGTH: u64 = 12;
    pub const PATTERN: u64 = 13;
    pub const MAX_ITEMS: u64 = 14;
    pub const MIN_ITEMS: u64 = 15;
    pub const UNIQUE_ITEMS: u64 = 16;
    pub const MAX_PROPERTIES: u64 = 17;
    pub const MIN_PROPERTIES: u64 = 18;
    pub const REQUIRED: u64 = 19;
    pub const ENUM: u64 = 20;
    pub const ADDITIONAL_PROPERTIES: u64 = 21;
    pub const TYPE: u64 = 22;
    pub const ITEMS: u64 = 23;
    pub const ALL_OF: u64 = 24;
    pub const PROPERTIES: u64 = 25;
    pub const DISCRIMINATOR: u64 = 26;
    pub const READ_ONLY: u64 = 27;
    pub const EXAMPLE: u64 = 30;
    pub const VENDOR_EXTENSION: u64 = 31;
}

#[derive(Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint((field << 3) | wire);
    }

    fn bytes(&mut self, field: u64, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u64, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u64, m: Buf) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u64, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u64, v: i64) {
        self.key(field, 0);
        self.varint(v as u64);
    }

    fn double(&mut self, field: u64, v: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

/// gnostic `Any { yaml = 2 }` holding a JSON value.
fn any(v: &Value) -> Buf {
    let mut b = Buf::default();
    b.string(2, &v.to_string());
    b
}

/// `NamedSchema { name = 1; value = 2 }` entries of a `Properties`/`Definitions` message.
fn named_schemas(m: &Map<String, Value>, strip_gvk: &dyn Fn(&str) -> bool) -> Buf {
    let mut b = Buf::default();
    for (name, s) in m {
        let mut named = Buf::default();
        named.string(1, name);
        named.message(2, schema(s, strip_gvk(name)));
        b.message(1, named);
    }
    b
}

fn schema(s: &Value, strip_gvk: bool) -> Buf {
    use schema_field as f;
    let mut b = Buf::default();
    let Some(m) = s.as_object() else {
        return b;
    };
    let no_strip: &dyn Fn(&str) -> bool = &|_| false;
    for (k, v) in m {
        match k.as_str() {
            "$ref" => v.as_str().iter().for_each(|r| b.string(f::REF, r)),
            "format" => v.as_str().iter().for_each(|x| b.string(f::FORMAT, x)),
            "title" => v.as_str().iter().for_each(|x| b.string(f::TITLE, x)),
            "description" => v.as_str().iter().for_each(|x| b.string(f::DESCRIPTION, x)),
            "pattern" => v.as_str().iter().for_each(|x| b.string(f::PATTERN, x)),
            "discriminator" => v
                .as_str()
                .iter()
                .for_each(|x| b.string(f::DISCRIMINATOR, x)),
            "default" => b.message(f::DEFAULT, any(v)),
            "example" => b.message(f::EXAMPLE, any(v)),
            "multipleOf" | "maximum" | "minimum" => {
                let field = match k.as_str() {
                    "multipleOf" => f::MULTIPLE_OF,
                    "maximum" => f::MAXIMUM,
                    _ => f::MINIMUM,
                };
                if let Some(x) = v.as_f64() {
                    b.double(field, x);
                }
            }
            "exclusiveMaximum" | "exclusiveMinimum" | "uniqueItems" | "readOnly" => {
                let field = match k.as_str() {
                    "exclusiveMaximum" => f::EXCLUSIVE_MAXIMUM,
                    "exclusiveMinimum" => f::EXCLUSIVE_MINIMUM,
                    "uniqueItems" => f::UNIQUE_ITEMS,
                    _ => f::READ_ONLY,
                };
                b.boolean(field, v.as_bool() == Some(true));
            }
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
            | "minProperties" => {
                let field = match k.as_str() {
                    "maxLength" => f::MAX_LENGTH,
                    "minLength" => f::MIN_LENGTH,
                    "maxItems" => f::MAX_ITEMS,
                    "minItems" => f::MIN_ITEMS,
                    "maxProperties" => f::MAX_PROPERTIES,
                    _ => f::MIN_PROPERTIES,
                };
                if let Some(x) = v.as_i64() {
                    b.int64(field, x);
                }
            }
            "required" => v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .for_each(|r| b.string(f::REQUIRED, r)),
            "enum" => v
                .as_array()
                .into_iter()
                .flatten()
                .for_each(|e| b.message(f::ENUM, any(e))),
            "additionalProperties" => {
                let mut item = Buf::default();
                match v {
                    Value::Bool(x) => {
                        item.key(2, 0);
                        item.varint(u64::from(*x));
                    }
                    other => item.message(1, schema(other, false)),
                }
                b.message(f::ADDITIONAL_PROPERTIES, item);
            }
            "type" => {
                let mut t = Buf::default();
                match v {
                    Value::String(x) => t.string(1, x),
                    Value::Array(a) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .for_each(|x| t.string(1, x)),
                    _ => {}
                }
                b.message(f::TYPE, t);
            }
            "items" => {
                let mut items = Buf::default();
                match v {
                    Value::Array(a) => a.iter().for_each(|x| items.message(1, schema(x, false))),
                    other => items.message(1, schema(other, false)),
                }
                b.message(f::ITEMS, items);
            }
            "allOf" => v
                .as_array()
                .into_iter()
                .flatten()
                .for_each(|x| b.message(f::ALL_OF, schema(x, false))),
            "properties" => {
                if let Some(p) = v.as_object() {
                    b.message(f::PROPERTIES, named_schemas(p, no_strip));
                }
            }
            x if x.starts_with("x-") => {
                if strip_gvk && x == "x-kubernetes-group-version-kind" {
                    continue;
                }
                let mut named = Buf::default();
                named.string(1, x);
                named.message(2, any(v));
                b.message(f::VENDOR_EXTENSION, named);
            }
            _ => {}
        }
    }
    b
}

/// Encodes the Swagger 2.0 JSON document `doc` as a gnostic `openapi.v2.Document`.
/// `is_builtin(definition_name)` tells which definitions lose their group-version-kind.
pub fn encode(doc: &Value, is_builtin: &dyn Fn(&str) -> bool) -> Vec<u8> {
    let mut b = Buf::default();
    b.string(1, doc["swagger"].as_str().unwrap_or("2.0"));
    let mut info = Buf::default();
    info.string(1, doc["info"]["title"].as_str().unwrap_or("Kubernetes"));
    info.string(2, doc["info"]["version"].as_str().unwrap_or(""));
    b.message(2, info);
    if let Some(defs) = doc["definitions"].as_object() {
        b.message(9, named_schemas(defs, is_builtin));
    }
    b.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_a_definition_with_nested_messages() {
        let doc = json!({"swagger": "2.0", "info": {"title": "K", "version": "v"},
            "definitions": {"a": {"type": "object", "required": ["x"]}}});
        let out = encode(&doc, &|_| false);
        // swagger (1), info (2), definitions (9) in order.
        assert_eq!(&out[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert!(out.windows(1).any(|w| w[0] == (9 << 3 | 2)));
        let tail = String::from_utf8_lossy(&out);
        assert!(tail.contains("object") && tail.contains('x'));
    }
}
