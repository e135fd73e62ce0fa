//! A JSON value written as YAML: block style, every string and key double-quoted.

use serde_json::Value;

/// `value` as a YAML document (block style; strings and keys double-quoted with JSON's
/// escapes, which YAML's double-quoted style shares), ending with a newline.
///
/// ```
/// let yaml = ruststream::asyncapi::to_yaml(&serde_json::json!({"a": [1, {"b": "c"}]}));
/// assert_eq!(yaml, "\"a\":\n  - 1\n  - \"b\": \"c\"\n");
/// ```
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_block(value, 0, &mut out),
        Value::Array(items) if !items.is_empty() => write_block(value, 0, &mut out),
        scalar => {
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
    out
}

/// A non-empty map or sequence, each line indented by `indent` spaces.
fn write_block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                out.push_str(&pad);
                out.push_str(&quote(key));
                out.push(':');
                write_child(child, indent + 2, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_block(item) {
                    // The item's block, its first line's indentation turned into "- ".
                    let mut inner = String::new();
                    write_block(item, indent + 2, &mut inner);
                    out.push_str(&pad);
                    out.push_str("- ");
                    out.push_str(&inner[indent + 2..]);
                } else {
                    out.push_str(&pad);
                    out.push_str("- ");
                    out.push_str(&scalar_text(item));
                    out.push('\n');
                }
            }
        }
        scalar => {
            out.push_str(&pad);
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn write_child(child: &Value, indent: usize, out: &mut String) {
    if is_block(child) {
        out.push('\n');
        write_block(child, indent, out);
    } else {
        out.push(' ');
        out.push_str(&scalar_text(child));
        out.push('\n');
    }
}

fn is_block(value: &Value) -> bool {
    match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    }
}

/// A scalar, or an empty map or sequence, in flow style.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        other => other.to_string(),
    }
}

fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::to_yaml;
    use serde_json::json;

    #[test]
    fn nested_blocks_indent_and_items_start_with_a_dash() {
        let value = json!({
            "k": {"list": [[1, 2], {"x": null, "y": true}, [], {}], "s": "a: \"b\"\n"},
            "n": 1.5,
        });
        let expected = concat!(
            "\"k\":\n",
            "  \"list\":\n",
            "    - - 1\n",
            "      - 2\n",
            "    - \"x\": null\n",
            "      \"y\": true\n",
            "    - []\n",
            "    - {}\n",
            "  \"s\": \"a: \\\"b\\\"\\n\"\n",
            "\"n\": 1.5\n",
        );
        assert_eq!(to_yaml(&value), expected);
    }

    #[test]
    fn a_scalar_document_is_one_line() {
        assert_eq!(to_yaml(&json!("x")), "\"x\"\n");
        assert_eq!(to_yaml(&json!({})), "{}\n");
    }
}
