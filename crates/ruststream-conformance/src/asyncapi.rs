//! A service's AsyncAPI document written where `scripts/test` validates it.

use std::path::PathBuf;

use ruststream::App;
use ruststream::asyncapi::{AsyncApiInfo, Format};

/// Writes `app`'s document as `<name>.json` and `<name>.yaml` into
/// `RUSTSTREAM_ASYNCAPI_OUT` (which `scripts/test` sets and then validates every document
/// it names), else into `fallback`.
///
/// # Panics
///
/// If the document cannot be made or written: a test's failure.
pub fn write(name: &str, app: &App, info: &AsyncApiInfo, fallback: PathBuf) {
    let dir = std::env::var_os("RUSTSTREAM_ASYNCAPI_OUT")
        .map(PathBuf::from)
        .unwrap_or(fallback);
    std::fs::create_dir_all(&dir).expect("output directory");
    for (format, extension) in [(Format::Json, "json"), (Format::Yaml, "yaml")] {
        let text = app.asyncapi_string(info, format).expect("document");
        std::fs::write(dir.join(format!("{name}.{extension}")), text).expect("write");
    }
}
